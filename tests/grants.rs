//! Grants across processes (`crossProcessGrants`): a release gives the lock to the next
//! connection of the lock's ring, and that connection's waiter holds it with no attempt of
//! its own. Each "process" is a store of its own (its own connection); waiters poll rarely
//! here (5 s), so only a grant can explain a prompt acquisition.

mod common;
#[path = "common/delay_proxy.rs"]
mod delay_proxy;

use common::{calls, RedisServer};
use delay_proxy::DelayProxy;
use native_redis_lock::core::api::{
    Attempt, Endpoint, EndpointSpec, Locker, Store, TenureTerms, HANDOVER_CHAIN, KICK_AFTER,
};
use native_redis_lock::core::basics::keys;
use native_redis_lock::core::basics::lease::Lease;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const MS: fn(u64) -> Duration = Duration::from_millis;
const SLOW_POLL: Duration = Duration::from_secs(5);

/// A locker on a connection of its own that grants (settings that differ in anything, here
/// the connect timeout, get connections of their own).
fn process(server: &RedisServer, n: u64) -> Arc<Locker> {
    process_with(server, n, Some(true))
}

async fn take(locks: &Locker, key: &str) -> Lease {
    match locks.attempt(key, MS(30_000)).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} held"),
    }
}

fn process_with(server: &RedisServer, n: u64, grants: Option<bool>) -> Arc<Locker> {
    process_at(server.url(), n, grants)
}

/// As `process_with`, on the server at `url` (a proxy in front of one, say).
fn process_at(url: String, n: u64, grants: Option<bool>) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(url),
        connect_timeout: Some(MS(2000 + n)),
        cross_process_grants: grants,
        ..Default::default()
    })
    .expect("endpoint");
    Arc::new(Locker::new(Store::shared(endpoint), "lock:", MS(2000)))
}

/// A waiter for `key` that keeps what it wins, and when it had it.
fn wait_for(locks: &Arc<Locker>, key: &str, cancel: &CancellationToken) -> Waiting {
    let (locks, key, cancel) = (locks.clone(), key.to_owned(), cancel.clone());
    tokio::spawn(async move {
        let lease = locks
            .wait(&key, MS(30_000), MS(20_000), SLOW_POLL, &cancel)
            .await
            .ok()?;
        Some((lease, Instant::now()))
    })
}

fn ring(server: &RedisServer, key: &str) -> Vec<String> {
    let ring = keys::ring_key(format!("lock:{key}").as_bytes());
    redis::cmd("LRANGE")
        .arg(ring)
        .arg(0)
        .arg(-1)
        .query(&mut server.raw())
        .expect("LRANGE")
}

fn holder_of(server: &RedisServer, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(format!("lock:{key}"))
        .query(&mut server.raw())
        .expect("GET")
}

/// Waits until `locks`'s connection is in `key`'s ring (its waiter joined).
async fn joined(server: &RedisServer, key: &str, locks: &Locker) {
    in_ring(server, key, locks, true).await;
}

/// `locks` waits for `key`, joins its ring, then its waiter gives up: the connection stays
/// in the ring, still listening, as an abort that came as a grant was sent would leave it.
async fn linger(server: &RedisServer, key: &str, locks: &Arc<Locker>) {
    let cancel = CancellationToken::new();
    let leaving = wait_for(locks, key, &cancel);
    joined(server, key, locks).await;
    cancel.cancel();
    assert!(leaving.await.unwrap().is_none());
}

/// A waiter's task: what it won, and when.
type Waiting = tokio::task::JoinHandle<Option<(Lease, Instant)>>;

/// Three processes on `key`: the first holds it (the lease), the second lingers in its ring
/// (first in line, see `linger`), the third waits behind it.
async fn line_up(server: &RedisServer, key: &str) -> ([Arc<Locker>; 3], Lease, Waiting) {
    let (holder, lingering, next) = (process(server, 1), process(server, 2), process(server, 3));
    let lease = take(&holder, key).await;
    linger(server, key, &lingering).await;
    let waiting = wait_for(&next, key, &CancellationToken::new());
    joined(server, key, &next).await;
    ([holder, lingering, next], lease, waiting)
}

/// Waits until `locks`'s connection is in `key`'s ring (`inside`) or out of it.
async fn in_ring(server: &RedisServer, key: &str, locks: &Locker, inside: bool) {
    let id = locks.store().id().to_owned();
    let until = Instant::now() + MS(3000);
    while ring(server, key).contains(&id) != inside {
        assert!(Instant::now() < until, "never in the ring: {inside}");
        tokio::time::sleep(MS(10)).await;
    }
}

#[tokio::test]
async fn a_release_grants_the_lock_to_a_waiter_of_another_process_that_makes_no_attempt() {
    let server = RedisServer::start();
    let (holder, waiter) = (process(&server, 1), process(&server, 2));
    let lease = take(&holder, "job").await;
    let waiting = wait_for(&waiter, "job", &CancellationToken::new());
    joined(&server, "job", &waiter).await;
    let mut monitor = server.raw();
    let (sets, lpushes) = (calls(&mut monitor, "set"), calls(&mut monitor, "lpush"));
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let (granted, at) = waiting.await.unwrap().expect("granted");
    let after = at.duration_since(released);
    assert!(after < MS(1000), "took {after:?}: the poll, not the grant");
    // The release's SET of the grant's token and nothing else: no attempt (SET NX) of the
    // waiter's, and no joining again.
    assert_eq!(calls(&mut monitor, "set") - sets, 1);
    assert_eq!(calls(&mut monitor, "lpush") - lpushes, 0);
    assert_eq!(
        holder_of(&server, "job").as_deref(),
        Some(&granted.token[..])
    );
    assert!(granted.fence > lease.fence);
    // Confirmed with the waiter's own TTL, not left to its claim.
    let pttl: i64 = redis::cmd("PTTL")
        .arg("lock:job")
        .query(&mut monitor)
        .unwrap();
    assert!(pttl > 20_000, "PTTL {pttl}: the claim, unconfirmed");
    assert!(granted.remaining() > MS(20_000));
    assert_eq!(granted.key, "job");
    assert!(waiter.release(&granted).await.unwrap());
    assert_eq!(holder_of(&server, "job"), None);
    // Nobody else in the ring: freed. The releaser stays in it for its next wait.
    assert_eq!(ring(&server, "job"), vec![waiter.store().id().to_owned()]);
}

#[tokio::test]
async fn a_grant_nobody_takes_any_more_is_passed_on_to_the_next_connection() {
    let server = RedisServer::start();
    let ([holder, gone, next], lease, waiting) = line_up(&server, "pass").await;
    // Its connection stays in the ring, first in line, still listening: as an abort that
    // came as the grant was sent would leave it.
    let (ring_now, mut raw) = (ring(&server, "pass"), server.raw());
    assert_eq!(ring_now.last(), Some(&gone.store().id().to_owned()));
    let turns = calls(&mut raw, "rpoplpush");
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let (granted, at) = waiting.await.unwrap().expect("passed on");
    let after = at.duration_since(released);
    assert!(after < MS(1000), "took {after:?}: the poll, not the grant");
    assert_eq!(
        holder_of(&server, "pass").as_deref(),
        Some(&granted.token[..])
    );
    // Granted to `gone`, which passed it on: two turns of the ring.
    assert_eq!(calls(&mut raw, "rpoplpush") - turns, 2);
    // The connection that passed it on left the ring as it did.
    assert!(!ring(&server, "pass").contains(&gone.store().id().to_owned()));
    assert!(next.release(&granted).await.unwrap());
}

#[tokio::test]
async fn a_connection_that_no_longer_listens_is_skipped_and_taken_out() {
    let server = RedisServer::start();
    let (holder, waiter) = (process(&server, 1), process(&server, 2));
    let lease = take(&holder, "dead").await;
    let waiting = wait_for(&waiter, "dead", &CancellationToken::new());
    joined(&server, "dead", &waiter).await;
    // A process killed while in line: its id first, nobody listening on its channel.
    let mut raw = server.raw();
    let _: i64 = redis::cmd("RPUSH")
        .arg(keys::ring_key(b"lock:dead"))
        .arg("killed")
        .query(&mut raw)
        .unwrap();
    let (turns, removed) = (calls(&mut raw, "rpoplpush"), calls(&mut raw, "lpop"));
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let (granted, at) = waiting.await.unwrap().expect("granted");
    assert!(at.duration_since(released) < MS(1000));
    assert!(!ring(&server, "dead").contains(&"killed".to_owned()));
    assert_eq!(calls(&mut raw, "rpoplpush") - turns, 2);
    assert_eq!(calls(&mut raw, "lpop") - removed, 1);
    assert!(waiter.release(&granted).await.unwrap());
}

#[tokio::test]
async fn without_the_option_a_release_wakes_as_before_and_nothing_joins_a_ring() {
    let server = RedisServer::start();
    let (holder, waiter) = (
        process_with(&server, 1, None),
        process_with(&server, 2, None),
    );
    let lease = take(&holder, "old").await;
    let waiting = wait_for(&waiter, "old", &CancellationToken::new());
    tokio::time::sleep(MS(300)).await;
    assert!(holder.release(&lease).await.unwrap());
    let (won, _) = waiting.await.unwrap().expect("woken");
    let mut raw = server.raw();
    assert_eq!(calls(&mut raw, "rpoplpush"), 0);
    assert_eq!(calls(&mut raw, "lpush"), 0);
    assert!(ring(&server, "old").is_empty());
    assert!(waiter.release(&won).await.unwrap());
}

#[tokio::test]
async fn over_resp2_the_option_changes_nothing_and_waiters_poll() {
    let server = RedisServer::start_with(&["--rename-command", "HELLO", ""]);
    let (holder, waiter) = (process(&server, 1), process(&server, 2));
    let lease = take(&holder, "resp2").await;
    let (locks, started) = (waiter.clone(), Instant::now());
    let waiting = tokio::spawn(async move {
        locks
            .wait(
                "resp2",
                MS(5000),
                MS(5000),
                MS(50),
                &CancellationToken::new(),
            )
            .await
    });
    tokio::time::sleep(MS(200)).await;
    assert!(!holder.store().grants());
    assert!(holder.release(&lease).await.unwrap());
    let won = waiting.await.unwrap().expect("wait");
    assert!(started.elapsed() < MS(2000));
    let mut raw = server.raw();
    assert_eq!(calls(&mut raw, "rpoplpush"), 0);
    assert!(ring(&server, "resp2").is_empty());
    assert!(waiter.release(&won).await.unwrap());
}

/// Two processes in `key`'s ring, the lock granted from `a` to `b` and back: `a` holds it,
/// and `b`, whose release granted it on, stays in the ring with nobody waiting there.
async fn granted_back(server: &RedisServer, key: &str) -> ([Arc<Locker>; 2], Lease) {
    let (a, b) = (process(server, 1), process(server, 2));
    let lease = take(&a, key).await;
    let first = wait_for(&b, key, &CancellationToken::new());
    joined(server, key, &b).await;
    assert!(a.release(&lease).await.unwrap());
    let (held_by_b, _) = first.await.unwrap().expect("granted to b");
    let second = wait_for(&a, key, &CancellationToken::new());
    joined(server, key, &a).await;
    assert!(b.release(&held_by_b).await.unwrap());
    let (held_by_a, _) = second.await.unwrap().expect("granted to a");
    ([a, b], held_by_a)
}

#[tokio::test]
async fn a_releaser_that_waits_again_joins_with_no_command_and_the_ring_brings_the_lock_back() {
    let server = RedisServer::start();
    let ([a, b], held_by_a) = granted_back(&server, "silent").await;
    // b's release granted the lock on, and b stays in the ring: its next wait sends nothing.
    let mut raw = server.raw();
    let before = (calls(&mut raw, "evalsha"), calls(&mut raw, "pttl"));
    let third = wait_for(&b, "silent", &CancellationToken::new());
    tokio::time::sleep(MS(300)).await;
    assert!(!third.is_finished());
    assert_eq!(
        (calls(&mut raw, "evalsha"), calls(&mut raw, "pttl")),
        before
    );
    let released = Instant::now();
    assert!(a.release(&held_by_a).await.unwrap());
    let (held, at) = third.await.unwrap().expect("granted to b again");
    assert!(
        at.duration_since(released) < MS(1000),
        "the poll, not the grant"
    );
    assert_eq!(
        holder_of(&server, "silent").as_deref(),
        Some(&held.token[..])
    );
    assert!(b.release(&held).await.unwrap());
}

#[tokio::test]
async fn a_releaser_that_waits_again_in_the_ring_first_polls_only_at_the_rings_cap() {
    let server = RedisServer::start();
    let ([a, b], held_by_a) = granted_back(&server, "cap").await;
    // b joins again silently, polling every 10 ms as asked: its first poll waits for the
    // ring's cap (100 ms), where before it came at 10, 20 and 40 ms, a round trip each.
    let mut raw = server.raw();
    let before = calls(&mut raw, "evalsha");
    let (b_, cancel) = (b.clone(), CancellationToken::new());
    let third = tokio::spawn(async move {
        let lease = b_
            .wait("cap", MS(30_000), MS(20_000), MS(10), &cancel)
            .await
            .ok()?;
        Some((lease, Instant::now()))
    });
    tokio::time::sleep(MS(80)).await;
    assert!(!third.is_finished());
    assert_eq!(calls(&mut raw, "evalsha"), before, "a poll before the cap");
    // Past the cap it polls (finding the lock held), and the grant still brings it.
    tokio::time::sleep(MS(120)).await;
    assert!(calls(&mut raw, "evalsha") > before, "no poll at the cap");
    assert!(!third.is_finished());
    let released = Instant::now();
    assert!(a.release(&held_by_a).await.unwrap());
    let (held, at) = third.await.unwrap().expect("granted to b again");
    assert!(at.duration_since(released) < MS(1000));
    assert_eq!(holder_of(&server, "cap").as_deref(), Some(&held.token[..]));
    assert!(b.release(&held).await.unwrap());
}

#[tokio::test]
async fn a_grant_whose_only_waiter_is_awake_goes_on_through_the_ring_at_once() {
    let server = RedisServer::start();
    let ([holder, awake, next], lease, waiting) = line_up(&server, "orphan").await;
    // A waiter of `awake` that was just woken (it is about to try on its own): no grant can
    // be handed to it, yet it is there.
    let wakes = awake.store().wakes().clone();
    let _ticket = wakes.join(b"lock:orphan", MS(10_000));
    let channel = keys::released_channel(b"lock:orphan");
    wakes.wake_local(&channel);
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let (granted, at) = waiting.await.unwrap().expect("passed on");
    let after = at.duration_since(released);
    assert!(after < MS(1000), "took {after:?}: the poll, not the ring");
    assert_eq!(
        holder_of(&server, "orphan").as_deref(),
        Some(&granted.token[..])
    );
    assert!(next.release(&granted).await.unwrap());
}

#[tokio::test]
async fn a_waiter_without_grants_gets_the_lock_while_the_ring_keeps_it_busy() {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    let server = RedisServer::start();
    let (stop, sections) = (CancellationToken::new(), Arc::new(AtomicU64::new(0)));
    // Two processes hand the lock to each other through the ring, over and over: it is
    // never free, and only a release that yields can let a third one in.
    let chain: Vec<_> = [process(&server, 1), process(&server, 2)]
        .into_iter()
        .map(|locks| {
            let (stop, sections) = (stop.clone(), sections.clone());
            tokio::spawn(async move {
                while let Ok(lease) = locks
                    .wait("busy", MS(30_000), MS(20_000), SLOW_POLL, &stop)
                    .await
                {
                    sections.fetch_add(1, SeqCst);
                    let _released = locks.release(&lease).await;
                }
            })
        })
        .collect();
    let until = Instant::now() + MS(5000);
    while sections.load(SeqCst) < 20 {
        assert!(Instant::now() < until, "the ring never got going");
        tokio::time::sleep(MS(5)).await;
    }
    let plain = process_with(&server, 3, None);
    // Grants, not sections: a holder's releases within its tenure grant nothing.
    let mut raw = server.raw();
    let (asked, at_ask) = (Instant::now(), calls(&mut raw, "spublish"));
    let waiting = wait_for(&plain, "busy", &CancellationToken::new());
    let got = tokio::time::timeout(MS(10_000), waiting).await;
    let waited = asked.elapsed();
    let handed = calls(&mut raw, "spublish") - at_ask;
    stop.cancel();
    let (lease, _) = got.expect("starved").unwrap().expect("acquired");
    println!("a waiter without grants held after {waited:?}, {handed} grants in between");
    // Expected: within 64 grants (a few ms each here); the bound is 10x generous on time.
    assert!(handed <= 2 * 64 + 2, "{handed} grants went first");
    assert!(plain.release(&lease).await.unwrap());
    for task in chain {
        task.await.unwrap();
    }
}

#[tokio::test]
async fn a_closing_process_leaves_the_rings_it_lingers_in_and_the_next_one_is_granted() {
    let server = RedisServer::start();
    let ([holder, closing, next], lease, waiting) = line_up(&server, "bye").await;
    // The process's stores are shared by the tests running beside this one: only its own.
    closing.store().leave_rings(MS(2000)).await;
    // Out of the ring: nothing will be granted to a process about to exit. `next` still waits
    // there: it has a waiter.
    assert_eq!(ring(&server, "bye"), vec![next.store().id().to_owned()]);
    let mut raw = server.raw();
    let turns = calls(&mut raw, "rpoplpush");
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let (granted, at) = waiting.await.unwrap().expect("granted");
    assert!(at.duration_since(released) < MS(1000));
    assert_eq!(
        calls(&mut raw, "rpoplpush") - turns,
        1,
        "no turn for the closed one"
    );
    assert!(next.release(&granted).await.unwrap());
}

#[tokio::test]
async fn a_ring_entry_left_by_a_dropped_connection_is_reused_or_skipped_and_no_grant_is_lost() {
    let server = RedisServer::start();
    let ([holder, _, next], lease, waiting) = line_up(&server, "drop").await;
    let before = ring(&server, "drop");
    // Every connection drops: the ring in Redis keeps both entries, and ours forget theirs.
    server.kill_clients();
    // `next`'s waiter tries again at once and listens again: its old entry serves, not a
    // second one. `stale` has nobody waiting: it never listens again.
    let channel = keys::grant_channel(b"lock:drop", next.store().id());
    let until = Instant::now() + MS(3000);
    loop {
        let (_, listening): (Vec<u8>, i64) = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(&channel)
            .query(&mut server.raw())
            .unwrap();
        if listening == 1 {
            break;
        }
        assert!(Instant::now() < until, "never listened again");
        tokio::time::sleep(MS(10)).await;
    }
    tokio::time::sleep(MS(100)).await;
    assert_eq!(ring(&server, "drop"), before);
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    // The stale entry is first in line: nobody hears its grant, so it goes, and `next` has it.
    let (granted, at) = waiting.await.unwrap().expect("granted");
    let after = at.duration_since(released);
    assert!(after < MS(1000), "took {after:?}: the poll, not the grant");
    assert_eq!(ring(&server, "drop"), vec![next.store().id().to_owned()]);
    assert!(next.release(&granted).await.unwrap());
}

/// `holder` got `key` by a grant (its connection is in the lock's ring and remembers the
/// lock, so its tenure runs), with `terms`; `next` waits behind it in the ring.
async fn tenured(
    server: &RedisServer,
    key: &str,
    terms: TenureTerms,
) -> ([Arc<Locker>; 2], Lease, Waiting) {
    let (first, holder, next) = (process(server, 1), process(server, 2), process(server, 3));
    holder.store().wakes().set_tenure(terms);
    let lease = take(&first, key).await;
    let granted = wait_for(&holder, key, &CancellationToken::new());
    joined(server, key, &holder).await;
    assert!(first.release(&lease).await.unwrap());
    let (held, _) = granted.await.unwrap().expect("granted to the holder");
    let waiting = wait_for(&next, key, &CancellationToken::new());
    joined(server, key, &next).await;
    ([holder, next], held, waiting)
}

/// Tenure and kick long enough that nothing in a test outlasts them.
const LONG: TenureTerms = TenureTerms {
    window: Duration::from_secs(60),
    kick_after: Duration::from_secs(60),
};

#[tokio::test]
async fn a_release_within_the_tenure_frees_the_lock_quietly_for_the_same_process_to_take_back() {
    let server = RedisServer::start();
    let ([holder, _next], lease, waiting) = tenured(&server, "quiet", LONG).await;
    let mut raw = server.raw();
    let ring_before = ring(&server, "quiet");
    let before = (calls(&mut raw, "spublish"), calls(&mut raw, "rpoplpush"));
    assert!(holder.release(&lease).await.unwrap());
    // Freed, and the ring never heard of it: no grant, no turn.
    assert_eq!(holder_of(&server, "quiet"), None);
    assert_eq!(
        (calls(&mut raw, "spublish"), calls(&mut raw, "rpoplpush")),
        before
    );
    assert_eq!(ring(&server, "quiet"), ring_before);
    // Taken straight back, and again: still nothing for the ring.
    let mut lease = take(&holder, "quiet").await;
    for _ in 0..10 {
        assert!(holder.release(&lease).await.unwrap());
        lease = take(&holder, "quiet").await;
    }
    assert_eq!(
        (calls(&mut raw, "spublish"), calls(&mut raw, "rpoplpush")),
        before
    );
    tokio::time::sleep(MS(100)).await;
    assert!(!waiting.is_finished(), "the waiter had it meanwhile");
    assert_eq!(
        holder_of(&server, "quiet").as_deref(),
        Some(&lease.token[..])
    );
    assert!(holder.release(&lease).await.unwrap());
    // A closing process kicks the lock it freed quietly at once: the ring's head has it.
    let closed = Instant::now();
    holder.store().leave_rings(MS(2000)).await;
    let (granted, at) = waiting.await.unwrap().expect("kicked to the next");
    let after = at.duration_since(closed);
    assert!(after < MS(1000), "took {after:?}: the poll, not the kick");
    assert!(granted.fence > lease.fence);
}

#[tokio::test]
async fn the_first_release_after_the_tenure_grants_the_lock_to_the_ring() {
    let server = RedisServer::start();
    let window = MS(50);
    let terms = TenureTerms { window, ..LONG };
    let ([holder, next], lease, waiting) = tenured(&server, "turn", terms).await;
    tokio::time::sleep(window * 2).await;
    let mut raw = server.raw();
    let before = (calls(&mut raw, "spublish"), calls(&mut raw, "rpoplpush"));
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let (granted, at) = waiting.await.unwrap().expect("granted");
    let after = at.duration_since(released);
    assert!(after < MS(1000), "took {after:?}: the poll, not the grant");
    assert_eq!(calls(&mut raw, "spublish"), before.0 + 1);
    assert!(calls(&mut raw, "rpoplpush") > before.1);
    assert_eq!(
        holder_of(&server, "turn").as_deref(),
        Some(&granted.token[..])
    );
    assert!(granted.fence > lease.fence);
    assert!(next.release(&granted).await.unwrap());
}

#[tokio::test]
async fn a_lock_freed_quietly_and_not_taken_back_is_kicked_to_the_ring_within_a_few_ms() {
    let server = RedisServer::start();
    let terms = TenureTerms {
        kick_after: KICK_AFTER,
        ..LONG
    };
    let ([holder, next], lease, waiting) = tenured(&server, "kick", terms).await;
    let mut raw = server.raw();
    let before = calls(&mut raw, "spublish");
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let (granted, at) = waiting.await.unwrap().expect("kicked to the next");
    let after = at.duration_since(released);
    println!("a lock freed quietly reached the ring's head after {after:?}");
    // Expected: KICK_AFTER (1 ms) + a timer tick + a grant's round trips, a few ms; the
    // waiter polls every 5 s, so only the kick explains a prompt hold. 10x generous and more.
    assert!(after < MS(200), "took {after:?}");
    assert_eq!(
        calls(&mut raw, "spublish"),
        before + 1,
        "one kick, one grant"
    );
    assert!(granted.fence > lease.fence);
    assert!(next.release(&granted).await.unwrap());
}

#[tokio::test]
async fn a_kick_finds_the_lock_taken_back_and_leaves_it_alone() {
    let server = RedisServer::start();
    // Long enough for the other connection's attempt to come first, whatever the load.
    let kick_after = MS(200);
    let terms = TenureTerms { kick_after, ..LONG };
    let ([holder, _next], lease, waiting) = tenured(&server, "back", terms).await;
    let other = process(&server, 4);
    let warm = take(&other, "warm").await;
    assert!(other.release(&warm).await.unwrap());
    // Freed quietly, then taken by a connection that is not ours (as by a poll): the kick
    // that follows must not take it from its holder.
    assert!(holder.release(&lease).await.unwrap());
    let poll = take(&other, "back").await;
    tokio::time::sleep(kick_after * 2).await;
    assert_eq!(holder_of(&server, "back").as_deref(), Some(&poll.token[..]));
    assert!(!waiting.is_finished());
    assert!(other.release(&poll).await.unwrap());
    let (granted, _) = waiting.await.unwrap().expect("granted");
    assert!(granted.fence > poll.fence);
}

/// Waits until `locks`'s connection is in `key`'s wake queue (a waiter without grants
/// subscribed and queued), under its marked name (`<id>!`: told on its own wake channel).
async fn queued(server: &RedisServer, key: &str, locks: &Locker) {
    let queue = keys::queue_key(format!("lock:{key}").as_bytes());
    let marked = format!("{}!", locks.store().id());
    let until = Instant::now() + MS(3000);
    loop {
        let score: Option<f64> = redis::cmd("ZSCORE")
            .arg(&queue)
            .arg(&marked)
            .query(&mut server.raw())
            .expect("ZSCORE");
        if score.is_some() {
            return;
        }
        assert!(Instant::now() < until, "never queued");
        tokio::time::sleep(MS(10)).await;
    }
}

/// A process without grants waits for `key` (queued for wakes); the holder is a process
/// that grants, with nobody in the ring who would take a grant: `ring` ids, none listening.
async fn mixed(server: &RedisServer, key: &str, ring: &[&str]) -> (Arc<Locker>, Lease, Waiting) {
    let (holder, plain) = (process(server, 1), process_with(server, 2, None));
    let lease = take(&holder, key).await;
    for id in ring {
        let _: i64 = redis::cmd("RPUSH")
            .arg(keys::ring_key(format!("lock:{key}").as_bytes()))
            .arg(id)
            .query(&mut server.raw())
            .unwrap();
    }
    let waiting = wait_for(&plain, key, &CancellationToken::new());
    queued(server, key, &plain).await;
    (holder, lease, waiting)
}

#[tokio::test]
async fn a_release_with_an_empty_ring_wakes_a_waiter_without_grants() {
    let server = RedisServer::start();
    let (holder, lease, waiting) = mixed(&server, "mixed", &[]).await;
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let (won, at) = waiting.await.unwrap().expect("acquired");
    let after = at.duration_since(released);
    // It polls every 5 s: only the release's wake explains a prompt hold.
    assert!(after < MS(1000), "took {after:?}: the poll, not the wake");
    assert_eq!(holder_of(&server, "mixed").as_deref(), Some(&won.token[..]));
}

#[tokio::test]
async fn a_release_whose_ring_is_all_dead_wakes_a_waiter_without_grants() {
    let server = RedisServer::start();
    let (holder, lease, waiting) = mixed(&server, "dead-ring", &["killed-1", "killed-2"]).await;
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let (won, at) = waiting.await.unwrap().expect("acquired");
    let after = at.duration_since(released);
    assert!(after < MS(1000), "took {after:?}: the poll, not the wake");
    assert!(ring(&server, "dead-ring").is_empty(), "the dead are gone");
    assert_eq!(
        holder_of(&server, "dead-ring").as_deref(),
        Some(&won.token[..])
    );
}

#[tokio::test]
async fn a_kick_nobody_in_the_ring_takes_wakes_a_waiter_without_grants() {
    let server = RedisServer::start();
    let terms = TenureTerms {
        kick_after: KICK_AFTER,
        ..LONG
    };
    // `holder` got the lock by a grant, so its tenure runs; it is alone in the ring.
    let (first, holder) = (process(&server, 1), process(&server, 2));
    holder.store().wakes().set_tenure(terms);
    let lease = take(&first, "kicked").await;
    let granted = wait_for(&holder, "kicked", &CancellationToken::new());
    joined(&server, "kicked", &holder).await;
    assert!(first.release(&lease).await.unwrap());
    let (held, _) = granted.await.unwrap().expect("granted to the holder");
    let plain = process_with(&server, 3, None);
    let waiting = wait_for(&plain, "kicked", &CancellationToken::new());
    queued(&server, "kicked", &plain).await;
    // Freed quietly (the queue left alone), then kicked: nobody in the ring takes it.
    let released = Instant::now();
    assert!(holder.release(&held).await.unwrap());
    let (won, at) = waiting.await.unwrap().expect("acquired");
    let after = at.duration_since(released);
    assert!(after < MS(1000), "took {after:?}: the poll, not the kick");
    assert!(won.fence > held.fence);
}

#[tokio::test]
async fn a_quiet_release_whose_entry_is_dropped_as_idle_on_its_way_is_still_kicked() {
    const OTHERS: usize = 64;
    let server = RedisServer::start();
    // The holder's requests reach Redis late (once told to): its release is on its way while
    // the holder's bookkeeping moves on.
    let proxy = DelayProxy::start(server.port).await;
    let (first, next) = (process(&server, 1), process(&server, 3));
    let holder = process_at(proxy.url(), 2, Some(true));
    let terms = TenureTerms {
        kick_after: KICK_AFTER,
        ..LONG
    };
    holder.store().wakes().set_tenure(terms);
    let lease = take(&first, "gone").await;
    let granted = wait_for(&holder, "gone", &CancellationToken::new());
    joined(&server, "gone", &holder).await;
    assert!(first.release(&lease).await.unwrap());
    let (held, _) = granted.await.unwrap().expect("granted to the holder");
    // As many waiters of the holder as it takes to have idle subscriptions dropped once they
    // all leave (IDLE_SUBSCRIPTIONS), each subscribed and in its lock's ring.
    let cancel = CancellationToken::new();
    let mut others = Vec::new();
    for n in 0..OTHERS {
        let key = format!("other-{n}");
        let _kept = take(&first, &key).await;
        others.push(wait_for(&holder, &key, &cancel));
        joined(&server, &key, &holder).await;
    }
    // Out of the ring for `gone` (nobody of the holder's waits for it), so that nothing keeps
    // its entry from being dropped as idle but a kick pending.
    holder.store().leave_rings(MS(2000)).await;
    // Joined last, so that its poll is 5 s away when the lock is freed.
    let waiting = wait_for(&next, "gone", &CancellationToken::new());
    joined(&server, "gone", &next).await;
    assert_eq!(ring(&server, "gone"), vec![next.store().id().to_owned()]);
    let mut raw = server.raw();
    let unsubscribed = calls(&mut raw, "sunsubscribe");
    proxy.set_delay(MS(300));
    let releasing = {
        let holder = holder.clone();
        tokio::spawn(async move { (holder.release(&held).await, held) })
    };
    tokio::time::sleep(MS(50)).await;
    // The waiters leave while the release is on its way: the idle subscriptions are
    // dropped, `gone`'s with them (the others stay: their connection is in their rings).
    cancel.cancel();
    for other in others {
        assert!(other.await.unwrap().is_none());
    }
    let (freed, held) = releasing.await.unwrap();
    assert!(freed.unwrap(), "freed quietly");
    let released = Instant::now();
    let (won, at) = waiting.await.unwrap().expect("kicked to the next");
    let after = at.duration_since(released);
    println!("a quiet release whose entry was dropped reached the ring's head after {after:?}");
    // Expected: the kick, 300 ms late through the proxy, and a grant; the waiter polls every
    // 5 s, so only the kick explains a prompt hold.
    assert!(after < MS(1500), "took {after:?}: the poll, not the kick");
    assert!(won.fence > held.fence);
    // The holder's grant channel of `gone` was unsubscribed as idle: the path under test.
    assert_eq!(calls(&mut raw, "sunsubscribe"), unsubscribed + 1);
    assert!(next.release(&won).await.unwrap());
}

/// A process whose waiters always want the lock keeps it by hand-overs between them, but only
/// `HANDOVER_CHAIN` in a row while it is in the ring: then a release grants it across, and a
/// waiter of another process has it within that many of the busy process's sections (without
/// the cap it waited until the busy process stopped wanting the lock).
#[tokio::test]
async fn a_process_that_always_has_a_waiter_of_its_own_grants_across_after_a_bounded_chain() {
    let server = RedisServer::start();
    let (busy, other) = (process(&server, 1), process(&server, 2));
    let lease = take(&busy, "chain").await;
    let stop = CancellationToken::new();
    let sections = Arc::new(AtomicU32::new(0));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (busy, stop, sections) = (busy.clone(), stop.clone(), sections.clone());
            tokio::spawn(async move {
                while let Ok(lease) = busy
                    .wait("chain", MS(30_000), MS(20_000), SLOW_POLL, &stop)
                    .await
                {
                    sections.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(MS(2)).await;
                    let _released = busy.release(&lease).await;
                }
            })
        })
        .collect();
    joined(&server, "chain", &busy).await;
    let waiting = wait_for(&other, "chain", &CancellationToken::new());
    joined(&server, "chain", &other).await;
    let before = sections.load(Ordering::SeqCst);
    assert!(busy.release(&lease).await.unwrap());
    let granted = tokio::time::timeout(MS(3000), waiting)
        .await
        .expect("the other process waited past 3 s: the busy one kept the lock")
        .unwrap()
        .expect("granted");
    let theirs = sections.load(Ordering::SeqCst) - before;
    assert!(
        (1..=HANDOVER_CHAIN).contains(&theirs),
        "{theirs} sections of the busy process first"
    );
    stop.cancel();
    assert!(other.release(&granted.0).await.unwrap());
    for worker in workers {
        worker.await.unwrap();
    }
}
