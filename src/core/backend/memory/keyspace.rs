//! The data of one `memory://` keyspace and the generic commands on it (existence, expiry,
//! time). Strings, hashes and sorted sets have their commands in their own files; `execute`
//! dispatches to all of them.
//! Every command runs against one reading of the clock (`tick`), taken when its step starts
//! (the command, or the transaction, script or call around it): these see time stand still,
//! as on Redis 7.2+.

use super::clock::{Clock, Now};
use super::deadlines::Deadlines;
use super::number::parse_i64;
use super::pubsub::{ChannelKind, PubSub};
use super::reply::{MemoryReply, NOT_INTEGER, SYNTAX};
use super::sorted_set::ZSet;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// The most expired keys one step (`Instance::run`) sweeps out before it runs. Every step
/// sweeps, so a crowd of keys expiring together goes out over the next steps, none of which
/// waits for more than this many removals (tens of microseconds) while holding the keyspace.
const SWEEP_SLICE: usize = 256;

#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    Str(Vec<u8>),
    Hash(HashMap<Vec<u8>, Vec<u8>>),
    ZSet(ZSet),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub data: Data,
    /// Absolute, in ms of the keyspace's clock; `None` lives until deleted. Changed only
    /// through `Keyspace::insert` and `set_expiry`, which keep the index of deadlines.
    pub expire_at: Option<i64>,
}

/// SipHash's cost showed in every command; foldhash is several times cheaper. Keys are the
/// application's, which may take them from its users, and the map lives as long as the
/// process: foldhash's own random seeds come from addresses and the clock, which it does not
/// claim resist a study of the process, so both of its seeds are drawn here from the OS's
/// random source instead, as SipHash's were.
/// Each key is one allocation, shared with the index of deadlines (an entry with a TTL cost
/// two copies of its key, and every acquisition writes one).
type Entries = HashMap<Arc<[u8]>, Entry, KeyHashing>;

#[derive(Clone)]
struct KeyHashing(foldhash::quality::SeedableRandomState);

static SHARED_SEED: std::sync::LazyLock<foldhash::SharedSeed> =
    std::sync::LazyLock::new(|| foldhash::SharedSeed::from_u64(os_random()));

/// A draw from the OS; should it refuse, foldhash's own seeding (the weaker one) stands in.
fn os_random() -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        use std::hash::BuildHasher;
        foldhash::quality::RandomState::default().hash_one(0u8)
    })
}

impl Default for KeyHashing {
    fn default() -> Self {
        KeyHashing(foldhash::quality::SeedableRandomState::with_seed(
            os_random(),
            &SHARED_SEED,
        ))
    }
}

impl std::hash::BuildHasher for KeyHashing {
    type Hasher = foldhash::quality::FoldHasher<'static>;
    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

#[derive(Default)]
pub struct Keyspace {
    entries: Entries,
    /// When each entry with an expiry expires: what a sweep reads.
    deadlines: Deadlines,
    clock: Clock,
    pub(super) now: Option<Now>,
    /// The clock reading (ms) at which the last sweep left no entry past its expiry: while
    /// `now` stays there, `live` need not look at an entry's expiry (one hash lookup, not
    /// two, for every key a command reads). Cleared when an entry is given an expiry already
    /// past, or when a sweep stops at its slice with expired keys left.
    clean_at: Option<i64>,
    pub pubsub: PubSub,
    /// Entries the sweeps have looked at, for tests of what a sweep costs.
    #[cfg(test)]
    pub(super) sweep_visits: usize,
}

impl Keyspace {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the clock for the step about to run (`Instance::run`: a command, a transaction,
    /// a script or a call's commands), and drops a slice of the keys that expired unread.
    pub fn tick(&mut self) -> Now {
        let now = self.clock.now();
        self.now = Some(now);
        self.sweep(now.ms(), SWEEP_SLICE);
        now
    }

    /// Drops up to `most` keys that expired by `now_ms`, earliest first: the work is what
    /// expired, not what exists.
    fn sweep(&mut self, now_ms: i64, most: usize) {
        self.clean_at = None;
        for _ in 0..most {
            let Some((at, key)) = self.deadlines.pop_expired(now_ms) else {
                self.clean_at = Some(now_ms);
                return;
            };
            #[cfg(test)]
            {
                self.sweep_visits += 1;
            }
            // The index is exact; the check only keeps a slip of ours from deleting a key
            // that lives on.
            if self
                .entries
                .get(&key[..])
                .is_some_and(|entry| entry.expire_at == Some(at))
            {
                self.entries.remove(&key[..]);
            }
        }
    }

    /// Puts `entry` at `key`, replacing what was there.
    pub(super) fn insert(&mut self, key: &[u8], entry: Entry) {
        let new = entry.expire_at;
        self.keep_clean(new);
        // A key already there keeps its allocation (a map keeps the key it holds).
        let shared = match self.entries.get_key_value(key) {
            Some((shared, _)) => shared.clone(),
            None => Arc::from(key),
        };
        let old = self
            .entries
            .insert(shared.clone(), entry)
            .and_then(|old| old.expire_at);
        self.deadlines.moved(&shared, old, new);
    }

    pub(super) fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (shared, entry) = self.entries.remove_entry(key)?;
        self.deadlines.moved(&shared, entry.expire_at, None);
        Some(entry)
    }

    /// Sets the expiry of the entry at `key`, if there is one.
    fn set_expiry(&mut self, key: &[u8], at: Option<i64>) {
        let Some((shared, entry)) = self.entries.get_key_value(key) else {
            return;
        };
        let shared = shared.clone();
        let old = entry.expire_at;
        if let Some(entry) = self.entries.get_mut(key) {
            entry.expire_at = at;
        }
        self.deadlines.moved(&shared, old, at);
        self.keep_clean(at);
    }

    /// An entry is given expiry `at`: one already past at `clean_at` ends what it promised.
    fn keep_clean(&mut self, at: Option<i64>) {
        if let (Some(at), Some(clean)) = (at, self.clean_at) {
            if clean > at {
                self.clean_at = None;
            }
        }
    }

    pub(super) fn now(&mut self) -> Now {
        match self.now {
            Some(now) => now,
            None => self.tick(),
        }
    }

    /// An empty keyspace on the same clock, standing in while a script has this one.
    pub(super) fn placeholder(&self) -> Self {
        Keyspace {
            entries: Entries::default(),
            deadlines: Deadlines::default(),
            clock: self.clock,
            now: self.now,
            clean_at: None,
            pubsub: PubSub::default(),
            #[cfg(test)]
            sweep_visits: 0,
        }
    }

    /// The live entry at `key`: one past its expiry is deleted on the way, as Redis does
    /// lazily.
    pub(super) fn live(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let ms = self.now().ms();
        if self.clean_at != Some(ms)
            && self
                .entries
                .get(key)
                .is_some_and(|entry| expired(entry, ms))
        {
            self.remove(key);
        }
        self.entries.get_mut(key)
    }

    /// Takes the live entry at `key` out, with one look-up where `live` and `remove` make
    /// two: one past its expiry goes all the same, as `live` would drop it, and is none.
    pub(super) fn take_live(&mut self, key: &[u8]) -> Option<Entry> {
        let ms = self.now().ms();
        let entry = self.remove(key)?;
        (!expired(&entry, ms)).then_some(entry)
    }

    pub(super) fn exists(&mut self, key: &[u8]) -> bool {
        self.live(key).is_some()
    }

    /// Runs one command (`args[0]` is its name). Pub/sub commands that belong to a
    /// connection are the connection's business; PUBLISH and SPUBLISH are here.
    pub fn execute(&mut self, args: &[&[u8]]) -> MemoryReply {
        let Some((name, rest)) = args.split_first() else {
            return MemoryReply::error("ERR empty command");
        };
        // Names come in capitals from the core and the scripts: matched as written, with no
        // copy; any other case through a copy in capitals, as Redis takes any case.
        if let Some(reply) = self.run_named(name, rest) {
            return reply;
        }
        let mut buf = [0; 16];
        if let Some(upper) = buf.get_mut(..name.len()) {
            upper.copy_from_slice(name);
            upper.make_ascii_uppercase();
            if let Some(reply) = self.run_named(upper, rest) {
                return reply;
            }
        }
        unknown_command(&String::from_utf8_lossy(name), rest)
    }

    /// Runs the command named `name` (in capitals); `None` when there is no such command.
    fn run_named(&mut self, name: &[u8], rest: &[&[u8]]) -> Option<MemoryReply> {
        Some(match name {
            b"GET" => self.get("GET", rest),
            b"SET" => self.set("SET", rest),
            b"INCR" => self.incr_by("INCR", rest, Some(1)),
            b"DECR" => self.incr_by("DECR", rest, Some(-1)),
            b"INCRBY" => self.incr_by("INCRBY", rest, None),
            b"HGET" => self.hget("HGET", rest),
            b"HSET" => self.hset("HSET", rest),
            b"ZADD" => self.zadd("ZADD", rest),
            b"ZRANGE" => self.zrange("ZRANGE", rest),
            b"ZREM" => self.zrem("ZREM", rest),
            b"ZSCORE" => self.zscore("ZSCORE", rest),
            b"ZPOPMIN" => self.zpopmin("ZPOPMIN", rest),
            b"ZCARD" => self.zcard("ZCARD", rest),
            b"DEL" => self.del("DEL", rest),
            b"UNLINK" => self.del("UNLINK", rest),
            b"EXISTS" => self.exists_command("EXISTS", rest),
            b"PEXPIRE" => self.expire("PEXPIRE", rest, 1, false),
            b"EXPIRE" => self.expire("EXPIRE", rest, 1000, false),
            b"PEXPIREAT" => self.expire("PEXPIREAT", rest, 1, true),
            b"EXPIREAT" => self.expire("EXPIREAT", rest, 1000, true),
            b"PTTL" => self.ttl("PTTL", rest, 1),
            b"TTL" => self.ttl("TTL", rest, 1000),
            b"PEXPIRETIME" => self.expire_time("PEXPIRETIME", rest, 1),
            b"EXPIRETIME" => self.expire_time("EXPIRETIME", rest, 1000),
            b"PERSIST" => self.persist("PERSIST", rest),
            b"TYPE" => self.type_of("TYPE", rest),
            b"TIME" => self.time("TIME", rest),
            b"DBSIZE" => self.dbsize("DBSIZE", rest),
            b"FLUSHALL" | b"FLUSHDB" => {
                self.entries.clear();
                self.deadlines.clear();
                MemoryReply::ok()
            }
            b"PUBLISH" => self.publish("PUBLISH", rest, false),
            b"SPUBLISH" => self.publish("SPUBLISH", rest, true),
            _ => return None,
        })
    }

    fn del(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        if args.is_empty() {
            return MemoryReply::arity(name);
        }
        let mut deleted = 0;
        for key in args {
            if self.take_live(key).is_some() {
                deleted += 1;
            }
        }
        MemoryReply::Int(deleted)
    }

    fn exists_command(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        if args.is_empty() {
            return MemoryReply::arity(name);
        }
        // Each key counts as often as it is named, as in Redis.
        MemoryReply::Int(args.iter().filter(|key| self.exists(key)).count() as i64)
    }

    /// PEXPIRE / EXPIRE / PEXPIREAT / EXPIREAT with Redis 7's NX, XX, GT and LT.
    fn expire(&mut self, name: &str, args: &[&[u8]], unit_ms: i64, absolute: bool) -> MemoryReply {
        let [key, amount, options @ ..] = args else {
            return MemoryReply::arity(name);
        };
        let Some(amount) = parse_i64(amount) else {
            return MemoryReply::error(NOT_INTEGER);
        };
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for option in options {
            match String::from_utf8_lossy(option)
                .to_ascii_uppercase()
                .as_str()
            {
                "NX" => nx = true,
                "XX" => xx = true,
                "GT" => gt = true,
                "LT" => lt = true,
                other => return MemoryReply::error(format!("ERR Unsupported option {other}")),
            }
        }
        if nx && (xx || gt || lt) {
            return MemoryReply::error(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            );
        }
        if gt && lt {
            return MemoryReply::error("ERR GT and LT options at the same time are not compatible");
        }
        let invalid = || {
            MemoryReply::error(format!(
                "ERR invalid expire time in '{}' command",
                name.to_ascii_lowercase()
            ))
        };
        let now_ms = self.now().ms();
        let Some(mut at) = amount.checked_mul(unit_ms) else {
            return invalid();
        };
        if !absolute {
            let Some(sum) = at.checked_add(now_ms) else {
                return invalid();
            };
            at = sum;
        }
        let Some(entry) = self.live(key) else {
            return MemoryReply::Int(0);
        };
        let current = entry.expire_at;
        let allowed = match current {
            None => !(xx || gt),
            Some(current) => !nx && (!gt || at > current) && (!lt || at < current),
        };
        if !allowed {
            return MemoryReply::Int(0);
        }
        if at <= now_ms {
            self.remove(key);
        } else {
            self.set_expiry(key, Some(at));
        }
        MemoryReply::Int(1)
    }

    fn ttl(&mut self, name: &str, args: &[&[u8]], unit_ms: i64) -> MemoryReply {
        let [key] = args else {
            return MemoryReply::arity(name);
        };
        let now_ms = self.now().ms();
        match self.live(key) {
            None => MemoryReply::Int(-2),
            Some(Entry {
                expire_at: None, ..
            }) => MemoryReply::Int(-1),
            Some(Entry {
                expire_at: Some(at),
                ..
            }) => {
                let left = (*at - now_ms).max(0);
                // TTL rounds to the nearest second, as Redis does.
                MemoryReply::Int(if unit_ms == 1 {
                    left
                } else {
                    (left + 500) / 1000
                })
            }
        }
    }

    fn expire_time(&mut self, name: &str, args: &[&[u8]], unit_ms: i64) -> MemoryReply {
        let [key] = args else {
            return MemoryReply::arity(name);
        };
        match self.live(key) {
            None => MemoryReply::Int(-2),
            Some(entry) => MemoryReply::Int(entry.expire_at.map_or(-1, |at| at / unit_ms)),
        }
    }

    fn persist(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key] = args else {
            return MemoryReply::arity(name);
        };
        match self.live(key) {
            Some(entry) if entry.expire_at.is_some() => {
                self.set_expiry(key, None);
                MemoryReply::Int(1)
            }
            _ => MemoryReply::Int(0),
        }
    }

    fn type_of(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key] = args else {
            return MemoryReply::arity(name);
        };
        let kind = match self.live(key).map(|entry| &entry.data) {
            None => "none",
            Some(Data::Str(_)) => "string",
            Some(Data::Hash(_)) => "hash",
            Some(Data::ZSet(_)) => "zset",
        };
        MemoryReply::Status(kind.into())
    }

    fn time(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        if !args.is_empty() {
            return MemoryReply::arity(name);
        }
        let now = self.now();
        MemoryReply::Array(vec![
            MemoryReply::bulk(now.us.div_euclid(1_000_000).to_string()),
            MemoryReply::bulk(now.us.rem_euclid(1_000_000).to_string()),
        ])
    }

    fn dbsize(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        if !args.is_empty() {
            return MemoryReply::arity(name);
        }
        // Redis counts keys that expired unread too; ours go out first, so that the count
        // does not depend on how far the sweeps got.
        let ms = self.now().ms();
        self.sweep(ms, usize::MAX);
        MemoryReply::Int(self.entries.len() as i64)
    }
}

/// Redis keeps a key through the very millisecond it expires at.
fn expired(entry: &Entry, now_ms: i64) -> bool {
    entry.expire_at.is_some_and(|at| now_ms > at)
}

pub fn unknown_command(name: &str, args: &[&[u8]]) -> MemoryReply {
    let shown: String = args
        .iter()
        .map(|arg| format!("'{}' ", String::from_utf8_lossy(arg)))
        .collect();
    MemoryReply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {shown}"
    ))
}

/// A command's name in capitals, made in `buf` when it fits (every name a script sends
/// does): the one thing of each command that was an allocation of its own.
pub(super) fn command_name<'a>(name: &[u8], buf: &'a mut [u8; 32]) -> Cow<'a, str> {
    match (buf.get_mut(..name.len()), std::str::from_utf8(name)) {
        (Some(upper), Ok(_)) => {
            upper.copy_from_slice(name);
            upper.make_ascii_uppercase();
            // Valid UTF-8 stays valid when its ASCII letters change case.
            Cow::Borrowed(std::str::from_utf8(upper).unwrap_or_default())
        }
        _ => Cow::Owned(String::from_utf8_lossy(name).to_ascii_uppercase()),
    }
}

/// For commands whose options are keywords: the uppercase keyword, or a syntax error.
pub(super) fn keyword(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_uppercase()
}

pub(super) fn syntax_error() -> MemoryReply {
    MemoryReply::error(SYNTAX)
}

/// PUBLISH and SPUBLISH: here, beside the keyspace that owns the subscriptions.
impl Keyspace {
    pub(super) fn publish(&mut self, name: &str, args: &[&[u8]], sharded: bool) -> MemoryReply {
        let [channel, message] = args else {
            return MemoryReply::arity(name);
        };
        let kind = if sharded {
            ChannelKind::Sharded
        } else {
            ChannelKind::Plain
        };
        MemoryReply::Int(self.pubsub.publish(kind, channel, message))
    }
}

#[cfg(test)]
#[path = "keyspace_tests.rs"]
mod tests;
