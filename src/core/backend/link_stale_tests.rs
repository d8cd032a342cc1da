//! A Sentinel link's stale mark: one met with no connection in place stays for the next
//! connection, and a connection whose lookup began before a mark is not used (its lookup may
//! have named the master the mark left). The sentinel and the master are played in RESP.

use super::Link;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::backend::fake_resp::{fake, Deaf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A link to the set one sentinel on `sentinel` makes.
fn link_of(sentinel: u16) -> Arc<Link> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(format!("redis+sentinel://127.0.0.1:{sentinel}/mymaster")),
        connect_timeout: Some(Duration::from_secs(2)),
        ..EndpointSpec::default()
    })
    .unwrap();
    Arc::new(Link::new(endpoint, &[], Arc::new(Deaf)))
}

#[tokio::test]
async fn a_mark_with_no_connection_in_place_stays_for_the_next_one() {
    let (sentinel, serving, _) = fake(1, 1, Duration::ZERO).await;
    let link = link_of(sentinel);
    link.stale.mark();
    assert!(link.kept_manager().is_none());
    assert!(
        link.stale.is_marked(),
        "a call with no connection took the mark"
    );
    serving.abort();
}

#[tokio::test]
async fn a_connection_whose_lookup_began_before_a_mark_is_not_used() {
    let (master, master_serving, _) = fake(0, 0, Duration::ZERO).await;
    // Each reply 300 ms late: a lookup takes 600 ms at least (HELLO, SENTINEL MASTER).
    let (sentinel, serving, asked) = fake(master, 1, Duration::from_millis(300)).await;
    let link = link_of(sentinel);
    let opening = tokio::spawn({
        let link = link.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(5);
            link.manager(deadline).await.map(|_| ())
        }
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    // The re-check found the master moved while the lookup was under way.
    link.stale.mark_told();
    opening.await.unwrap().unwrap();
    assert_eq!(
        asked.load(Ordering::SeqCst),
        2,
        "the lookup was not made again"
    );
    // Its mark taken by the connection installed: the next call keeps it.
    assert!(!link.stale.is_marked());
    assert!(link.kept_manager().is_some());
    serving.abort();
    master_serving.abort();
}
