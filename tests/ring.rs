//! The grant scripts on a real redis-server: join_ring.lua puts a waiting connection in a
//! lock's ring once, and release_grant.lua hands the lock to the next connection of the ring
//! that hears it, skipping the ones nobody listens for, in one step. The listening side is a
//! plain socket subscribed to its grant channel, as a waiting process's connection is.

mod common;

use common::{calls, redis_version, RedisServer};
use native_redis_lock::core::api::scripts;
use native_redis_lock::core::basics::keys;
use redis::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const LOCK: &str = "lock:ring";
const CLAIM_MS: u64 = 1000;
const WINDOW_MS: u64 = 5000;

/// A connection subscribed to its grant channel for `LOCK`, as a waiting process's is.
struct Listener {
    stream: TcpStream,
}

impl Listener {
    fn on(server: &RedisServer, id: &str) -> Self {
        let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let channel = keys::grant_channel(LOCK.as_bytes(), id);
        let mut command = format!("*2\r\n$10\r\nSSUBSCRIBE\r\n${}\r\n", channel.len()).into_bytes();
        command.extend_from_slice(&channel);
        command.extend_from_slice(b"\r\n");
        stream.write_all(&command).expect("subscribe");
        let mut listener = Listener { stream };
        assert!(listener.read_until(b"ssubscribe").is_some(), "subscribed");
        listener
    }

    /// What arrived up to and including `needle`, or `None` when it did not within 2 s.
    fn read_until(&mut self, needle: &[u8]) -> Option<Vec<u8>> {
        let mut seen = Vec::new();
        let mut buf = [0u8; 512];
        while !seen.windows(needle.len()).any(|w| w == needle) {
            let n = self.stream.read(&mut buf).ok().filter(|&n| n > 0)?;
            seen.extend_from_slice(&buf[..n]);
        }
        Some(seen)
    }
}

fn join(raw: &mut redis::Connection, token: &str, id: &str) -> (i64, i64) {
    let key = LOCK.as_bytes();
    scripts::JOIN_RING
        .key(LOCK)
        .key(keys::fence_key(key))
        .key(keys::ring_key(key))
        .arg(token)
        .arg(5000)
        .arg(WINDOW_MS)
        .arg(id)
        .invoke(raw)
        .expect("join_ring")
}

/// release_grant.lua by connection `me` for `token`, fenced `fence` with fences to `last`,
/// granting `grant`.
fn release(
    raw: &mut redis::Connection,
    (token, fence, last): (&str, u64, u64),
    grant: &str,
    me: &str,
    leave: bool,
) -> Value {
    let key = LOCK.as_bytes();
    let (before, after) = keys::grant_channel_parts(key);
    scripts::RELEASE_GRANT
        .key(LOCK)
        .key(keys::fence_key(key))
        .key(keys::ring_key(key))
        .key(keys::queue_key(key))
        .arg(token)
        .arg(fence)
        .arg(last)
        .arg(grant)
        .arg(CLAIM_MS)
        .arg(me)
        .arg(if leave { "1" } else { "0" })
        .arg(before)
        .arg(after)
        .arg(WINDOW_MS)
        .arg(keys::released_channel(key))
        .arg("0")
        .invoke(raw)
        .expect("release_grant")
}

fn granted(to: &str, fence: u64, last: u64) -> Value {
    Value::Array(vec![
        Value::Int(2),
        Value::BulkString(to.as_bytes().to_vec()),
        Value::Int(fence as i64),
        Value::Int(last as i64),
    ])
}

fn ring(raw: &mut redis::Connection) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(keys::ring_key(LOCK.as_bytes()))
        .arg(0)
        .arg(-1)
        .query(raw)
        .expect("LRANGE")
}

fn holder(raw: &mut redis::Connection) -> Option<String> {
    redis::cmd("GET").arg(LOCK).query(raw).expect("GET")
}

fn counter(raw: &mut redis::Connection) -> u64 {
    redis::cmd("GET")
        .arg(keys::fence_key(LOCK.as_bytes()))
        .query(raw)
        .expect("counter")
}

#[test]
fn a_release_grants_the_lock_to_the_head_of_the_ring_with_the_next_fence() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let (won, fence) = join(&mut raw, "tok-me", "me");
    assert_eq!(won, 1);
    let mut a = Listener::on(&server, "a");
    let (won, pttl) = join(&mut raw, "tok-a", "a");
    assert_eq!(won, 0);
    assert!(pttl > 0 && pttl <= 5000, "{pttl}");
    // Already in the ring: the holder's time is not read, -3 says so (a client reads none).
    assert_eq!(join(&mut raw, "tok-a", "a"), (0, -3));
    assert_eq!(ring(&mut raw), ["a"], "joined once; a win does not join");
    let fence = fence as u64;
    // A plain attempt keeps the fence after its own for a hand-over: no draw.
    let answer = release(&mut raw, ("tok-me", fence, fence + 1), "g1", "me", false);
    assert_eq!(answer, granted("a", fence + 1, fence + 1));
    assert_eq!(holder(&mut raw).as_deref(), Some("g1"));
    let pttl: i64 = redis::cmd("PTTL").arg(LOCK).query(&mut raw).unwrap();
    assert!(
        pttl > 0 && pttl <= CLAIM_MS as i64,
        "held for the claim: {pttl}"
    );
    assert_eq!(counter(&mut raw), fence + 1);
    let message = format!("{} {} {CLAIM_MS} g1", fence + 1, fence + 1);
    assert!(a.read_until(message.as_bytes()).is_some(), "{message}");
    assert_eq!(ring(&mut raw), ["a"], "still in the ring, at its back");
    // Sent again after a dropped connection: already done, nothing more.
    let again = release(&mut raw, ("tok-me", fence, fence + 1), "g1", "me", false);
    assert_eq!(again, Value::Int(1));
    assert_eq!(holder(&mut raw).as_deref(), Some("g1"));
}

#[test]
fn a_release_of_a_lock_not_ours_changes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let _: () = redis::cmd("SET")
        .arg(LOCK)
        .arg("theirs")
        .query(&mut raw)
        .unwrap();
    let mut a = Listener::on(&server, "a");
    assert_eq!(join(&mut raw, "tok-a", "a").0, 0);
    assert_eq!(
        release(&mut raw, ("ours", 5, 6), "g", "me", true),
        Value::Int(0)
    );
    assert_eq!(holder(&mut raw).as_deref(), Some("theirs"));
    assert_eq!(ring(&mut raw), ["a"]);
    a.stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    assert!(a.read_until(b"smessage").is_none(), "nothing was granted");
}

#[test]
fn a_release_with_nobody_in_the_ring_deletes_the_lock() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    assert_eq!(join(&mut raw, "tok-me", "me").0, 1);
    assert_eq!(
        release(&mut raw, ("tok-me", 1, 2), "g", "me", false),
        Value::Int(1)
    );
    assert_eq!(holder(&mut raw), None);
}

#[test]
fn a_head_nobody_listens_for_is_taken_out_and_the_next_is_granted() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    assert_eq!(join(&mut raw, "tok-me", "me").0, 1);
    let mut b = Listener::on(&server, "b");
    let c = Listener::on(&server, "c");
    for (token, id) in [("t-gone", "gone"), ("t-c", "c"), ("t-b", "b")] {
        assert_eq!(join(&mut raw, token, id).0, 0);
    }
    // A process killed: its connection closes, and Redis drops its subscription.
    drop(c);
    let channel = keys::grant_channel(LOCK.as_bytes(), "c");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let (_, count): (Vec<u8>, i64) = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(&channel)
            .query(&mut raw)
            .unwrap();
        if count == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the closed subscriber stays");
        std::thread::sleep(Duration::from_millis(5));
    }
    let answer = release(&mut raw, ("tok-me", 1, 2), "g", "me", false);
    assert_eq!(answer, granted("b", 2, 2));
    assert!(b.read_until(b"2 2 1000 g").is_some());
    assert_eq!(
        ring(&mut raw),
        ["b"],
        "the dead are gone, the grantee at the back"
    );
}

#[test]
fn the_releaser_is_passed_over_and_keeps_its_place_unless_it_leaves() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let _me = Listener::on(&server, "me");
    assert_eq!(join(&mut raw, "tok-me", "me").0, 1);
    assert_eq!(join(&mut raw, "tok-me2", "me").0, 0);
    // Only ourselves: released, and still in the ring.
    assert_eq!(
        release(&mut raw, ("tok-me", 1, 2), "g", "me", false),
        Value::Int(1)
    );
    assert_eq!(holder(&mut raw), None);
    assert_eq!(ring(&mut raw), ["me"]);
    // Ourselves next, then another: the other is granted, we keep a place.
    assert_eq!(join(&mut raw, "tok-me3", "me").0, 1);
    let _a = Listener::on(&server, "a");
    assert_eq!(join(&mut raw, "tok-a", "a").0, 0);
    assert_eq!(ring(&mut raw), ["a", "me"]);
    let answer = release(&mut raw, ("tok-me3", 3, 4), "g2", "me", false);
    assert_eq!(answer, granted("a", 4, 4));
    assert_eq!(ring(&mut raw), ["a", "me"]);
    // Leaving: out of the ring in the same step, and the lock granted on.
    let answer = release(&mut raw, ("g2", 4, 4), "g3", "a", true);
    assert_eq!(answer, granted("me", 5, 4 + 1024));
    assert_eq!(ring(&mut raw), ["me"]);
    let answer = release(&mut raw, ("g3", 5, 4 + 1024), "g4", "me", true);
    assert_eq!(answer, Value::Int(1), "the last one left: the lock is free");
    assert_eq!(ring(&mut raw), Vec::<String>::new());
    assert_eq!(holder(&mut raw), None);
}

#[test]
fn a_chain_of_grants_draws_a_block_of_fences_at_its_end_and_not_before() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let _a = Listener::on(&server, "a");
    let _b = Listener::on(&server, "b");
    let (_, first) = join(&mut raw, "t0", "a");
    assert_eq!(join(&mut raw, "tb", "b").0, 0);
    assert_eq!(join(&mut raw, "ta", "a").0, 0);
    let first = first as u64;
    let mut lease = ("t0".to_owned(), first, first + 1);
    let mut fences = vec![first];
    let mut draws = vec![];
    for n in 1..=1100u64 {
        let me = if n % 2 == 1 { "a" } else { "b" };
        let (to, grant) = (if me == "a" { "b" } else { "a" }, format!("t{n}"));
        let before = counter(&mut raw);
        let answer = release(&mut raw, (&lease.0, lease.1, lease.2), &grant, me, false);
        let Value::Array(parts) = &answer else {
            panic!("not granted: {answer:?}");
        };
        let (fence, last) = match parts.as_slice() {
            [_, Value::BulkString(id), Value::Int(f), Value::Int(l)] => {
                assert_eq!(id, to.as_bytes());
                (*f as u64, *l as u64)
            }
            _ => panic!("{answer:?}"),
        };
        if counter(&mut raw) != before {
            draws.push((n, before, counter(&mut raw)));
        }
        fences.push(fence);
        lease = (grant, fence, last);
    }
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "strictly increasing"
    );
    // The first grant takes the fence the attempt kept; the second draws 1,024; the next
    // draw comes only when those are given out.
    assert_eq!(draws.len(), 2, "{draws:?}");
    assert_eq!(draws[0], (2, first + 1, first + 1 + 1024));
    assert_eq!(draws[1].0, 2 + 1024);
    let pttl: i64 = redis::cmd("PTTL")
        .arg(keys::fence_key(LOCK.as_bytes()))
        .query(&mut raw)
        .unwrap();
    // A due counter is pushed a quarter window past what it needs (fence.lua `keep_fences`).
    let chain = (1024 * CLAIM_MS + WINDOW_MS) as i64;
    assert!(
        pttl > chain - 60_000 && pttl <= chain + (WINDOW_MS / 4) as i64,
        "kept for a whole chain: {pttl}"
    );
}

#[test]
fn a_grant_with_a_counter_that_can_give_no_fence_frees_the_lock() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let _a = Listener::on(&server, "a");
    let _: () = redis::cmd("SET")
        .arg(LOCK)
        .arg("ours")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(keys::fence_key(LOCK.as_bytes()))
        .arg("oops")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(keys::ring_key(LOCK.as_bytes()))
        .arg("a")
        .query(&mut raw)
        .unwrap();
    // Our fence unknown: a block must be drawn, and cannot be.
    assert_eq!(
        release(&mut raw, ("ours", 0, 0), "g", "me", false),
        Value::Int(1)
    );
    assert_eq!(holder(&mut raw), None);
}

/// How little an attempt of a connection already in the ring reads depends on its server
/// (queued_attempt.lua, join_ring.lua), and each version must get the way meant for it.
#[test]
fn a_connection_in_the_ring_fails_its_attempts_reading_what_its_server_needs() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let version = redis_version(&mut raw);
    assert_eq!(join(&mut raw, "tok-me", "me").0, 1);
    assert!(
        join(&mut raw, "tok-a", "a").1 > 0,
        "a first join reads the time"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut raw)
        .unwrap();
    // From 6.0.6 LPOS finds us in the ring, so the holder's time goes unread; before, the place
    // is given up and taken again (LREM, LPUSH), and the time read.
    let has_lpos = version >= (6, 0, 6);
    for token in ["tok-a2", "tok-a3", "tok-a4"] {
        let (won, ttl) = join(&mut raw, token, "a");
        assert_eq!(won, 0, "{version:?}");
        match has_lpos {
            true => assert_eq!(ttl, -3, "{version:?}"),
            false => assert!(ttl > 0, "{version:?}: {ttl}"),
        }
    }
    let counted = |raw: &mut redis::Connection, names: [&str; 2]| names.map(|n| calls(raw, n));
    // From 7.0 one SET NX GET both tries and reads the holder; before, it is refused, and a
    // SET NX then a GET follow.
    let (sets, gets) = if version >= (7, 0, 0) { (3, 0) } else { (6, 3) };
    assert_eq!(
        counted(&mut raw, ["set", "get"]),
        [sets, gets],
        "{version:?}"
    );
    let (lpos, pttl, requeued) = if has_lpos { (3, 0, 0) } else { (0, 3, 3) };
    assert_eq!(
        counted(&mut raw, ["lpos", "pttl"]),
        [lpos, pttl],
        "{version:?}"
    );
    let requeues = counted(&mut raw, ["lrem", "lpush"]);
    assert_eq!(requeues, [requeued; 2], "{version:?}");
    assert_eq!(ring(&mut raw), ["a"]);
}

#[test]
fn an_attempt_sent_again_after_it_won_finds_its_own_token_and_fence() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let (won, fence) = join(&mut raw, "tok-me", "me");
    assert_eq!(won, 1);
    assert_eq!(
        join(&mut raw, "tok-me", "me"),
        (1, fence),
        "the same fence again"
    );
    assert_eq!(counter(&mut raw), fence as u64 + 1, "nothing more drawn");
}
