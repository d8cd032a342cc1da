//! `memory://` answers syncguard's layout as Redis does: its Lua's `cjson` writes and reads
//! what Redis's does, and the six sg_*.lua scripts (a Redlock's fence write-back too), sent
//! to a real redis-server and to a `memory://` keyspace, get the same replies and leave the
//! same records, index keys, fence counters and TTLs. lua-cjson writes an object's keys in
//! Lua's table order; both run the same Lua 5.1, whose order for the same inserts is the
//! same, so records are compared byte for byte.

mod common;

use common::{args_of, RedisServer};
use native_redis_lock::core::api::memory_command;
use native_redis_lock::core::api::scripts;
use native_redis_lock::core::basics::keys::{queue_key, released_channel};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Script, Value};
use std::time::Instant;

/// Clock-derived numbers of the two stores, read ms apart, may differ by this much, plus
/// what load adds (see `Pair::tolerance`).
const TOLERANCE_MS: i64 = 50;

struct Pair {
    real: MultiplexedConnection,
    /// The `memory://` keyspace's name.
    memory: &'static str,
    /// The longest time one command took to run on both, since the last flush (ms).
    longest_ms: i64,
    /// Records planted since the last flush: when, and how long expired then (ms).
    planted: Vec<(Instant, i64)>,
    /// A command ran while a planted record's age crossed one of the scripts' thresholds:
    /// the stores may rightly answer apart, and differ from then on, until the next flush.
    apart: bool,
    /// Sequences cut short so, and the longest time a command took on both (for the report).
    cut: usize,
    worst_ms: i64,
}

/// The ages (ms past its expiry) at which a record changes for the scripts: no longer live
/// (sg_common.lua TOLERANCE_MS), then cleaned up by isLocked (sg_is_locked.lua).
const AGE_THRESHOLDS: [i64; 2] = [1000, 2000];

impl Pair {
    async fn new(server: &RedisServer, name: &'static str) -> Self {
        let client = redis::Client::open(server.url()).expect("client");
        Pair {
            real: client
                .get_multiplexed_async_connection()
                .await
                .expect("connection"),
            memory: name,
            longest_ms: 0,
            planted: Vec::new(),
            apart: false,
            cut: 0,
            worst_ms: 0,
        }
    }

    /// Whether a planted record's age may have crossed a threshold between `before` and
    /// `after` on one store and not yet on the other (each store reads its own clock).
    fn crossing(&self, before: Instant, after: Instant) -> bool {
        let ms = |from: Instant, to: Instant| {
            i64::try_from(to.saturating_duration_since(from).as_millis()).unwrap_or(i64::MAX / 4)
        };
        let margin = self.tolerance();
        self.planted.iter().any(|&(at, ago)| {
            let (young, old) = (ago + ms(at, before) - margin, ago + ms(at, after) + margin);
            AGE_THRESHOLDS.iter().any(|age| (young..=old).contains(age))
        })
    }

    /// How far a clock-derived number of one store may be from the other's. Each store reads
    /// its clock while it runs a command, Redis first: one command's two readings are at most
    /// the time it took on both apart, and a number compared (a PTTL read back) involves two
    /// commands, the write and the read. On a loaded machine those times reach the fixed
    /// tolerance; they are measured, not assumed.
    fn tolerance(&self) -> i64 {
        TOLERANCE_MS + 2 * self.longest_ms
    }

    async fn both(&mut self, cmd: &Cmd) -> (Value, Value) {
        let started = std::time::Instant::now();
        let real = self
            .real
            .req_packed_command(cmd)
            .await
            .expect("redis answers");
        let memory = memory_command(self.memory, &args_of(cmd));
        let took = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX / 4);
        // Rounded up: a reading is cut to whole ms.
        self.longest_ms = self.longest_ms.max(took + 1);
        self.worst_ms = self.worst_ms.max(took + 1);
        (real, memory)
    }

    /// Sends `cmd` to both; their replies must be the same, clock-derived numbers within
    /// the tolerance (see `same`). Answers Redis's.
    async fn same(&mut self, what: &str, cmd: &Cmd) -> Value {
        let before = Instant::now();
        let (real, memory) = self.both(cmd).await;
        // A loaded machine can make a sequence last long enough for a planted record to
        // cross a threshold; within a command, one store may see it crossed and the other
        // not. That is no difference between them: the rest of the sequence goes unchecked.
        self.apart = self.apart || self.crossing(before, Instant::now());
        if self.apart {
            return real;
        }
        let tolerance = self.tolerance();
        assert!(
            same(&real, &memory, tolerance),
            "{what} (clock tolerance {tolerance} ms):\n  redis:  {real:?}\n  memory: {memory:?}"
        );
        real
    }

    /// Every key of `set` read back from both: type, TTL, and contents (a record with its
    /// clock-derived numbers compared within the tolerance).
    async fn compare_keys(&mut self, what: &str, set: &KeySet) {
        let mut keys = vec![set.lock(), set.fence(), queue_key(&set.lock())];
        keys.extend(ID_NAMES.iter().map(|id| set.index(id)));
        keys.push(set.index("old"));
        for key in keys {
            let shown = format!("{what}: {}", String::from_utf8_lossy(&key));
            let kind = self
                .same(&format!("TYPE {shown}"), redis::cmd("TYPE").arg(&key))
                .await;
            self.same(&format!("PTTL {shown}"), redis::cmd("PTTL").arg(&key))
                .await;
            match kind {
                Value::SimpleString(kind) if kind == "string" => {
                    let mut read = redis::cmd("EVAL");
                    read.arg(READ_VALUE).arg(1).arg(&key);
                    self.same(&format!("GET {shown}"), &read).await;
                }
                Value::SimpleString(kind) if kind == "zset" => {
                    let mut range = redis::cmd("ZRANGE");
                    range.arg(&key).arg(0).arg(-1).arg("WITHSCORES");
                    self.same(&format!("ZRANGE {shown}"), &range).await;
                }
                _ => {}
            }
        }
    }

    async fn flush(&mut self) {
        self.longest_ms = 0;
        self.planted.clear();
        self.cut += usize::from(std::mem::take(&mut self.apart));
        let (real, memory) = self.both(&redis::cmd("FLUSHALL")).await;
        assert_eq!(real, memory);
    }

    /// Writes a record by hand on both, its expiry `ago_ms` before each store's own clock
    /// (none: at 1000 ms after the epoch, long gone), with no TTL: a record whose key
    /// outlived its JSON expiry, which only the scripts' own checks catch.
    async fn plant(&mut self, set: &KeySet, id: &str, ago_ms: Option<i64>) {
        let mut plant = redis::cmd("EVAL");
        let ago = ago_ms.map(|ms| ms.to_string()).unwrap_or_default();
        plant
            .arg(PLANT)
            .arg(2)
            .arg(set.lock())
            .arg(set.index(id))
            .arg(id)
            .arg(&ago)
            .arg(&set.stored);
        if let Some(ago) = ago_ms {
            self.planted.push((Instant::now(), ago));
        }
        self.same("plant", &plant).await;
    }
}

/// A value read back: a record's JSON with its two clock-derived numbers cut out (compared
/// apart, as numbers), anything else as it is.
const READ_VALUE: &str = r#"
local raw = redis.call('GET', KEYS[1])
local ok, record = pcall(cjson.decode, raw)
if not ok or type(record) ~= 'table' or not record.expiresAtMs then
  return raw
end
local masked = (string.gsub(raw, '"(%a+At%a*)":[^,}]+', '"%1":#'))
return {masked, record.expiresAtMs, record.acquiredAtMs}
"#;

/// A record syncguard's way, at a fixed fence, by hand (see `Pair::plant`).
const PLANT: &str = r#"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expires = 1000
if ARGV[2] ~= '' then expires = now - tonumber(ARGV[2]) end
local record = {lockId = ARGV[1], expiresAtMs = expires, acquiredAtMs = expires - 10,
                key = 'job', fence = '000000000000009'}
redis.call('SET', KEYS[1], cjson.encode(record))
redis.call('SET', KEYS[2], ARGV[3])
return 1
"#;

/// Within the tolerance, and the rounding of 14 significant digits (cjson's) on top.
fn close(a: i64, b: i64, tolerance: i64) -> bool {
    a.abs_diff(b) <= tolerance.unsigned_abs() + a.unsigned_abs() / 10_000_000_000_000
}

/// Equal replies, errors word for word; the clock's integers (expiries, PTTLs) within
/// `tolerance` ms.
fn same(real: &Value, memory: &Value, tolerance: i64) -> bool {
    let close = |a: &i64, b: &i64| close(*a, *b, tolerance);
    match (real, memory) {
        // Replies' codes are -2 to 1 (and a PTTL of -1 or -2 says no TTL, no key).
        (Value::Int(a), Value::Int(b)) => a == b || (a.abs() > 2 && b.abs() > 2 && close(a, b)),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y, tolerance))
        }
        (Value::BulkString(a), Value::BulkString(b)) => {
            let ((a, x), (b, y)) = (clock_cut(a), clock_cut(b));
            a == b && x.len() == y.len() && x.iter().zip(&y).all(|(x, y)| close(x, y))
        }
        _ => real == memory,
    }
}

/// A record's JSON with its times (`…AtMs`, the clock's) cut out, and those times.
fn clock_cut(json: &[u8]) -> (Vec<u8>, Vec<i64>) {
    const FIELD: &[u8] = b"AtMs\":";
    let (mut out, mut times, mut at) = (Vec::new(), Vec::new(), 0);
    while let Some(found) = json[at..].windows(FIELD.len()).position(|w| w == FIELD) {
        let start = at + found + FIELD.len();
        let length = json[start..]
            .iter()
            .position(|b| matches!(b, b',' | b'}'))
            .unwrap_or(json.len() - start);
        let number = String::from_utf8_lossy(&json[start..start + length]).into_owned();
        times.push(number.parse::<f64>().map_or(i64::MIN, |n| n as i64));
        out.extend_from_slice(&json[at..start]);
        out.push(b'#');
        at = start + length;
    }
    out.extend_from_slice(&json[at..]);
    (out, times)
}

const ID_NAMES: [&str; 3] = [
    "AAAAAAAAAAAAAAAAAAAAAA",
    "BBBBBBBBBBBBBBBBBBBBBB",
    "CCCCCCCCCCCCCCCCCCCCCC",
];

/// One lock's keys as syncguard derives them, under an ioredis `keyPrefix` (`client`) that
/// ours adds to every key and to the lock key stored in the index.
struct KeySet {
    client: &'static str,
    prefix: &'static str,
    /// The lock key after the prefix (a long key's is hashed by JS).
    key: &'static str,
    stored: String,
}

impl KeySet {
    fn new(client: &'static str, prefix: &'static str, key: &'static str) -> Self {
        let stored = format!("{client}{}:{key}", prefix.trim_end_matches(':'));
        KeySet {
            client,
            prefix,
            key,
            stored,
        }
    }

    fn lock(&self) -> Vec<u8> {
        self.stored.clone().into_bytes()
    }

    /// syncguard's prefix as its keys carry it: without trailing colons.
    fn trimmed(&self) -> &str {
        self.prefix.trim_end_matches(':')
    }

    fn index(&self, id: &str) -> Vec<u8> {
        format!("{}{}:id:{id}", self.client, self.trimmed()).into_bytes()
    }

    fn fence(&self) -> Vec<u8> {
        let p = self.trimmed();
        format!("{}{p}:fence:{p}:{}", self.client, self.key).into_bytes()
    }

    /// isLocked's prefix: the index keys it names must be the ones written.
    fn key_prefix(&self) -> String {
        format!("{}{}", self.client, self.prefix)
    }

    fn acquire(&self, id: &str, ttl: &str) -> Cmd {
        evalsha(
            &scripts::SG_ACQUIRE,
            &[self.lock(), self.index(id), self.fence()],
            &[id, ttl, &self.stored, "job"],
        )
    }

    fn release(&self, id: &str, expect: Option<&[u8]>, ours_wait: bool) -> Cmd {
        match expect {
            None => evalsha(&scripts::SG_RELEASE, &[self.index(id)], &[id]),
            Some(lock) => {
                let channel = String::from_utf8_lossy(&released_channel(lock)).into_owned();
                let keys = [self.index(id), lock.to_vec(), queue_key(lock)];
                // The flag goes only when set, as the core sends it.
                if ours_wait {
                    evalsha(&scripts::SG_RELEASE, &keys, &[id, &channel, "1"])
                } else {
                    evalsha(&scripts::SG_RELEASE, &keys, &[id, &channel])
                }
            }
        }
    }

    fn extend(&self, id: &str, ttl: &str) -> Cmd {
        evalsha(&scripts::SG_EXTEND, &[self.index(id)], &[id, ttl])
    }

    fn is_locked(&self, cleanup: bool) -> Cmd {
        let cleanup = if cleanup { "true" } else { "false" };
        evalsha(
            &scripts::SG_IS_LOCKED,
            &[self.lock()],
            &[&self.key_prefix(), cleanup],
        )
    }

    fn lookup_key(&self) -> Cmd {
        evalsha(&scripts::SG_LOOKUP, &[self.lock()], &[])
    }

    fn lookup_id(&self, id: &str) -> Cmd {
        evalsha(&scripts::SG_LOOKUP, &[self.index(id)], &[id])
    }

    fn raise_fence(&self, id: &str, fence: &str) -> Cmd {
        evalsha(
            &scripts::SG_FENCE_RAISE,
            &[self.lock(), self.fence()],
            &[id, fence, "1000"],
        )
    }
}

fn evalsha(script: &Script, keys: &[Vec<u8>], args: &[&str]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len());
    for key in keys {
        cmd.arg(key);
    }
    for arg in args {
        cmd.arg(*arg);
    }
    cmd
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn eval(script: &str) -> Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(0);
    cmd
}

/// Scripts whose reply does not depend on a table's iteration order: the same on both,
/// errors word for word.
#[test]
fn cjson_writes_reads_and_refuses_as_redis_does() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let mut pair = Pair::new(&server, "sg-cjson").await;
        let scripts = [
            "return cjson.encode('a/b\"c\\\\ \\1\\8\\9\\10\\12\\13\\31\\127\\128\\255')",
            "return cjson.encode({1, 'x', true, false, cjson.null})",
            "return cjson.encode({1, nil, 3})",
            "return cjson.encode({[1] = 'a', [3] = 'c'})",
            "return cjson.encode({[1] = 'a', [10] = 'j'})",
            "return cjson.encode({a = {b = {c = {}}}})",
            "return cjson.encode({})",
            concat!(
                "return cjson.encode({lockId = 'id', expiresAtMs = 1717000030123, ",
                "acquiredAtMs = 1717000000123, key = 'k', fence = '000000000000001'})"
            ),
            concat!(
                "return cjson.encode(cjson.decode('{\"lockId\":\"id\",",
                "\"expiresAtMs\":1717000030123,\"acquiredAtMs\":1717000000123,",
                "\"key\":\"k\",\"fence\":\"000000000000001\"}'))"
            ),
            "return cjson.encode({1, 2, x = 1, [4] = 4})",
            "return cjson.encode({[1.5] = 1})",
            "return cjson.encode({n = 1717000000123})",
            "return cjson.encode(101795754377590)",
            "return cjson.encode(1e17)",
            "return cjson.encode(-0.1)",
            "return cjson.encode(1/3)",
            "return cjson.encode(2^53)",
            "return cjson.encode(nil)",
            "return cjson.encode(0/0)",
            "return cjson.encode(-1/0)",
            "return cjson.encode(function() end)",
            "return cjson.encode({[true] = 1})",
            "return cjson.encode({[20] = 1})",
            "local t = {} t[1] = t return cjson.encode(t)",
            "return cjson.encode()",
            "return cjson.decode({})",
            "return cjson.decode('')",
            "return cjson.decode('{')",
            "return cjson.decode('{\"a\" 1}')",
            "return cjson.decode('[1 2]')",
            "return cjson.decode('{\"a\":1 \"b\"}')",
            "return cjson.decode('1 2')",
            "return cjson.decode('x')",
            "return cjson.decode('tru')",
            "return cjson.decode('\"ab')",
            "return cjson.decode('\"a\\\\q\"')",
            "return cjson.decode('\"\\\\ud800\"')",
            "return cjson.decode('\"\\\\udc00\"')",
            "return cjson.decode('\"\\\\u12\"')",
            "return cjson.decode('-x')",
            "return cjson.decode('a\\0')",
            "return cjson.decode(string.rep('[', 1001))",
            "return cjson.decode(string.rep('[', 999) .. string.rep(']', 999))[1] and 'deep'",
            "return cjson.decode('[1,\"x\",null,true,false]')",
            "return cjson.decode('[1,\"x\",null,true]')[3] == cjson.null and 'null'",
            "return cjson.decode('\"a\\\\/b\\\\u00e9\\\\ud83d\\\\ude00\\\\n\"')",
            "return tostring(cjson.decode(' 12.5e1 '))",
            "return tostring(cjson.decode('-0.25'))",
            "return tostring(cjson.decode('1717000000123'))",
            "return tostring(cjson.decode('0x10'))",
            "return tostring(cjson.decode('01'))",
            "return tostring(cjson.decode('+3'))",
            "return tostring(cjson.decode('1.'))",
            "return tostring(cjson.decode('-.5'))",
            "return tostring(cjson.decode('1e400'))",
            "return tostring(cjson.decode('Infinity'))",
            "return tostring(cjson.decode('-inf'))",
            "return tostring(cjson.decode('nan') ~= cjson.decode('nan'))",
            "return tostring(cjson.decode(12))",
            "return cjson.decode('{\"a\":1,\"a\":2}').a",
            "return cjson.decode('\"a\"\\0junk')",
            "return type(cjson.null) .. tostring(cjson.null == cjson.decode('null'))",
            "return cjson.decode(cjson.encode({k = 'a\\0b'})).k",
            // A pcall'd failure is caught alike; its error value is Redis's string but
            // memory's Rust error (cjson.rs `raise`), so only `ok` is compared.
            "local ok = pcall(cjson.decode, '[') return tostring(ok)",
        ];
        let mut differ = Vec::new();
        for script in scripts {
            let (real, memory) = pair.both(&eval(script)).await;
            if real != memory {
                differ.push(format!(
                    "{script}\n  redis:  {real:?}\n  memory: {memory:?}"
                ));
            }
        }
        assert!(differ.is_empty(), "{}", differ.join("\n"));
    });
}

async fn load_scripts(pair: &mut Pair) {
    for source in scripts::ALL_SOURCES {
        let mut load = redis::cmd("SCRIPT");
        load.arg("LOAD").arg(source);
        let (real, memory) = pair.both(&load).await;
        assert_eq!(real, memory, "SCRIPT LOAD answers the same SHA-1");
    }
}

fn key_sets() -> [KeySet; 3] {
    [
        KeySet::new("", "syncguard", "job"),
        // An ioredis keyPrefix, and a prefix that ends in ':' (isLocked's index name).
        KeySet::new("app:", "jobs:", "job"),
        // A long key as JS hashes it, with a hash tag in the prefix.
        KeySet::new("", "{sg}", "ZmFrZS1oYXNoZWQta2V5LTk2"),
    ]
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn bulk(text: &[u8]) -> Value {
    Value::BulkString(text.to_vec())
}

fn items(reply: &Value) -> &[Value] {
    match reply {
        Value::Array(items) => items,
        _ => &[],
    }
}

/// Whether Redis has `key` (memory agrees: see `compare_keys`).
async fn exists(pair: &mut Pair, key: &[u8]) -> bool {
    pair.same("EXISTS", redis::cmd("EXISTS").arg(key)).await == int(1)
}

/// Whether a bulk reply contains `text`.
fn holds(reply: &Value, text: &[u8]) -> bool {
    matches!(reply, Value::BulkString(bytes) if bytes.windows(text.len()).any(|w| w == text))
}

fn error_text(reply: &Value) -> String {
    match reply {
        Value::ServerError(err) => format!("{err:?}"),
        other => panic!("not an error: {other:?}"),
    }
}

/// A lock's life on both stores: acquire, its resend, contention, lookups, isLocked, extend,
/// release (with and without the wake of the expected lock's queue), and the next fence.
#[test]
fn the_scripts_answer_and_leave_the_same_records_as_redis() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let mut pair = Pair::new(&server, "sg-scripts").await;
        load_scripts(&mut pair).await;
        let [a, b, c] = ID_NAMES;
        for set in key_sets() {
            let lock = set.lock();
            let step = |name: &str| format!("{}: {name}", set.stored);
            let won = pair.same(&step("acquire"), &set.acquire(a, "30000")).await;
            assert_eq!(items(&won)[..2], [int(1), bulk(b"000000000000001")]);
            pair.compare_keys(&step("acquired"), &set).await;
            let again = pair.same(&step("resend"), &set.acquire(a, "30000")).await;
            assert_eq!(again, won, "the same attempt again is won again, as it was");
            let held = pair
                .same(&step("contention"), &set.acquire(b, "30000"))
                .await;
            assert!(matches!(items(&held), [Value::Int(0), Value::Int(pttl)] if *pttl > 29_000));
            let record = pair.same(&step("lookup by key"), &set.lookup_key()).await;
            assert!(holds(&record, a.as_bytes()), "{record:?}");
            let by_id = pair.same(&step("lookup by id"), &set.lookup_id(a)).await;
            assert!(matches!(by_id, Value::BulkString(_)));
            let none = pair
                .same(&step("lookup by another id"), &set.lookup_id(b))
                .await;
            assert_eq!(none, Value::Nil);
            assert_eq!(
                pair.same(&step("isLocked"), &set.is_locked(true)).await,
                int(1)
            );
            let refused = pair
                .same(&step("extend another's"), &set.extend(b, "60000"))
                .await;
            assert_eq!(refused, int(0));
            let extended = pair.same(&step("extend"), &set.extend(a, "60000")).await;
            assert!(matches!(
                (items(&extended), items(&won)),
                ([Value::Int(1), Value::Int(to)], [_, _, Value::Int(from)]) if to - from >= 29_000
            ));
            pair.compare_keys(&step("extended"), &set).await;
            // An index key left behind by an earlier holder (see sg_acquire.lua).
            let mut left_behind = redis::cmd("SET");
            left_behind.arg(set.index(b)).arg(&lock);
            pair.same(&step("an old index key"), &left_behind).await;
            let stale = pair
                .same(&step("extend, old id"), &set.extend(b, "60000"))
                .await;
            assert_eq!(stale, int(0));
            let release = set.release(b, None, false);
            let theirs = pair.same(&step("release another's"), &release).await;
            assert_eq!(theirs, Value::Array(vec![int(0)]));
            let queue = queue_key(&lock);
            let mut zadd = redis::cmd("ZADD");
            zadd.arg(&queue).arg(1).arg("conn-1").arg(2).arg("conn-2");
            pair.same(&step("queue"), &zadd).await;
            let released = pair
                .same(&step("release"), &set.release(a, Some(&lock), false))
                .await;
            // The key expected is not named again.
            assert_eq!(released, int(1));
            assert!(!exists(&mut pair, &lock).await && !exists(&mut pair, &set.index(a)).await);
            let woken = redis::cmd("ZRANGE").arg(&queue).arg(0).arg(-1).clone();
            let left = pair.same(&step("queue after"), &woken).await;
            assert_eq!(
                left,
                Value::Array(vec![bulk(b"conn-2")]),
                "the first queued was woken"
            );
            pair.compare_keys(&step("released, one woken"), &set).await;
            let gone = pair
                .same(&step("release again"), &set.release(a, Some(&lock), false))
                .await;
            assert_eq!(gone, Value::Array(vec![int(-1)]));
            let next = pair
                .same(&step("acquire after"), &set.acquire(b, "30000"))
                .await;
            assert_eq!(items(&next)[1], bulk(b"000000000000002"));
            let ours = set.release(b, Some(&lock), true);
            pair.same(&step("release, own waiters"), &ours).await;
            let left = pair.same(&step("queue after"), &woken).await;
            assert_eq!(left, Value::Array(vec![bulk(b"conn-2")]), "nobody woken");
            pair.compare_keys(&step("released, none woken"), &set).await;
            let long = pair
                .same(&step("acquire again"), &set.acquire(c, "2147483648"))
                .await;
            assert_eq!(items(&long)[..2], [int(1), bulk(b"000000000000003")]);
            let other = b"another:lock".to_vec();
            let elsewhere = set.release(c, Some(&other), false);
            let released = pair
                .same(&step("release, other key expected"), &elsewhere)
                .await;
            assert_eq!(released, Value::Array(vec![int(1), bulk(&lock)]));
            let left = pair.same(&step("queue after"), &woken).await;
            assert_eq!(left, Value::Array(vec![bulk(b"conn-2")]), "nobody woken");
            pair.compare_keys(&step("released, wrong key"), &set).await;
            pair.flush().await;
        }
    });
}

/// Records whose key outlived their JSON expiry (written by hand): every script treats them
/// as gone, release and extend delete them, acquire replaces them, isLocked cleans them up
/// only past its 2 s guard and only when asked; and a value that is not JSON.
#[test]
fn expired_and_spoilt_records_go_the_same_way_as_on_redis() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let mut pair = Pair::new(&server, "sg-expired").await;
        load_scripts(&mut pair).await;
        let [a, _, _] = ID_NAMES;
        for set in key_sets() {
            let (lock, old) = (set.lock(), set.index("old"));
            let step = |name: &str| format!("{}: {name}", set.stored);
            pair.plant(&set, "old", None).await;
            assert_eq!(
                pair.same(&step("isLocked"), &set.is_locked(false)).await,
                int(0)
            );
            assert_eq!(
                pair.same(&step("lookup by key"), &set.lookup_key()).await,
                Value::Nil
            );
            let by_id = pair
                .same(&step("lookup by id"), &set.lookup_id("old"))
                .await;
            assert_eq!(by_id, Value::Nil);
            pair.compare_keys(&step("left"), &set).await;
            let released = pair
                .same(&step("release"), &set.release("old", None, false))
                .await;
            assert_eq!(released, Value::Array(vec![int(-2), bulk(&lock)]));
            assert!(!exists(&mut pair, &lock).await && !exists(&mut pair, &old).await);
            pair.plant(&set, "old", None).await;
            assert_eq!(
                pair.same(&step("extend"), &set.extend("old", "1000")).await,
                int(0)
            );
            assert!(!exists(&mut pair, &lock).await && !exists(&mut pair, &old).await);
            pair.plant(&set, "old", None).await;
            let won = pair
                .same(&step("acquire over it"), &set.acquire(a, "30000"))
                .await;
            assert_eq!(items(&won)[..2], [int(1), bulk(b"000000000000001")]);
            assert!(
                exists(&mut pair, &old).await,
                "the old index key is left to its TTL"
            );
            pair.compare_keys(&step("replaced"), &set).await;
            pair.flush().await;
            // Within the tolerance: still live (a record without TTL: PTTL -1).
            pair.plant(&set, "old", Some(500)).await;
            let live = pair
                .same(&step("isLocked, just expired"), &set.is_locked(true))
                .await;
            assert_eq!(live, int(1));
            let held = pair
                .same(&step("contention"), &set.acquire(a, "30000"))
                .await;
            assert_eq!(held, Value::Array(vec![int(0), int(-1)]));
            // Past the tolerance, within the guard: gone, but not cleaned up.
            pair.plant(&set, "old", Some(1500)).await;
            let guarded = pair
                .same(&step("isLocked, within the guard"), &set.is_locked(true))
                .await;
            assert_eq!(guarded, int(0));
            assert!(exists(&mut pair, &lock).await);
            // Past the guard: cleaned up only when asked, the fence counter never.
            pair.plant(&set, "old", Some(2500)).await;
            let kept = pair
                .same(&step("isLocked, no clean-up"), &set.is_locked(false))
                .await;
            assert_eq!(kept, int(0));
            assert!(exists(&mut pair, &lock).await && exists(&mut pair, &old).await);
            let mut count = redis::cmd("INCR");
            count.arg(set.fence());
            pair.same(&step("a fence counter"), &count).await;
            let cleaned = pair
                .same(&step("isLocked, clean-up"), &set.is_locked(true))
                .await;
            assert_eq!(cleaned, int(0));
            assert!(!exists(&mut pair, &lock).await && !exists(&mut pair, &old).await);
            assert!(exists(&mut pair, &set.fence()).await);
            pair.compare_keys(&step("cleaned up"), &set).await;
            // Not JSON: every script that reads it fails as Redis's does.
            let mut spoil = redis::cmd("SET");
            spoil.arg(&lock).arg("not json");
            pair.same(&step("spoil"), &spoil).await;
            let spoilt = pair
                .same(&step("acquire, spoilt"), &set.acquire(a, "30000"))
                .await;
            assert!(error_text(&spoilt).contains("Expected value but found invalid token"));
            pair.same(&step("isLocked, spoilt"), &set.is_locked(true))
                .await;
            pair.same(&step("lookup, spoilt"), &set.lookup_key()).await;
            pair.flush().await;
        }
    });
}

/// TTLs past what cjson writes exactly (an expiry from 1e14 ms on is written in exponent
/// form, rounded) and past what PX takes (the script fails after its INCR, the fence
/// consumed, nothing locked), as syncguard's arithmetic does on Redis.
#[test]
fn huge_ttls_are_rounded_or_refused_as_on_redis() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let mut pair = Pair::new(&server, "sg-huge").await;
        load_scripts(&mut pair).await;
        let set = &key_sets()[0];
        let [a, b, c] = ID_NAMES;
        let lock = set.lock();
        pair.same("1e15", &set.acquire(a, "1000000000000000")).await;
        let raw = pair.same("GET", redis::cmd("GET").arg(&lock)).await;
        assert!(holds(&raw, b"e+15"), "{raw:?}");
        pair.compare_keys("1e15", set).await;
        pair.same("extend 1e14", &set.extend(a, "100000000000000"))
            .await;
        pair.compare_keys("extend 1e14", set).await;
        pair.same("release", &set.release(a, None, false)).await;
        for (id, ttl, fence) in [
            (b, "100000000000000000", 2),
            (c, "1000000000000000000000", 3),
        ] {
            let refused = pair.same(ttl, &set.acquire(id, ttl)).await;
            assert!(error_text(&refused).contains("not an integer or out of range"));
            assert!(!exists(&mut pair, &lock).await, "nothing locked");
            let counter = pair.same("fence", redis::cmd("GET").arg(set.fence())).await;
            assert_eq!(
                counter,
                bulk(fence.to_string().as_bytes()),
                "the fence consumed"
            );
            pair.compare_keys(ttl, set).await;
        }
    });
}

/// One call of a random sequence: `set` and `id` index `key_sets()` and `IDS`.
#[derive(Debug, Clone)]
enum Call {
    Acquire {
        set: usize,
        id: usize,
        ttl: &'static str,
    },
    /// `expect`: none, the right lock key, or another.
    Release {
        set: usize,
        id: usize,
        expect: usize,
        ours: bool,
    },
    Extend {
        set: usize,
        id: usize,
        ttl: &'static str,
    },
    IsLocked {
        set: usize,
        cleanup: bool,
    },
    LookupKey {
        set: usize,
    },
    LookupId {
        set: usize,
        id: usize,
    },
    /// A record by hand, expired this long ago (`None`: long ago).
    Plant {
        set: usize,
        id: usize,
        ago: Option<i64>,
    },
    Queue {
        set: usize,
    },
    /// A Redlock's fence write-back (sg_fence_raise.lua).
    RaiseFence {
        set: usize,
        id: usize,
        fence: &'static str,
    },
}

/// The lockIds of the random sequences; "old" is planted by hand too.
const IDS: [&str; 4] = [ID_NAMES[0], ID_NAMES[1], ID_NAMES[2], "old"];

fn call() -> impl Strategy<Value = Call> {
    let (set, id) = (0..2usize, 0..IDS.len());
    // Long enough that no key expires between the two stores' reads, whatever the load.
    let ttl = prop_oneof![Just("30000"), Just("2147483648"), Just("1000000000000000")];
    let fence = prop_oneof![
        Just("1"),
        Just("7"),
        Just("40"),
        Just("999999999999999"),
        Just("1000000000000000")
    ];
    let ago = prop_oneof![
        Just(None),
        Just(Some(500)),
        Just(Some(1500)),
        Just(Some(2500))
    ];
    prop_oneof![
        3 => (set.clone(), id.clone(), ttl.clone()).prop_map(|(set, id, ttl)| Call::Acquire { set, id, ttl }),
        3 => (set.clone(), id.clone(), 0..3usize, any::<bool>())
            .prop_map(|(set, id, expect, ours)| Call::Release { set, id, expect, ours }),
        2 => (set.clone(), id.clone(), ttl).prop_map(|(set, id, ttl)| Call::Extend { set, id, ttl }),
        1 => (set.clone(), any::<bool>()).prop_map(|(set, cleanup)| Call::IsLocked { set, cleanup }),
        1 => set.clone().prop_map(|set| Call::LookupKey { set }),
        1 => (set.clone(), id.clone()).prop_map(|(set, id)| Call::LookupId { set, id }),
        1 => (set.clone(), id.clone(), ago).prop_map(|(set, id, ago)| Call::Plant { set, id, ago }),
        1 => set.clone().prop_map(|set| Call::Queue { set }),
        1 => (set, id, fence).prop_map(|(set, id, fence)| Call::RaiseFence { set, id, fence }),
    ]
}

impl Pair {
    async fn call(&mut self, sets: &[KeySet], call: &Call) {
        let shown = format!("{call:?}");
        let cmd = match *call {
            Call::Acquire { set, id, ttl } => sets[set].acquire(IDS[id], ttl),
            Call::Release {
                set,
                id,
                expect,
                ours,
            } => {
                let lock = sets[set].lock();
                let other = sets[1 - set].lock();
                let expected = [None, Some(&lock[..]), Some(&other[..])][expect];
                sets[set].release(IDS[id], expected, ours)
            }
            Call::Extend { set, id, ttl } => sets[set].extend(IDS[id], ttl),
            Call::IsLocked { set, cleanup } => sets[set].is_locked(cleanup),
            Call::LookupKey { set } => sets[set].lookup_key(),
            Call::LookupId { set, id } => sets[set].lookup_id(IDS[id]),
            Call::Plant { set, id, ago } => return self.plant(&sets[set], IDS[id], ago).await,
            Call::RaiseFence { set, id, fence } => sets[set].raise_fence(IDS[id], fence),
            Call::Queue { set } => {
                let mut zadd = redis::cmd("ZADD");
                zadd.arg(queue_key(&sets[set].lock())).arg(1).arg("conn");
                zadd
            }
        };
        self.same(&shown, &cmd).await;
    }
}

#[test]
fn random_sequences_of_syncguard_calls_get_the_same_replies_and_keys() {
    let server = RedisServer::start();
    let runtime = runtime();
    let pair = std::cell::RefCell::new(runtime.block_on(async {
        let mut pair = Pair::new(&server, "sg-random").await;
        load_scripts(&mut pair).await;
        pair
    }));
    let sets = key_sets();
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&proptest::collection::vec(call(), 1..25), |calls| {
        let mut pair = pair.borrow_mut();
        runtime.block_on(async {
            pair.flush().await;
            for call in &calls {
                pair.call(&sets, call).await;
            }
            for set in &sets[..2] {
                pair.compare_keys("after the sequence", set).await;
            }
        });
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    // Never a failure: a measure of how much load took from the test.
    let pair = pair.borrow();
    let cut = pair.cut + usize::from(pair.apart);
    eprintln!(
        "sequences cut short by a planted record's age crossing a threshold: {cut}; \
         the longest command on both took {} ms",
        pair.worst_ms
    );
}
