//! What a sweep of expired keys costs: the keys that expired, never the keys that exist.

use super::*;
use std::time::{Duration, Instant};

fn run(keyspace: &mut Keyspace, args: &[&str]) -> MemoryReply {
    let args: Vec<&[u8]> = args.iter().map(|arg| arg.as_bytes()).collect();
    keyspace.tick();
    keyspace.execute(&args)
}

/// Ticks (one command each, as traffic would) until `done` holds or `within` passed, and
/// answers the most entries one tick's sweep looked at.
fn tick_until(
    keyspace: &mut Keyspace,
    within: Duration,
    done: impl Fn(&Keyspace) -> bool,
) -> usize {
    let until = Instant::now() + within;
    let mut most = 0;
    while !done(keyspace) && Instant::now() < until {
        let before = keyspace.sweep_visits;
        keyspace.tick();
        most = most.max(keyspace.sweep_visits - before);
        std::thread::sleep(Duration::from_micros(200));
    }
    most
}

#[test]
fn a_sweep_looks_only_at_keys_that_expired() {
    let mut keyspace = Keyspace::new();
    // Fence counters never expire: many of them, and a few locks that do.
    for i in 0..20_000 {
        run(&mut keyspace, &["INCR", &format!("fence:{i}")]);
    }
    for i in 0..10 {
        run(
            &mut keyspace,
            &["SET", &format!("lock:{i}"), "token", "PX", "1"],
        );
    }
    let before = keyspace.sweep_visits;
    // Expired locks nobody reads again are swept by the traffic on other keys.
    let most = tick_until(&mut keyspace, Duration::from_secs(3), |k| {
        k.entries.len() == 20_000
    });
    assert_eq!(
        keyspace.entries.len(),
        20_000,
        "the expired locks were swept"
    );
    assert!(
        most <= 10,
        "one sweep looked at {most} entries for 10 expired ones"
    );
    assert!(keyspace.sweep_visits - before <= 10);
}

#[test]
fn many_keys_expiring_together_are_swept_in_bounded_slices() {
    let mut keyspace = Keyspace::new();
    let count = 3 * SWEEP_SLICE + 7;
    // All in the same millisecond, as locks taken in a burst with one TTL.
    let at = (keyspace.clock.now().ms() + 50).to_string();
    for i in 0..count {
        run(
            &mut keyspace,
            &["SET", &format!("lock:{i}"), "token", "PXAT", &at],
        );
    }
    let most = tick_until(&mut keyspace, Duration::from_secs(3), |k| {
        k.entries.is_empty()
    });
    assert!(keyspace.entries.is_empty(), "every expired lock was swept");
    assert!(most >= 1, "the sweep did the work");
    assert!(
        most <= SWEEP_SLICE,
        "one sweep looked at {most} entries, more than a slice"
    );
}

/// Every entry with an expiry has its one place in the index, and nothing else has any.
fn assert_index_exact(keyspace: &Keyspace) {
    let timed: Vec<_> = keyspace
        .entries
        .iter()
        .filter_map(|(key, entry)| entry.expire_at.map(|at| (key, at)))
        .collect();
    for (key, at) in &timed {
        assert!(keyspace.deadlines.contains(key, *at), "{key:?} at {at}");
    }
    assert_eq!(keyspace.deadlines.len(), timed.len());
}

#[test]
fn the_index_follows_every_change_of_an_expiry() {
    let mut keyspace = Keyspace::new();
    let steps: &[&[&str]] = &[
        &["SET", "a", "1", "PX", "60000"],
        &["SET", "a", "2", "PX", "30000"],
        &["SET", "a", "3", "KEEPTTL"],
        &["INCR", "a"],
        &["PEXPIRE", "a", "90000"],
        &["PEXPIRE", "a", "10", "GT"],
        &["SET", "b", "1", "EX", "100"],
        &["SET", "b", "1"],
        &["SET", "c", "1", "PX", "60000"],
        &["PERSIST", "c"],
        &["SET", "d", "1", "PX", "60000"],
        &["DEL", "d"],
        &["SET", "e", "1", "PX", "60000"],
        &["PEXPIRE", "e", "-1"],
        &["ZADD", "z", "1", "m"],
        &["PEXPIRE", "z", "60000"],
        &["ZPOPMIN", "z"],
        &["HSET", "h", "f", "v"],
        &["EXPIRE", "h", "100"],
        &["SET", "h", "now a string", "PX", "5000"],
        &["INCR", "fence"],
    ];
    for step in steps {
        run(&mut keyspace, step);
        assert_index_exact(&keyspace);
    }
    assert_eq!(keyspace.deadlines.len(), 2, "a and h");
    run(&mut keyspace, &["FLUSHALL"]);
    assert_index_exact(&keyspace);
    assert_eq!(keyspace.deadlines.len(), 0);
}

#[test]
fn a_key_read_after_it_expired_leaves_the_index_too() {
    let mut keyspace = Keyspace::new();
    run(&mut keyspace, &["SET", "a", "1", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(3));
    // Read within one command, before any tick of ours could sweep it.
    keyspace.now = Some(keyspace.clock.now());
    assert_eq!(keyspace.execute(&[b"GET", b"a"]), MemoryReply::Nil);
    assert_index_exact(&keyspace);
    assert_eq!(keyspace.deadlines.len(), 0);
}

/// `live` skips the look at an entry's expiry only while the last sweep left nothing
/// expired at the very millisecond it reads: keys left over by a sweep cut at its slice,
/// and an entry given an expiry already past, still read as gone.
#[test]
fn a_key_past_its_expiry_reads_as_gone_when_the_sweep_left_it() {
    let mut keyspace = Keyspace::new();
    let count = SWEEP_SLICE + 5;
    let at = (keyspace.clock.now().ms() + 5).to_string();
    for i in 0..count {
        run(
            &mut keyspace,
            &["SET", &format!("lock:{i}"), "token", "PXAT", &at],
        );
    }
    std::thread::sleep(Duration::from_millis(10));
    // One tick: its sweep stops at a slice, the last keys stay until read or swept.
    keyspace.tick();
    assert!(
        keyspace.entries.len() >= 5,
        "the sweep stopped at its slice"
    );
    for i in 0..count {
        let key = format!("lock:{i}");
        assert_eq!(
            keyspace.execute(&[b"GET", key.as_bytes()]),
            MemoryReply::Nil,
            "{key}"
        );
    }
    assert_index_exact(&keyspace);
    // A clean sweep, then an expiry already past given within the same command's clock.
    keyspace.tick();
    let now = keyspace.now().ms();
    let past = (now - 2).to_string();
    assert_eq!(
        keyspace.execute(&[b"SET", b"gone", b"v", b"PXAT", past.as_bytes()]),
        MemoryReply::ok()
    );
    assert_eq!(keyspace.execute(&[b"GET", b"gone"]), MemoryReply::Nil);
    keyspace.tick();
    run(&mut keyspace, &["SET", "later", "v"]);
    let now = keyspace.now().ms();
    let past = (now - 2).to_string();
    assert_eq!(
        keyspace.execute(&[b"PEXPIREAT", b"later", past.as_bytes()]),
        MemoryReply::Int(1)
    );
    assert_eq!(
        keyspace.execute(&[b"EXISTS", b"later"]),
        MemoryReply::Int(0)
    );
    assert_index_exact(&keyspace);
}

/// Commands and SET's options are matched as written when in capitals, and in any other
/// case as Redis takes them; INCRBY writes its digits over the old ones (sign included)
/// and keeps the TTL; DEL counts a key past its expiry as none, and drops it from the index.
#[test]
fn names_in_any_case_counters_in_place_and_del_of_an_expired_key() {
    let mut keyspace = Keyspace::new();
    assert_eq!(
        run(&mut keyspace, &["set", "k", "v", "nx", "Px", "60000"]),
        MemoryReply::ok()
    );
    assert_eq!(run(&mut keyspace, &["Get", "k"]), MemoryReply::bulk("v"));
    assert!(run(&mut keyspace, &["SET", "k", "w", "NOPE"]).is_error());
    assert!(run(&mut keyspace, &["GETT", "k"]).is_error());
    run(&mut keyspace, &["SET", "n", "5", "PX", "60000"]);
    assert_eq!(
        run(&mut keyspace, &["incrby", "n", "-12"]),
        MemoryReply::Int(-7)
    );
    assert_eq!(run(&mut keyspace, &["GET", "n"]), MemoryReply::bulk("-7"));
    assert_eq!(
        run(&mut keyspace, &["INCRBY", "n", "1000"]),
        MemoryReply::Int(993)
    );
    assert_eq!(run(&mut keyspace, &["GET", "n"]), MemoryReply::bulk("993"));
    assert!(matches!(run(&mut keyspace, &["PTTL", "n"]), MemoryReply::Int(ms) if ms > 59_000));
    assert_eq!(
        run(&mut keyspace, &["INCRBY", "fresh", "3"]),
        MemoryReply::Int(3)
    );
    assert_eq!(run(&mut keyspace, &["PTTL", "fresh"]), MemoryReply::Int(-1));
    assert_index_exact(&keyspace);
    // Past its expiry, and not yet swept (read within one command's clock, after it).
    run(&mut keyspace, &["SET", "old", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(3));
    keyspace.now = Some(keyspace.clock.now());
    keyspace.clean_at = None;
    assert_eq!(
        keyspace.execute(&[b"DEL", b"old", b"k"]),
        MemoryReply::Int(1)
    );
    assert_index_exact(&keyspace);
    assert_eq!(
        keyspace.execute(&[b"EXISTS", b"old", b"k"]),
        MemoryReply::Int(0)
    );
}
