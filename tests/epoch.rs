//! The restart quarantine (`restartQuarantineMs`, proto/epoch.rs) against a real
//! redis-server: a server incarnation our clients have known for less than the quarantine
//! gives no lock; the gate is learned with two commands per connection, none when off.

mod common;
#[path = "common/sentinel.rs"]
mod sentinel;

use common::{calls, RedisServer};
use native_redis_lock::core::api::{Attempt, Endpoint, EndpointSpec, Locker, Store};
use native_redis_lock::core::basics::error::LockError;
use sentinel::SentinelSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;
const Q: Duration = Duration::from_millis(1_000);

/// A locker on a connection of its own (each `connect` a distinct endpoint), with `quarantine`
/// and attempts bounded by `bound`.
fn locker(
    server: &RedisServer,
    quarantine: Duration,
    bound: Duration,
    connect: u64,
) -> Arc<Locker> {
    locker_at(&server.url(), quarantine, bound, connect)
}

/// `locker`, at `url`.
fn locker_at(url: &str, quarantine: Duration, bound: Duration, connect: u64) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(url.to_owned()),
        connect_timeout: Some(MS(connect)),
        restart_quarantine: Some(quarantine),
        ..Default::default()
    })
    .expect("endpoint");
    Arc::new(Locker::new(Store::shared(endpoint), "epoch:", bound))
}

/// An attempt at `key`, which must win; how long it took.
async fn won(locker: &Locker, key: &str) -> Duration {
    let started = Instant::now();
    match locker.attempt(key, MS(10_000)).await {
        Ok(Attempt::Acquired(_)) => started.elapsed(),
        Ok(Attempt::Held { .. }) => panic!("{key}: held"),
        Err(err) => panic!("{key}: {err}"),
    }
}

/// The INFO and EVAL commands the server has run, read with one INFO (which counts itself).
fn counts(server: &RedisServer) -> (i64, i64) {
    let mut raw = server.raw();
    (calls(&mut raw, "info"), calls(&mut raw, "eval"))
}

/// The INFO and EVAL commands the server ran since `before`, but the readings' own.
fn ran_since(server: &RedisServer, before: (i64, i64)) -> (i64, i64) {
    let after = counts(server);
    // `calls` is one INFO each: two per reading, the second counting the first.
    (after.0 - before.0 - 2, after.1 - before.1)
}

#[tokio::test]
async fn a_fresh_server_is_quarantined_then_another_connection_to_it_is_not() {
    let server = RedisServer::start();
    let before = counts(&server);
    let first = locker(&server, Q, MS(5_000), 2_001);
    // The first attempt waits for the gate (within its 5 s bound), then wins.
    let waited = won(&first, "a").await;
    assert!(
        waited >= Q - MS(5),
        "the first lock came {waited:?} after asking, before {Q:?}"
    );
    // Two commands for the connection, none for the next attempt.
    let quick = won(&first, "b").await;
    assert!(quick < Q / 2, "{quick:?}");
    assert_eq!(ran_since(&server, before), (1, 1));
    // Another connection to the same incarnation: its quarantine is over.
    let before = counts(&server);
    let second = locker(&server, Q, MS(5_000), 2_002);
    let quick = won(&second, "c").await;
    assert!(
        quick < Q / 2,
        "a known server was quarantined again: {quick:?}"
    );
    assert_eq!(ran_since(&server, before), (1, 1));
}

#[tokio::test]
async fn a_server_restarted_empty_is_quarantined_again() {
    let mut server = RedisServer::start();
    let locks = locker(&server, Q, MS(5_000), 2_003);
    won(&locks, "before").await;
    assert!(won(&locks, "again").await < Q / 2);
    server.restart();
    let waited = won(&locks, "after").await;
    assert!(
        waited >= Q - MS(5),
        "a restarted server gave a lock after {waited:?}"
    );
    assert!(won(&locks, "later").await < Q / 2);
}

#[tokio::test]
async fn an_attempt_whose_bound_ends_before_the_gate_fails_naming_the_quarantine() {
    let server = RedisServer::start();
    // A quarantine far past the bound: an attempt that waited at the gate would take it
    // all, far past what a loaded machine adds to one refused at its bound or before.
    let locks = locker(&server, MS(5_000), MS(300), 2_004);
    let started = Instant::now();
    let err = match locks.attempt("k", MS(10_000)).await {
        Err(err) => err,
        Ok(_) => panic!("expected a refusal, got an answer"),
    };
    assert!(
        started.elapsed() < MS(2_500),
        "it waited: {:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            LockError::Quarantined {
                quarantine_ms: 5000,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "ECONNECTION");
    let text = err.to_string();
    assert!(text.contains("Redis was restarted"), "{text}");
    assert!(text.contains("restartQuarantineMs (5000)"), "{text}");
    let exists: i64 = redis::cmd("EXISTS")
        .arg("epoch:k")
        .query(&mut server.raw())
        .unwrap();
    assert_eq!(exists, 0, "nothing was attempted");
}

#[tokio::test]
async fn off_the_quarantine_sends_nothing_and_writes_no_epoch() {
    let server = RedisServer::start();
    let before = counts(&server);
    let locks = locker(&server, Duration::ZERO, MS(5_000), 2_005);
    assert!(won(&locks, "k").await < Q / 2);
    assert_eq!(ran_since(&server, before), (0, 0));
    let exists: i64 = redis::cmd("EXISTS")
        .arg(b"\xffepoch")
        .query(&mut server.raw())
        .unwrap();
    assert_eq!(exists, 0);
}

#[tokio::test]
async fn a_promoted_replica_is_another_incarnation() {
    let master = RedisServer::start();
    let replica = RedisServer::start_with(&[]);
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut replica.raw())
        .unwrap();
    let locks = locker(&master, Q, MS(5_000), 2_006);
    won(&locks, "k").await;
    // The epoch reaches the replica with the rest of the data set.
    let until = Instant::now() + MS(5_000);
    let run = loop {
        let run: Option<String> = redis::cmd("HGET")
            .arg(b"\xffepoch")
            .arg("run")
            .query(&mut replica.raw())
            .unwrap();
        if let Some(run) = run {
            break run;
        }
        assert!(
            Instant::now() < until,
            "the epoch never reached the replica"
        );
        std::thread::sleep(MS(20));
    };
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut replica.raw())
        .unwrap();
    let promoted = locker(&replica, Q, MS(5_000), 2_007);
    let waited = won(&promoted, "k2").await;
    assert!(
        waited >= Q - MS(5),
        "the promoted replica gave a lock after {waited:?}"
    );
    let now: String = redis::cmd("HGET")
        .arg(b"\xffepoch")
        .arg("run")
        .query(&mut replica.raw())
        .unwrap();
    assert_ne!(
        now, run,
        "the promoted replica's epoch names its own run_id"
    );
}

#[tokio::test]
async fn over_resp2_a_restart_is_noticed_at_the_next_call_and_quarantined() {
    // No HELLO: RESP2, no push tells of the drop; the attempt that meets it does.
    let mut server = RedisServer::start_with(&["--rename-command", "HELLO", ""]);
    let locks = locker(&server, Q, MS(5_000), 2_008);
    won(&locks, "before").await;
    server.restart();
    let restarted = Instant::now();
    // The first attempt on the dead connection may fail (its error, not a lock); the one that
    // wins comes after the gate.
    let mut tries = 0;
    loop {
        tries += 1;
        match locks.attempt(&format!("after-{tries}"), MS(10_000)).await {
            Ok(Attempt::Acquired(_)) => break,
            Ok(Attempt::Held { .. }) => panic!("a fresh key held"),
            Err(err) => assert!(tries < 3, "{err}"),
        }
    }
    let waited = restarted.elapsed();
    assert!(
        waited >= Q - MS(5),
        "a restarted RESP2 server gave a lock after {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sentinel_failover_the_new_master_gives_no_lock_within_the_quarantine() {
    let set = SentinelSet::start();
    let locks = locker_at(&set.url(), Q, MS(5_000), 2_009);
    won(&locks, "before").await;
    let new = tokio::task::block_in_place(|| set.failover());
    let promoted = Instant::now();
    // The old master may take writes until the sentinels demote it: fresh keys until one
    // lands on the new master.
    let mut raw = set.server(new).raw();
    let mut round = 0;
    let key = loop {
        round += 1;
        let key = format!("after-{round}");
        if let Ok(Attempt::Acquired(_)) = locks.attempt(&key, MS(10_000)).await {
            let pttl: i64 = redis::cmd("PTTL")
                .arg(format!("epoch:{key}"))
                .query(&mut raw)
                .unwrap();
            if pttl > 0 {
                break key;
            }
        }
        assert!(
            promoted.elapsed() < MS(10_000),
            "no lock reached the new master"
        );
        tokio::time::sleep(MS(50)).await;
    };
    // When Redis set it, by the new master's clock: at least Q after our clients first met it.
    let born: u64 = redis::cmd("HGET")
        .arg(b"\xffepoch")
        .arg("born")
        .query(&mut raw)
        .unwrap();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut raw).unwrap();
    let now = secs * 1_000 + micros / 1_000;
    let pttl: u64 = redis::cmd("PTTL")
        .arg(format!("epoch:{key}"))
        .query(&mut raw)
        .unwrap();
    let set_at = now - (10_000 - pttl);
    assert!(
        set_at + 5 >= born + Q.as_millis() as u64,
        "{key} was set {} ms after the new master was first met",
        set_at as i64 - born as i64
    );
}

#[tokio::test]
async fn a_lock_that_waited_at_the_gate_keeps_its_whole_ttl() {
    let server = RedisServer::start();
    let locks = locker(&server, MS(1_500), MS(5_000), 2_010);
    let ttl = MS(1_000);
    let lease = match locks.attempt("short", ttl).await {
        Ok(Attempt::Acquired(lease)) => lease,
        Ok(Attempt::Held { .. }) => panic!("a fresh key held"),
        Err(err) => panic!("{err}"),
    };
    // Stamped before the 1.5 s wait, the lease came expired; stamped after, it has about
    // its TTL left (the attempt's own round trip off it).
    assert!(lease.is_held(), "handed over expired");
    let left = lease.remaining();
    assert!(left > ttl / 2, "{left:?} of {ttl:?} left");
    let pttl: i64 = redis::cmd("PTTL")
        .arg("epoch:short")
        .query(&mut server.raw())
        .unwrap();
    assert!(
        pttl > 0 && left <= MS(pttl as u64 + 5),
        "{left:?} past Redis's {pttl} ms"
    );
}

#[tokio::test]
async fn a_cancelled_acquisition_stops_waiting_at_the_gate() {
    let server = RedisServer::start();
    let locks = locker(&server, MS(3_000), MS(10_000), 2_011);
    let cancel = tokio_util::sync::CancellationToken::new();
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(MS(300)).await;
        later.cancel();
    });
    let started = Instant::now();
    let answer = locks
        .acquire("cancelled", MS(10_000), 0, MS(100), &cancel)
        .await;
    let took = started.elapsed();
    match answer {
        Err(LockError::Aborted) => {}
        Err(err) => panic!("expected Aborted: {err}"),
        Ok(_) => panic!("a cancelled call won"),
    }
    assert!(took < MS(2_000), "the gate held a cancelled call {took:?}");
    let exists: i64 = redis::cmd("EXISTS")
        .arg("epoch:cancelled")
        .query(&mut server.raw())
        .unwrap();
    assert_eq!(exists, 0, "a cancelled call took the lock");
}

#[tokio::test]
async fn an_acl_without_info_fails_the_attempt_naming_the_option() {
    let server = RedisServer::start();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("noinfo")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+@all")
        .arg("-info")
        .query(&mut server.raw())
        .unwrap();
    let url = format!("redis://noinfo:pw@127.0.0.1:{}", server.port);
    let locks = locker_at(&url, Q, MS(2_000), 2_012);
    let err = match locks.attempt("k", MS(10_000)).await {
        Err(err) => err,
        Ok(_) => panic!("a user without INFO got an answer"),
    };
    assert_eq!(err.code(), "ENOPERM", "{err}");
    assert!(err.to_string().contains("restartQuarantineMs"), "{err}");
}
