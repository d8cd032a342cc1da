//! The forms rule (see acquire_forms_tests.rs) for both layouts that have a second form,
//! DistributedLock's and ExclusiveLock's, with every form a connection of the caller's own
//! writes (the script, the transaction, and `Untried`: the plain transaction, or
//! ExclusiveLock's probe before its script) and with the repair the operations make of each
//! answer (ops/fast/acquire.rs, ops/fast/exclusive.rs): a refused or unfenced plain attempt is
//! sent again as the script with its token; ExclusiveLock's unfenced transaction is taken
//! back, a refused attempt sent again as the script (under a fresh token after a transaction).
//! One lock takes every attempt as the script, its twin in the form of the step; on a
//! server that allows MULTI, or with a user whose ACL refuses it, where `Untried` runs its
//! commands one by one (or its probe fails) and the connection turns to the script for good.
//! Fences may skip in the twin's run (a transaction draws them even when it finds the lock
//! held), so a counter near its end can run out there first: the one answer allowed to differ.

use super::{Conn, Socket};
use crate::core::basics::keys;
use crate::core::basics::test_server::RedisServer;
use crate::core::basics::token::FENCE_MAX;
use crate::core::proto::acquire::{AcquireAttempt, Acquired, AttemptForm, Layout};
use crate::core::proto::release::{Release, ReleaseKind};
use crate::core::proto::scripts;
use crate::core::proto::Op;
use proptest::prelude::*;
use redis::Value;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Two PTTLs of locks set by one step, read moments apart, differ by at most this (ms).
const PTTL_SLACK: i64 = 500;
/// The ACL user that may run anything but MULTI.
const NO_MULTI: &[u8] = b"no-multi";

#[derive(Clone, Copy, Debug)]
enum LockApi {
    Plain,
    Exclusive,
}

#[derive(Clone, Debug)]
enum Move {
    /// An attempt with a fresh token, written in `form` by the twin; `contents` picks
    /// ExclusiveLock's value.
    Attempt {
        ttl_ms: u64,
        form: AttemptForm,
        contents: u8,
    },
    /// The last attempt sent again as the script, with its token (a reply lost with its
    /// connection, see ops/acquire.rs `Start::Again`).
    Resend,
    /// The holder's release, or (`stale`) one by a token that holds nothing.
    Release { stale: bool },
    /// The lock's TTL runs out (both of ExclusiveLock's keys: they share one expiry).
    Expire,
    /// Another client writes the fence counter of both locks.
    Spoil { counter: String },
    /// Another client gives both counters an expiry, longer than any lock here: one kept
    /// forever loses it again at the next attempt, whatever its form.
    Age,
}

fn form() -> impl Strategy<Value = AttemptForm> {
    prop_oneof![
        Just(AttemptForm::Script),
        Just(AttemptForm::Transaction),
        Just(AttemptForm::Untried),
    ]
}

/// What another client may leave in a counter. No negative number: the forms still differ
/// there (not mended yet): the script leaves it as it is and refuses every attempt, while
/// each transaction adds 2 to it, until it gives fences again, from 1.
fn spoilt() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("not a number".to_owned()),
        Just("007".to_owned()),
        Just(i64::MAX.to_string()),
        Just((FENCE_MAX + 1).to_string()),
        (0u64..6).prop_map(|left| (FENCE_MAX - left).to_string()),
    ]
}

fn a_move() -> impl Strategy<Value = Move> {
    prop_oneof![
        6 => (1_000u64..60_000, form(), 0u8..2).prop_map(|(ttl_ms, form, contents)| Move::Attempt { ttl_ms, form, contents }),
        2 => Just(Move::Resend),
        3 => any::<bool>().prop_map(|stale| Move::Release { stale }),
        1 => Just(Move::Expire),
        1 => spoilt().prop_map(|counter| Move::Spoil { counter }),
        1 => Just(Move::Age),
    ]
}

impl Socket {
    /// Sends `bytes` and answers as the JS thread's socket does (binding/js/socket): the
    /// first refusal among the replies before the last, or the last.
    fn answer(&mut self, bytes: &[u8], replies: usize) -> Value {
        use std::io::Write;
        self.stream.write_all(bytes).expect("write");
        let mut refused = None;
        for _ in 1..replies {
            if let reply @ Value::ServerError(_) = self.reply() {
                refused.get_or_insert(reply);
            }
        }
        let last = self.reply();
        refused.unwrap_or(last)
    }

    fn bytes(&mut self, parts: &[&[u8]]) -> Option<Vec<u8>> {
        match self.command(parts) {
            Value::BulkString(bytes) => Some(bytes),
            Value::Nil => None,
            other => panic!("{parts:?}: {other:?}"),
        }
    }
}

/// What an acquisition ended with, as its caller hears it.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Ending {
    Won,
    Held,
    /// No fence could be drawn: the script's NOFENCE, nothing left set.
    NoFence,
}

#[derive(Clone, Debug)]
struct Holder {
    token: String,
    contents: String,
    fence: u64,
    /// A transaction's lock key's absolute expiry (ExclusiveLock): its only proof.
    set_at: Option<i64>,
}

#[derive(Clone)]
struct Sent {
    token: String,
    contents: String,
    ttl_ms: u64,
    form: AttemptForm,
}

/// What both runs of a case share: the lock's layout, the server, keys of its own (so that
/// no case inherits another's counters), the counter's retention window.
struct Case {
    shape: LockApi,
    port: u16,
    n: u32,
    window_ms: u64,
}

/// One lock and what its run knows of it.
struct Run {
    name: &'static str,
    shape: LockApi,
    socket: Socket,
    key: Vec<u8>,
    owner_key: Vec<u8>,
    fence_key: Vec<u8>,
    window_ms: u64,
    /// The connection's user may not run MULTI: no transaction ever worked on it, so its
    /// attempts are `Untried` until its first refusal (proto/acquire.rs `TxSupport`).
    refuses: bool,
    /// MULTI was refused: every attempt is the script from then on.
    refused: bool,
    holder: Option<Holder>,
    last_fence: u64,
    last: Option<Sent>,
}

impl Run {
    fn new(name: &'static str, case: &Case, user: Option<&[u8]>) -> Run {
        let shape = case.shape;
        let key = format!("{name}:{shape:?}:{}", case.n).into_bytes();
        Run {
            name,
            shape,
            socket: socket(case.port, user),
            refuses: user.is_some(),
            owner_key: keys::owner_key(&key),
            fence_key: keys::fence_key(&key),
            key,
            window_ms: case.window_ms,
            refused: false,
            holder: None,
            last_fence: 0,
            last: None,
        }
    }

    fn op<'a>(&'a self, sent: &'a Sent, form: AttemptForm) -> AcquireAttempt<'a> {
        let layout = match self.shape {
            LockApi::Plain => Layout::Plain,
            LockApi::Exclusive => Layout::Exclusive {
                owner_key: &self.owner_key,
                contents: &sent.contents,
            },
        };
        AcquireAttempt {
            lock_key: &self.key,
            fence_key: &self.fence_key,
            token: &sent.token,
            ttl: Duration::from_millis(sent.ttl_ms),
            fence_retention_ms: self.window_ms,
            keep_fences: true,
            fences_known_kept: false,
            layout,
            form,
            sent: Instant::now(),
        }
    }

    /// Writes `sent` in `form` and reads the reply as the socket hands it over.
    fn send(&mut self, sent: &Sent, form: AttemptForm) -> Acquired {
        let op = self.op(sent, form);
        let mut out = Vec::new();
        op.encode(&mut out);
        let replies = op.replies();
        let reply = self.socket.answer(&out, replies);
        if let Value::ServerError(err) = &reply {
            let code = err.code();
            // The only refusals here: no fence, or (through `Untried`) MULTI itself.
            assert!(
                code == "NOFENCE" || code == "NOPERM",
                "{}: {reply:?}",
                self.name
            );
            self.refused |= code == "NOPERM";
        }
        self.op(sent, form).decode(reply).expect("decode")
    }

    /// The attempt `sent`, written in `form` unless MULTI was refused here, repaired as the
    /// operations repair it.
    fn attempt(&mut self, sent: Sent) -> Ending {
        let form = match sent.form {
            _ if self.refused => AttemptForm::Script,
            AttemptForm::Transaction if self.refuses => AttemptForm::Untried,
            form => form,
        };
        let sent = Sent { form, ..sent };
        self.last = Some(sent.clone());
        let acquired = self.send(&sent, form);
        match (self.shape, acquired) {
            (_, Acquired::Won { fence, set_at }) => self.won(&sent, fence, set_at),
            (_, Acquired::Held { .. }) => Ending::Held,
            (LockApi::Plain, Acquired::SetWithoutFence { .. } | Acquired::Refused) => {
                self.again(&sent)
            }
            (LockApi::Exclusive, Acquired::SetWithoutFence { set_at }) => {
                let (token, contents) = (&sent.token, &sent.contents);
                let took_back = self.release_op(token, contents, set_at);
                assert!(
                    took_back,
                    "{}: an unfenced lock is ours to take back",
                    self.name
                );
                Ending::NoFence
            }
            (LockApi::Exclusive, Acquired::Refused) if form == AttemptForm::Transaction => {
                let renewed = Sent {
                    token: format!("{}-renewed", sent.token),
                    ..sent
                };
                self.again(&renewed)
            }
            (LockApi::Exclusive, Acquired::Refused) => self.again(&sent),
        }
    }

    /// `sent` once more as the script, with its token; ExclusiveLock's transaction's token
    /// is never sent again (only its reply proves its lock ours).
    fn again(&mut self, sent: &Sent) -> Ending {
        match self.send(sent, AttemptForm::Script) {
            Acquired::Won { fence, .. } => self.won(sent, fence, None),
            Acquired::Held { .. } => Ending::Held,
            Acquired::Refused => {
                // A lock it found its own is taken back, as none of its fences can be told.
                if self
                    .holder
                    .as_ref()
                    .is_some_and(|held| held.token == sent.token)
                {
                    self.holder = None;
                }
                Ending::NoFence
            }
            other => panic!("{}: the script answered {other:?}", self.name),
        }
    }

    fn won(&mut self, sent: &Sent, fence: u64, set_at: Option<i64>) -> Ending {
        let again = self
            .holder
            .as_ref()
            .filter(|holder| holder.token == sent.token);
        match again {
            // The same attempt recognised: its fence, or a later one where transactions
            // drew some meanwhile; never an earlier one.
            Some(holder) => assert!(fence >= holder.fence, "{}: {fence}", self.name),
            None => assert!(
                fence > self.last_fence,
                "{}: fence {fence} after {}",
                self.name,
                self.last_fence
            ),
        }
        self.last_fence = self.last_fence.max(fence);
        self.holder = Some(Holder {
            token: sent.token.clone(),
            contents: sent.contents.clone(),
            fence,
            set_at,
        });
        Ending::Won
    }

    fn resend(&mut self) -> Option<Ending> {
        let sent = self.last.clone()?;
        Some(self.again(&sent))
    }

    fn release_op(&mut self, token: &str, contents: &str, set_at: Option<i64>) -> bool {
        let op = match self.shape {
            LockApi::Plain => Release::late_win(&self.key, token, false),
            LockApi::Exclusive => Release {
                lock_key: &self.owner_key,
                token,
                kind: ReleaseKind::Pair {
                    data_key: &self.key,
                    contents: contents.as_bytes(),
                    set_at,
                },
            },
        };
        let released = self.socket.run(&op, 1);
        if released {
            self.holder = None;
        }
        released
    }

    fn release(&mut self, stale: bool) -> bool {
        match self.holder.clone() {
            Some(holder) if !stale => {
                self.release_op(&holder.token, &holder.contents, holder.set_at)
            }
            holder => {
                let contents = holder.map(|holder| holder.contents).unwrap_or_default();
                self.release_op("stale", &contents, None)
            }
        }
    }

    fn expire(&mut self) {
        self.socket.int(&[b"DEL", &self.key, &self.owner_key]);
        self.holder = None;
    }

    fn spoil(&mut self, counter: &str) {
        // KEEPTTL: the forms still differ on a counter without an expiry under a held lock
        // (not mended yet): a transaction that finds the lock held gives the counter one
        // (PEXPIRE NX) for its own TTL, which may end before the held lock does.
        let set = [&b"SET"[..], &self.fence_key, counter.as_bytes(), b"KEEPTTL"];
        self.socket.command(&set);
    }

    /// The counter as a number, `None` for what no INCRBY takes.
    fn counter(&mut self) -> Option<i128> {
        let bytes = self.socket.bytes(&[b"GET", &self.fence_key])?;
        std::str::from_utf8(&bytes).ok()?.parse().ok()
    }

    /// Whether another fence pair could be drawn from the counter.
    fn room(&mut self) -> bool {
        let left = i128::from(FENCE_MAX) - 2;
        match self.socket.bytes(&[b"GET", &self.fence_key]) {
            None => true,
            Some(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let canonical = text == "0" || (!text.starts_with('0') && text.len() <= 15);
                canonical && text.parse::<i128>().is_ok_and(|n| (0..=left).contains(&n))
            }
        }
    }

    /// Checks the keys against what the run knows; answers the lock key's value and PTTL.
    fn state(&mut self) -> (Option<Vec<u8>>, i64) {
        let value = self.socket.bytes(&[b"GET", &self.key]);
        let pttl = self.socket.int(&[b"PTTL", &self.key]);
        let owner = self.socket.bytes(&[b"GET", &self.owner_key]);
        let holder = self.holder.clone();
        let name = self.name;
        match (&holder, self.shape) {
            (None, _) => {
                assert_eq!((&value, pttl), (&None, -2), "{name}: nothing left set");
                assert_eq!(owner, None, "{name}: no owner key left");
            }
            (Some(holder), LockApi::Plain) => {
                assert_eq!(value, Some(holder.token.clone().into_bytes()), "{name}");
                assert_eq!(owner, None, "{name}");
            }
            (Some(holder), LockApi::Exclusive) => {
                assert_eq!(value, Some(holder.contents.clone().into_bytes()), "{name}");
                let expiry = self.socket.int(&[b"PEXPIRETIME", &self.key]);
                match holder.set_at {
                    // A transaction writes no owner key: its expiry is the proof.
                    Some(at) => {
                        assert_eq!(expiry, at, "{name}: the expiry the reply told");
                        assert_eq!(owner, None, "{name}: a transaction's lock has no owner");
                    }
                    None => {
                        assert_eq!(owner, Some(holder.token.clone().into_bytes()), "{name}");
                        let owner_expiry = self.socket.int(&[b"PEXPIRETIME", &self.owner_key]);
                        assert_eq!(owner_expiry, expiry, "{name}: one expiry for both keys");
                    }
                }
            }
        }
        if holder.is_some() {
            assert!(pttl > 0, "{name}: {pttl}");
            // The counter outlives its lock, whichever form drew from it.
            let counter_ttl = self.socket.int(&[b"PTTL", &self.fence_key]);
            assert!(
                counter_ttl == -1 || counter_ttl >= pttl,
                "{name}: counter {counter_ttl}, lock {pttl}"
            );
        }
        (value, pttl)
    }
}

/// Whether the twin's counter ran out first, its skipped fences having taken the room the
/// script's still has: the one difference allowed, after which the two locks differ.
/// Otherwise both answer alike.
fn ran_out(by_script: Ending, by_twin: Ending, rooms: (bool, bool), at: &str) -> bool {
    if by_script == Ending::Won && by_twin == Ending::NoFence {
        assert_eq!(rooms, (true, false), "{at}: the twin had room");
        return true;
    }
    assert_eq!(by_script, by_twin, "{at}");
    false
}

/// One case: `steps` on a lock of each run, until the twin's counter runs out first.
fn run(script: &mut Run, twin: &mut Run, steps: &[Move]) {
    for (n, step) in steps.iter().enumerate() {
        let counters = (script.counter(), twin.counter());
        let at = format!("step {n}: {step:?}");
        match step {
            Move::Attempt {
                ttl_ms,
                form,
                contents,
            } => {
                let sent = |form| Sent {
                    token: format!("token-{n}"),
                    contents: format!("contents-{contents}"),
                    ttl_ms: *ttl_ms,
                    form,
                };
                let rooms = (script.room(), twin.room());
                let by_script = script.attempt(sent(AttemptForm::Script));
                let by_twin = twin.attempt(sent(*form));
                if ran_out(by_script, by_twin, rooms, &at) {
                    return;
                }
            }
            Move::Resend => {
                let transaction = twin.last.as_ref().map(|sent| sent.form);
                let exclusive = matches!(twin.shape, LockApi::Exclusive);
                let rooms = (script.room(), twin.room());
                // ExclusiveLock's transaction is never sent again with its token: its lock
                // is proved ours by the expiry its reply told, and nothing else.
                if !(exclusive && transaction == Some(AttemptForm::Transaction)) {
                    let (by_script, by_twin) = (script.resend(), twin.resend());
                    if let Some(answers) = by_script.zip(by_twin) {
                        if ran_out(answers.0, answers.1, rooms, &at) {
                            return;
                        }
                    }
                    assert_eq!(by_script.is_some(), by_twin.is_some(), "{at}");
                }
            }
            Move::Release { stale } => {
                assert_eq!(script.release(*stale), twin.release(*stale), "{at}");
            }
            Move::Expire => {
                script.expire();
                twin.expire();
            }
            Move::Age => {
                for run in [&mut *script, &mut *twin] {
                    run.socket.int(&[b"PEXPIRE", &run.fence_key, b"120000"]);
                }
            }
            Move::Spoil { counter } => {
                // Put back, the counter would repeat fences whatever the form.
                let value = counter.parse::<i128>().ok();
                let back = |run: &Run| value.is_some_and(|to| to <= i128::from(run.last_fence));
                if back(script) || back(twin) {
                    continue;
                }
                script.spoil(counter);
                twin.spoil(counter);
                continue;
            }
        }
        // A counter never goes back: draws that fail are undone, skips only go forward.
        for (run, before) in [(&mut *script, counters.0), (&mut *twin, counters.1)] {
            if let (Some(before), Some(after)) = (before, run.counter()) {
                assert!(
                    after >= before,
                    "{at}: {} counter {before} -> {after}",
                    run.name
                );
            }
        }
        // Kept forever, both counters lose an expiry at the same attempts.
        if script.window_ms == 0 {
            let forever = |run: &mut Run| run.socket.int(&[b"PTTL", &run.fence_key]) == -1;
            assert_eq!(forever(script), forever(twin), "{at}");
        }
        let (value, pttl) = script.state();
        let (value_too, pttl_too) = twin.state();
        assert_eq!(value, value_too, "{at}");
        let (holder, holder_too) = (&script.holder, &twin.holder);
        let tokens = |holder: &Option<Holder>| holder.as_ref().map(|held| held.token.clone());
        assert_eq!(tokens(holder), tokens(holder_too), "{at}");
        assert!(
            (pttl - pttl_too).abs() <= PTTL_SLACK,
            "{at}: {pttl} {pttl_too}"
        );
    }
}

fn ok(reply: &Value) -> bool {
    matches!(reply, Value::SimpleString(ok) if ok == "OK") || *reply == Value::Okay
}

fn socket(port: u16, user: Option<&[u8]>) -> Socket {
    let mut socket = Socket::open(port);
    if let Some(user) = user {
        let auth = socket.command(&[b"AUTH", user, b"any"]);
        assert!(ok(&auth), "AUTH: {auth:?}");
    }
    // Loaded beforehand, as the JS thread's socket has them (ops/direct.rs).
    for source in scripts::ALL_SOURCES {
        socket.command(&[b"SCRIPT", b"LOAD", source.as_bytes()]);
    }
    socket
}

fn cases(shape: LockApi, cases: u32) {
    let server = RedisServer::start();
    let mut admin = Socket::open(server.port);
    let acl = [
        &b"ACL"[..],
        b"SETUSER",
        NO_MULTI,
        b"on",
        b"nopass",
        b"~*",
        b"&*",
        b"+@all",
        b"-multi",
    ];
    let created = admin.command(&acl);
    assert!(ok(&created), "ACL SETUSER: {created:?}");
    let case = AtomicU32::new(0);
    let steps = proptest::collection::vec(a_move(), 1..40);
    let config = ProptestConfig::with_cases(cases);
    proptest!(config, |(steps in steps, refuses in any::<bool>(), forever in any::<bool>(), spoils in any::<bool>())| {
        // Half the cases keep a sound counter: a spoilt one refuses every attempt after it.
        let steps: Vec<Move> = steps
            .into_iter()
            .filter(|step| spoils || !matches!(step, Move::Spoil { .. }))
            .collect();
        let n = case.fetch_add(1, Ordering::Relaxed);
        let window_ms = if forever { 0 } else { 5000 };
        let case = Case { shape, port: server.port, n, window_ms };
        let mut script = Run::new("script", &case, None);
        let mut twin = Run::new("twin", &case, refuses.then_some(NO_MULTI));
        run(&mut script, &mut twin, &steps);
    });
}

#[test]
fn every_plain_form_and_its_repair_answer_as_the_script_and_leave_the_same_lock() {
    cases(LockApi::Plain, 96);
}

#[test]
fn every_exclusive_form_and_its_repair_answer_as_the_script_and_leave_the_same_lock() {
    cases(LockApi::Exclusive, 96);
}
