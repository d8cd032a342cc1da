//! A dropped connection's push: one drop per drop, told once whether the push or a call meets
//! it first, and nothing at all from a connection already replaced.

use super::PushSink;
use super::{Conduit, Subscribed};
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::backend::lock_store::{Listener, LostScope};
use crate::core::backend::staleness::Staleness;
use crate::core::basics::drops::Drops;
use redis::aio::ConnectionManager;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How many times the waiters were told their subscriptions were lost.
#[derive(Default)]
struct LostCount(Mutex<usize>);

impl Listener for LostCount {
    fn message(&self, _: &[u8], _: &[u8]) {}
    fn connection_lost(&self, _: LostScope) {
        *self.0.lock().unwrap() += 1;
    }
    fn unsubscribed(&self, _: &[u8]) {}
}

/// Connection 1's pushes, answered since the last drop, with `current` in use now.
fn sink(current: u64) -> (PushSink, Arc<LostCount>) {
    let lost = Arc::new(LostCount::default());
    let sink = PushSink {
        dropped: Arc::new(Drops::default()),
        setup: Arc::default(),
        subscribed: Arc::default(),
        scripts_ready: Arc::new(AtomicBool::new(true)),
        scripts_refused: Arc::new(AtomicBool::new(false)),
        listener: lost.clone(),
        stale: Some(Arc::new(Staleness::default())),
        id: 1,
        current: Arc::new(AtomicU64::new(current)),
        up: Arc::new(AtomicBool::new(true)),
    };
    (sink, lost)
}

fn disconnection() -> redis::PushInfo {
    redis::PushInfo {
        kind: redis::PushKind::Disconnection,
        data: vec![],
    }
}

fn stale(sink: &PushSink) -> &Staleness {
    sink.stale.as_deref().unwrap()
}

#[test]
fn a_drop_of_the_connection_in_use_is_marked_told_and_signalled() {
    let (sink, lost) = sink(1);
    sink.deliver(&disconnection());
    assert!(sink.dropped.last().is_some());
    assert!(!sink.up.load(Ordering::Relaxed));
    assert_eq!(stale(&sink).take(), Some(false));
    assert_eq!(*lost.0.lock().unwrap(), 1);
}

#[test]
fn a_drop_a_call_already_signalled_is_not_signalled_again() {
    let (sink, _) = sink(1);
    // `Link::call` met the drop first: it marked, signalled and cleared `up`.
    sink.up.store(false, Ordering::Relaxed);
    stale(&sink).mark_told();
    sink.dropped.signal();
    let signalled = sink.dropped.last();
    sink.deliver(&disconnection());
    assert_eq!(sink.dropped.last(), signalled);
    assert_eq!(stale(&sink).take(), Some(false));
}

#[test]
fn a_drop_of_a_connection_already_replaced_marks_and_signals_nothing() {
    let (sink, lost) = sink(2);
    sink.deliver(&disconnection());
    assert_eq!(sink.dropped.last(), None);
    assert!(!stale(&sink).is_marked());
    assert!(sink.up.load(Ordering::Relaxed));
    assert_eq!(*lost.0.lock().unwrap(), 0);
}

/// The `DEBUG` line of a reconnect names what the crate subscribes to again after its
/// setup; a new connection's names nothing more.
#[test]
fn a_reconnects_setup_ends_with_its_subscriptions_again() {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some("redis://127.0.0.1:1".into()),
        ..Default::default()
    })
    .unwrap();
    let text = |subscribed: &Subscribed| {
        let setup = ConnectionManager::setup(&endpoint, true, subscribed).unwrap();
        String::from_utf8_lossy(&setup.get_packed_pipeline()).into_owned()
    };
    let fresh = text(&Subscribed::default());
    assert!(!fresh.contains("SUBSCRIBE"), "{fresh}");
    let mut subscribed = Subscribed::default();
    subscribed.add(b"native-redis-lock:watch", false);
    subscribed.add(b"{lock:a}:released", true);
    subscribed.add(b"{lock:b}:released", true);
    subscribed.remove(&[b"{lock:b}:released".to_vec()]);
    let again = text(&subscribed);
    let tail = "*2\r\n$9\r\nSUBSCRIBE\r\n$23\r\nnative-redis-lock:watch\r\n\
                *2\r\n$10\r\nSSUBSCRIBE\r\n$17\r\n{lock:a}:released\r\n";
    assert!(
        again.starts_with(&fresh) && again.ends_with(tail),
        "{again}"
    );
}
