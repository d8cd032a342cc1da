//! The native forms against their scripts: random sequences of writes (locks held by us, by
//! another token, expired, of the wrong type; wake queues with connections alive or gone)
//! and releases, run on two keyspaces, one through Lua only, one as `Engine::eval` runs them.
//! Both must answer alike, publish alike, and leave every key alike after every step.

use super::super::clock::frozen;
use super::super::keyspace::Keyspace;
use super::super::lua::LuaHost;
use super::super::pubsub::{ChannelKind, Pushes};
use super::super::reply::MemoryReply;
use super::form;
use crate::core::proto::scripts;
use proptest::prelude::*;
use redis::PushInfo;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

const LOCK: &[u8] = b"lock:k";
const QUEUE: &[u8] = b"{lock:k}\xffwaiting";
const CHANNEL: &[u8] = b"{lock:k}:released";
const EX_LOCK: &[u8] = b"ex:k";
const EX_OWNER: &[u8] = b"{ex:k}\xffowner";
const FENCE: &[u8] = b"{lock:k}\xfffence";
const EX_FENCE: &[u8] = b"{ex:k}\xfffence";
const KEYS: [&[u8]; 6] = [LOCK, QUEUE, EX_LOCK, EX_OWNER, FENCE, EX_FENCE];
const TOKENS: [&[u8]; 3] = [b"t0", b"t1", b"1"];
/// What a fence counter may hold: usable, at its end, or not a counter.
const COUNTERS: [&[u8]; 6] = [
    b"0",
    b"1",
    b"41",
    b"999999999999997",
    b"999999999999998",
    b"x",
];
/// The keyspaces' stopped clock at the start of a case (µs).
const START_US: i64 = 1_800_000_000_000_000;
/// Far ahead of any clock: every expiry the steps set is exact, and alike on both keyspaces.
const AHEAD: i64 = 4_000_000_000_000;

#[derive(Debug, Clone)]
enum KeyExpiry {
    None,
    Past,
    /// AHEAD plus this many ms (some within same_expiry.lua's slack of each other).
    Ahead(i64),
}

#[derive(Debug, Clone)]
enum ScriptStep {
    Set {
        key: usize,
        value: usize,
        expiry: KeyExpiry,
    },
    Del {
        key: usize,
    },
    WrongType {
        key: usize,
    },
    Queue {
        member: u8,
        gone_or_alive: bool,
        score: u8,
    },
    Listen {
        id: u8,
        on: bool,
    },
    ReleaseWake {
        token: usize,
        ours_wait: bool,
    },
    ReleaseOne {
        token: usize,
    },
    ReleasePair {
        token: usize,
        value: usize,
        set_at: Option<Option<i64>>,
    },
    Counter {
        exclusive: bool,
        value: usize,
    },
    Pass {
        ms: i64,
    },
    Acquire {
        exclusive: bool,
        value: usize,
        token: usize,
        ttl: usize,
        window: usize,
    },
}

fn expiry() -> impl Strategy<Value = KeyExpiry> {
    prop_oneof![
        Just(KeyExpiry::None),
        Just(KeyExpiry::Past),
        (0i64..120).prop_map(KeyExpiry::Ahead),
    ]
}

fn step() -> impl Strategy<Value = ScriptStep> {
    prop_oneof![
        3 => (0usize..4, 0usize..3, expiry()).prop_map(|(key, value, expiry)| ScriptStep::Set { key, value, expiry }),
        1 => (0usize..4).prop_map(|key| ScriptStep::Del { key }),
        1 => (0usize..5).prop_map(|key| ScriptStep::WrongType { key }),
        2 => (0u8..4, any::<bool>(), 0u8..5).prop_map(|(member, gone_or_alive, score)| ScriptStep::Queue { member, gone_or_alive, score }),
        1 => (0u8..4, any::<bool>()).prop_map(|(id, on)| ScriptStep::Listen { id, on }),
        3 => (0usize..3, any::<bool>()).prop_map(|(token, ours_wait)| ScriptStep::ReleaseWake { token, ours_wait }),
        1 => (0usize..3).prop_map(|token| ScriptStep::ReleaseOne { token }),
        3 => (0usize..3, 0usize..3, proptest::option::of(proptest::option::of(0i64..120)))
            .prop_map(|(token, value, set_at)| ScriptStep::ReleasePair { token, value, set_at }),
        1 => (any::<bool>(), 0usize..COUNTERS.len()).prop_map(|(exclusive, value)| ScriptStep::Counter { exclusive, value }),
        1 => (0i64..300).prop_map(|ms| ScriptStep::Pass { ms }),
        5 => (any::<bool>(), 0usize..3, 0usize..3, 0usize..3, 0usize..4)
            .prop_map(|(exclusive, value, token, ttl, window)| ScriptStep::Acquire { exclusive, value, token, ttl, window }),
    ]
}

/// A keyspace with its Lua state; `native` runs scripts as `Engine::eval` does.
struct Side {
    keyspace: Keyspace,
    lua: LuaHost,
    native: bool,
}

impl Side {
    fn new(native: bool) -> Self {
        let mut lua = LuaHost::new().expect("a Lua state");
        for source in scripts::ALL_SOURCES {
            lua.load(source.as_bytes()).expect("our scripts compile");
        }
        Side {
            keyspace: Keyspace::new(),
            lua,
            native,
        }
    }

    fn command(&mut self, args: &[&[u8]]) -> MemoryReply {
        self.keyspace.tick();
        self.keyspace.execute(args)
    }

    /// The script's reply, and whether its native form gave it.
    fn script(
        &mut self,
        script: &redis::Script,
        keys: &[&[u8]],
        argv: &[&[u8]],
    ) -> (MemoryReply, bool) {
        let sha = script.get_hash();
        // As `Instance::run` reads the clock for the step, before either form runs.
        self.keyspace.tick();
        if self.native {
            let (_, form) = form(sha.as_bytes()).expect("a native form");
            if let Some(reply) = form(&mut self.keyspace, keys, argv) {
                return (reply, true);
            }
        }
        (self.lua.run(&mut self.keyspace, sha, keys, argv), false)
    }

    fn listen(&mut self, id: u8, on: bool) {
        let channel = [b"{lock:k}:wake:".as_slice(), &[b'0' + id]].concat();
        let pushes: Pushes = Arc::new(|_| {});
        match on {
            true => self.keyspace.pubsub.subscribe(
                u64::from(id),
                ChannelKind::Sharded,
                &channel,
                Some(pushes),
            ),
            false => {
                self.keyspace
                    .pubsub
                    .unsubscribe(u64::from(id), ChannelKind::Sharded, &channel)
            }
        };
    }

    /// Every key the steps touch, as commands read it, and what was published.
    fn state(&mut self) -> (Vec<MemoryReply>, Vec<PushInfo>) {
        let mut state = Vec::new();
        for key in KEYS {
            let kind = self.command(&[b"TYPE", key]);
            state.push(self.command(&[b"PEXPIRETIME", key]));
            state.push(match &kind {
                MemoryReply::Status(kind) if kind == "string" => self.command(&[b"GET", key]),
                MemoryReply::Status(kind) if kind == "zset" => {
                    self.command(&[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"])
                }
                _ => MemoryReply::Nil,
            });
            state.push(kind);
        }
        let published = self
            .keyspace
            .pubsub
            .take_outbox()
            .into_iter()
            .map(|(_, push)| push)
            .collect();
        (state, published)
    }

    fn run(&mut self, step: &ScriptStep) -> (MemoryReply, bool) {
        let done = (MemoryReply::ok(), false);
        match step {
            ScriptStep::Set { key, value, expiry } => {
                self.command(&[b"SET", KEYS[*key], TOKENS[*value]]);
                let at = match expiry {
                    KeyExpiry::None => return done,
                    KeyExpiry::Past => 1_000,
                    KeyExpiry::Ahead(ms) => AHEAD + ms,
                };
                (
                    self.command(&[b"PEXPIREAT", KEYS[*key], at.to_string().as_bytes()]),
                    false,
                )
            }
            ScriptStep::Del { key } => (self.command(&[b"DEL", KEYS[*key]]), false),
            ScriptStep::WrongType { key } => {
                (self.command(&[b"HSET", KEYS[*key], b"f", b"v"]), false)
            }
            ScriptStep::Queue {
                member,
                gone_or_alive,
                score,
            } => {
                let mut member = vec![b'0' + member];
                if *gone_or_alive {
                    member.push(b'!');
                }
                (
                    self.command(&[b"ZADD", QUEUE, score.to_string().as_bytes(), &member]),
                    false,
                )
            }
            ScriptStep::Listen { id, on } => {
                self.listen(*id, *on);
                done
            }
            ScriptStep::ReleaseWake { token, ours_wait } => {
                let ours: &[u8] = if *ours_wait { b"1" } else { b"0" };
                self.script(
                    &scripts::RELEASE_WAKE,
                    &[LOCK, QUEUE],
                    &[TOKENS[*token], CHANNEL, ours],
                )
            }
            ScriptStep::Counter { exclusive, value } => {
                let key = if *exclusive { EX_FENCE } else { FENCE };
                (self.command(&[b"SET", key, COUNTERS[*value]]), false)
            }
            ScriptStep::Pass { ms } => {
                let now = frozen::now().unwrap_or(START_US);
                frozen::set(Some(now + ms * 1000));
                done
            }
            ScriptStep::Acquire {
                exclusive,
                value,
                token,
                ttl,
                window,
            } => {
                let ttl = [b"1".as_slice(), b"150", b"10000"][*ttl];
                let window = [b"0".as_slice(), b"100", b"60000", b"-"][*window];
                match exclusive {
                    false => self.script(
                        &scripts::ACQUIRE,
                        &[LOCK, FENCE],
                        &[TOKENS[*value], ttl, window],
                    ),
                    true => self.script(
                        &scripts::ACQUIRE,
                        &[EX_LOCK, EX_FENCE, EX_OWNER],
                        &[TOKENS[*value], ttl, window, TOKENS[*token]],
                    ),
                }
            }
            ScriptStep::ReleaseOne { token } => {
                self.script(&scripts::RELEASE, &[LOCK], &[TOKENS[*token]])
            }
            ScriptStep::ReleasePair {
                token,
                value,
                set_at,
            } => {
                let set_at = match set_at {
                    None => Vec::new(),
                    Some(None) => b"soon".to_vec(),
                    Some(Some(ms)) => (AHEAD + ms).to_string().into_bytes(),
                };
                let value = [b"1".as_slice(), b"2", b"t0"][*value];
                self.script(
                    &scripts::RELEASE,
                    &[EX_OWNER, EX_LOCK],
                    &[TOKENS[*token], value, &set_at],
                )
            }
        }
    }
}

#[test]
fn the_native_forms_answer_and_write_as_their_scripts() {
    let native = AtomicU32::new(0);
    let released = AtomicU32::new(0);
    proptest!(ProptestConfig::with_cases(256), |(steps in proptest::collection::vec(step(), 1..60))| {
        frozen::set(Some(START_US));
        let (mut lua, mut ours) = (Side::new(false), Side::new(true));
        for id in 0..4 {
            lua.listen(id, true);
            ours.listen(id, true);
        }
        for (at, step) in steps.iter().enumerate() {
            let now = frozen::now();
            let (expected, _) = lua.run(step);
            // Both sides at the same instant (a `Pass` moves it once).
            frozen::set(now);
            let (reply, natively) = ours.run(step);
            prop_assert_eq!(&reply, &expected, "step {} {:?}", at, step);
            prop_assert_eq!(ours.state(), lua.state(), "after step {} {:?}", at, step);
            let won = matches!(&expected, MemoryReply::Array(items) if items.first() == Some(&MemoryReply::Int(1)));
            if (won || expected == MemoryReply::Int(1)) && natively {
                released.fetch_add(1, Ordering::Relaxed);
            }
            native.fetch_add(u32::from(natively), Ordering::Relaxed);
        }
    });
    frozen::set(None);
    // The forms ran, and released: the comparison was not of Lua with itself.
    assert!(native.load(Ordering::Relaxed) > 500);
    assert!(released.load(Ordering::Relaxed) > 50);
}

/// The scripts each native form was written against, by SHA-1: a script edited without its
/// native form fails here, rather than running beside a form that no longer matches it.
#[test]
fn the_native_forms_were_written_against_these_scripts() {
    let written_against = [
        (
            "release_wake.lua",
            scripts::RELEASE_WAKE.get_hash(),
            "a20c1402a891ea22b14c4a48b729d17930d79c9b",
        ),
        (
            "release.lua",
            scripts::RELEASE.get_hash(),
            "963fa5987d1f5cab84e59f359105e7fc724d664a",
        ),
        (
            "acquire.lua",
            scripts::ACQUIRE.get_hash(),
            "0971d54d1fe902163b6da83b5220c246454b0e35",
        ),
    ];
    let changed: Vec<String> = (written_against.iter())
        .filter(|(_, now, pinned)| now != pinned)
        .map(|(name, now, _)| format!("{name} is now {now}"))
        .collect();
    assert!(
        changed.is_empty(),
        "update the native forms (native.rs) of the scripts changed, then these hashes: {changed:?}"
    );
}
