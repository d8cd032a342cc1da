//! The rule for the transaction kept beside the script: both forms answer alike and
//! leave the lock and its holder in the same state; fences may skip, never go back. Random
//! runs of attempts, releases and expiries go to one lock through the script and to its twin
//! through the transaction, on a private redis-server, as the JS thread's socket writes them.
//! Each counter, less its count of fences drawn in vain (the transaction's, counted behind it
//! as the socket does, missed.rs), grows two per win: what `watch` reads as acquisitions.

use super::{pushed_for, AcquireAttempt, Acquired, AttemptForm, Layout};
use crate::core::basics::resp;
use crate::core::basics::test_server::RedisServer;
use crate::core::proto::missed::CountMissed;
use crate::core::proto::release::Release;
use crate::core::proto::scripts;
use crate::core::proto::Op;
use proptest::prelude::*;
use redis::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const WINDOW_MS: u64 = 5000;

#[derive(Clone, Debug)]
pub(crate) enum FormStep {
    /// An attempt with a fresh token, for `ttl_ms`; `kept`: the transaction's connection
    /// pushes nothing if it knows the counter kept long enough (see ops/kept_fences.rs).
    Attempt { ttl_ms: u64, kept: bool },
    /// The holder's release, or (`stale`) a release by a token that holds nothing.
    Release { stale: bool },
    /// The lock's TTL runs out.
    Expire,
}

pub(crate) fn step() -> impl Strategy<Value = FormStep> {
    prop_oneof![
        3 => (1_000u64..60_000, any::<bool>()).prop_map(|(ttl_ms, kept)| FormStep::Attempt { ttl_ms, kept }),
        2 => any::<bool>().prop_map(|stale| FormStep::Release { stale }),
        1 => Just(FormStep::Expire),
    ]
}

/// Where the twins' commands go: a socket of its own, or (backend/memory) a `memory://`
/// keyspace run inline.
pub(crate) trait Conn {
    /// Sends `bytes` and answers the last of `replies` replies.
    fn send(&mut self, bytes: &[u8], replies: usize) -> Value;

    fn run<O: Op>(&mut self, op: &O, replies: usize) -> O::Out {
        let mut out = Vec::new();
        op.encode(&mut out);
        op.decode(self.send(&out, replies)).expect("decode")
    }

    /// `op` as the lane sends what nobody else reads: its script whole (`write_whole`).
    fn run_whole<O: Op>(&mut self, op: &O) -> O::Out {
        let mut out = Vec::new();
        crate::core::proto::wire::write_whole(op, &mut out);
        op.decode(self.send(&out, 1)).expect("decode")
    }

    fn command(&mut self, parts: &[&[u8]]) -> Value {
        let mut out = Vec::new();
        resp::write_command(&mut out, parts);
        self.send(&out, 1)
    }

    fn int(&mut self, parts: &[&[u8]]) -> i64 {
        match self.command(parts) {
            Value::Int(n) => n,
            other => panic!("{parts:?}: {other:?}"),
        }
    }

    /// A counter's value, 0 when it does not exist.
    fn counter(&mut self, key: &[u8]) -> i64 {
        match self.command(&[b"GET", key]) {
            Value::BulkString(digits) => String::from_utf8_lossy(&digits).parse().expect("digits"),
            Value::Nil => 0,
            other => panic!("GET: {other:?}"),
        }
    }
}

/// A socket of its own, written to as the JS thread writes to its own.
struct Socket {
    stream: TcpStream,
    pending: Vec<u8>,
}

impl Socket {
    fn open(port: u16) -> Socket {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        Socket {
            stream,
            pending: Vec::new(),
        }
    }

    fn reply(&mut self) -> Value {
        loop {
            if let Some((value, used)) = resp::parse(&self.pending).expect("resp") {
                self.pending.drain(..used);
                return value;
            }
            let mut chunk = [0u8; 4096];
            let read = self.stream.read(&mut chunk).expect("read");
            assert!(read > 0, "the server closed the connection");
            self.pending.extend_from_slice(&chunk[..read]);
        }
    }
}

impl Conn for Socket {
    fn send(&mut self, bytes: &[u8], replies: usize) -> Value {
        self.stream.write_all(bytes).expect("write");
        let mut last = Value::Nil;
        for _ in 0..replies {
            last = self.reply();
        }
        last
    }
}

/// One lock driven through one form.
struct Twin {
    key: Vec<u8>,
    fence_key: Vec<u8>,
    missed_key: Vec<u8>,
    form: AttemptForm,
    holder: Option<String>,
    last_fence: u64,
    wins: i64,
    /// Until when this connection's own pushes kept the counter (see `pushed_for`).
    kept_until: Option<Instant>,
}

/// What an attempt answered, with the form's extra knowledge left out.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Won,
    Held,
}

impl Twin {
    fn new(key: &str, form: AttemptForm) -> Twin {
        let key = key.as_bytes().to_vec();
        Twin {
            fence_key: crate::core::basics::keys::fence_key(&key),
            missed_key: crate::core::basics::keys::missed_key(&key),
            key,
            form,
            holder: None,
            last_fence: 0,
            wins: 0,
            kept_until: None,
        }
    }

    fn attempt(&mut self, socket: &mut impl Conn, token: &str, ttl_ms: u64, kept: bool) -> Answer {
        let now = Instant::now();
        let needed = now + Duration::from_millis(ttl_ms + WINDOW_MS);
        let known = self.kept_until.is_some_and(|until| until >= needed);
        let push = self.form == AttemptForm::Script || !(kept && known);
        if push && self.form == AttemptForm::Transaction {
            let pushed = Duration::from_millis(pushed_for(ttl_ms, WINDOW_MS));
            self.kept_until = Some(now + pushed);
        }
        let op = AcquireAttempt {
            lock_key: &self.key,
            fence_key: &self.fence_key,
            token,
            ttl: Duration::from_millis(ttl_ms),
            fence_retention_ms: WINDOW_MS,
            keep_fences: push,
            fences_known_kept: false,
            layout: Layout::Plain,
            form: self.form,
            sent: Instant::now(),
        };
        let mut out = Vec::new();
        op.encode(&mut out);
        let reply = socket.send(&out, op.replies());
        let fences = op.drawn_in_vain(&reply);
        if fences > 0 {
            let missed_key = &self.missed_key;
            let count = socket.run_whole(&CountMissed { missed_key, fences });
            assert!(count >= 2 && count % 2 == 0, "{count}");
        }
        match op.decode(reply).expect("decode") {
            Acquired::Won { fence, .. } => {
                assert!(fence > self.last_fence, "{:?}: fence went back", self.form);
                self.last_fence = fence;
                self.wins += 1;
                self.holder = Some(token.to_owned());
                Answer::Won
            }
            Acquired::Held { ttl } => {
                if let Some(ttl) = ttl {
                    assert!(ttl <= Duration::from_millis(60_000), "{ttl:?}");
                }
                Answer::Held
            }
            other => panic!("{:?}: {other:?}", self.form),
        }
    }

    fn release(&mut self, socket: &mut impl Conn, stale: bool) -> bool {
        let token = match (&self.holder, stale) {
            (Some(holder), false) => holder.clone(),
            _ => "stale".to_owned(),
        };
        let op = Release::late_win(&self.key, &token, false);
        let released = socket.run(&op, 1);
        if released {
            self.holder = None;
        }
        released
    }

    fn expire(&mut self, socket: &mut impl Conn) {
        socket.int(&[b"DEL", &self.key]);
        self.holder = None;
    }

    /// The acquisitions `watch` reads: the counter less what was drawn in vain, by two.
    fn read_wins(&self, socket: &mut impl Conn) -> i64 {
        let drawn = socket.counter(&self.fence_key) - socket.counter(&self.missed_key);
        assert_eq!(drawn % 2, 0, "{:?}: {drawn}", self.form);
        drawn / 2
    }

    /// The lock's holder as Redis has it, and its remaining TTL (ms).
    fn state(&self, socket: &mut impl Conn) -> (Option<Vec<u8>>, i64) {
        let holder = match socket.command(&[b"GET", &self.key]) {
            Value::BulkString(bytes) => Some(bytes),
            Value::Nil => None,
            other => panic!("GET: {other:?}"),
        };
        (holder, socket.int(&[b"PTTL", &self.key]))
    }
}

fn run(port: u16, case: u32, steps: &[FormStep]) {
    run_on(&mut Socket::open(port), case, steps);
}

/// One case on `socket`: the twins' answers and states compared after every step.
pub(crate) fn run_on(socket: &mut impl Conn, case: u32, steps: &[FormStep]) {
    // Loaded beforehand, as the JS thread's socket has them (ops/direct.rs).
    for source in [scripts::ACQUIRE_SOURCE, scripts::RELEASE_WAKE_SOURCE] {
        socket.command(&[b"SCRIPT", b"LOAD", source.as_bytes()]);
    }
    let mut script = Twin::new(&format!("script:{case}"), AttemptForm::Script);
    let mut transaction = Twin::new(&format!("transaction:{case}"), AttemptForm::Transaction);
    for (n, step) in steps.iter().enumerate() {
        match step {
            FormStep::Attempt { ttl_ms, kept } => {
                let token = format!("token-{n}");
                let by_script = script.attempt(socket, &token, *ttl_ms, *kept);
                let by_transaction = transaction.attempt(socket, &token, *ttl_ms, *kept);
                assert_eq!(by_script, by_transaction, "step {n}: {step:?}");
            }
            FormStep::Release { stale } => {
                let by_script = script.release(socket, *stale);
                let by_transaction = transaction.release(socket, *stale);
                assert_eq!(by_script, by_transaction, "step {n}: {step:?}");
            }
            FormStep::Expire => {
                script.expire(socket);
                transaction.expire(socket);
            }
        }
        let (held_by, ttl) = script.state(socket);
        let (held_by_too, ttl_too) = transaction.state(socket);
        assert_eq!(held_by, held_by_too, "step {n}: {step:?}");
        assert_eq!(held_by, script.holder.clone().map(String::into_bytes));
        match held_by {
            // Both hold the same attempt's lock for at most its TTL.
            Some(_) => {
                assert!(ttl > 0 && ttl_too > 0, "step {n}: {ttl} {ttl_too}");
                assert!(ttl <= 60_000 && ttl_too <= 60_000);
            }
            None => assert_eq!((ttl, ttl_too), (-2, -2)),
        }
        // Each counter outlives its lock, whichever form drew from it, and tells its wins.
        for twin in [&script, &transaction] {
            assert_eq!(
                twin.read_wins(socket),
                twin.wins,
                "step {n}: {:?}",
                twin.form
            );
            let counter_ttl = socket.int(&[b"PTTL", &twin.fence_key]);
            assert!(
                counter_ttl == -2 || counter_ttl >= ttl.max(ttl_too),
                "step {n}: {:?} counter {counter_ttl} < lock {ttl}",
                twin.form
            );
        }
    }
}

#[test]
fn the_script_and_the_transaction_answer_alike_and_leave_the_same_lock() {
    let server = RedisServer::start();
    // Each case on keys of its own, so that no run inherits another's counters.
    let cases = AtomicU32::new(0);
    proptest!(ProptestConfig::with_cases(48), |(steps in proptest::collection::vec(step(), 1..40))| {
        run(server.port, cases.fetch_add(1, Ordering::Relaxed), &steps);
    });
}

#[path = "acquire_forms_layouts_tests.rs"]
mod layouts;
