//! A lock store on a real Sentinel set (1 master, 1 replica, 3 sentinels, stopped by pid):
//! the lock lands on the master the sentinels name, and after `SENTINEL FAILOVER` (the old
//! master still up) new locks land on the new master within seconds. The JS tests cover every
//! API and the loss of a lock (`__test__/sentinel.test.js`, `__test__/faults/sentinel-failover.test.js`).

mod common;
#[path = "common/sentinel.rs"]
mod sentinel;

use native_redis_lock::core::api::{Attempt, Endpoint, EndpointSpec, Locker, Store};
use sentinel::SentinelSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "sn:";

fn locker(set: &SentinelSet) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(set.url()),
        connect_timeout: Some(MS(1000)),
        ..Default::default()
    })
    .expect("a Sentinel endpoint");
    Arc::new(Locker::new(Store::shared(endpoint), PREFIX, MS(1000)))
}

fn pttl(set: &SentinelSet, port: u16, key: &str) -> i64 {
    let mut raw = set.server(port).raw();
    redis::cmd("PTTL")
        .arg(format!("{PREFIX}{key}"))
        .query(&mut raw)
        .expect("PTTL")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_land_on_the_master_and_follow_a_failover() {
    let set = SentinelSet::start();
    let locks = locker(&set);
    let master = set.sentinels[0].master_port().expect("a master");
    let Attempt::Acquired(lease) = locks.attempt("before", MS(10_000)).await.expect("attempt")
    else {
        panic!("held");
    };
    assert!(
        pttl(&set, master, "before") > 0,
        "the lock is on the master"
    );
    drop(lease);

    let new = tokio::task::block_in_place(|| set.failover());
    assert_ne!(new, master);
    let promoted = Instant::now();
    // The old master may take writes until the sentinels demote it: try fresh keys until one
    // lands on the new master.
    let mut round = 0;
    loop {
        round += 1;
        let key = format!("after-{round}");
        if let Ok(Attempt::Acquired(_)) = locks.attempt(&key, MS(10_000)).await {
            if pttl(&set, new, &key) > 0 {
                break;
            }
        }
        assert!(
            promoted.elapsed() < MS(5000),
            "no lock reached the new master within 5 s of the promotion"
        );
        tokio::time::sleep(MS(100)).await;
    }
}
