//! The `memory://` keyspace on its own: expiry on its clock, scripts by SHA, pub/sub, error
//! replies, and atomicity under threads. (tests/memory_equivalence.rs holds it against a
//! real redis-server.)

use super::instance::{instance, Instance};
use super::pubsub::{ChannelKind, Pushes};
use super::reply::MemoryReply;
use crate::core::proto::scripts;
use redis::{PushInfo, PushKind, Script, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fresh keyspace per test: keyspaces live for the process, tests run in parallel.
fn open(test: &str) -> Arc<Instance> {
    instance(&format!("unit-{test}"))
}

fn send(keyspace: &Instance, args: &[&[u8]]) -> Value {
    keyspace
        .run(&[args.to_vec()])
        .pop()
        .map(MemoryReply::into_value)
        .expect("one reply")
}

/// Calls `script` by its SHA, as the store does (`load` first).
fn call(keyspace: &Instance, script: &Script, keys: &[&[u8]], args: &[&[u8]]) -> Value {
    let hash = script.get_hash().as_bytes().to_vec();
    let count = keys.len().to_string().into_bytes();
    let mut command: Vec<&[u8]> = vec![b"EVALSHA", &hash, &count];
    command.extend(keys.iter().chain(args));
    send(keyspace, &command)
}

fn load(keyspace: &Instance) {
    for source in scripts::ALL_SOURCES {
        send(keyspace, &[b"SCRIPT", b"LOAD", source.as_bytes()]);
    }
}

fn code(value: &Value) -> Option<String> {
    match value {
        Value::ServerError(err) => Some(err.code().to_owned()),
        _ => None,
    }
}

#[test]
fn a_key_set_with_px_is_gone_once_its_ttl_ran_out() {
    let con = open("expiry");
    let set = send(&con, &[b"SET", b"k", b"v", b"PX", b"50"]);
    assert_eq!(set, Value::Okay);
    let Value::Int(ttl) = send(&con, &[b"PTTL", b"k"]) else {
        panic!("PTTL is an integer");
    };
    assert!((40..=50).contains(&ttl), "{ttl}");
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(send(&con, &[b"GET", b"k"]), Value::Nil);
    assert_eq!(send(&con, &[b"PTTL", b"k"]), Value::Int(-2));
    assert_eq!(send(&con, &[b"EXISTS", b"k"]), Value::Int(0));
}

#[test]
fn pttl_is_minus_one_without_expiry_and_pexpiretime_is_absolute() {
    let con = open("pttl");
    send(&con, &[b"SET", b"k", b"v"]);
    assert_eq!(send(&con, &[b"PTTL", b"k"]), Value::Int(-1));
    assert_eq!(send(&con, &[b"PEXPIRETIME", b"k"]), Value::Int(-1));
    assert_eq!(send(&con, &[b"PEXPIRE", b"k", b"10000"]), Value::Int(1));
    let Value::Array(time) = send(&con, &[b"TIME"]) else {
        panic!("TIME is an array");
    };
    let parts: Vec<i64> = time
        .iter()
        .map(|part| redis::from_redis_value_ref(part).expect("a number"))
        .collect();
    let now_ms = parts[0] * 1000 + parts[1] / 1000;
    let Value::Int(at) = send(&con, &[b"PEXPIRETIME", b"k"]) else {
        panic!("PEXPIRETIME is an integer");
    };
    assert!((at - now_ms - 10_000).abs() <= 5, "{at} vs {now_ms}");
    assert_eq!(send(&con, &[b"PTTL", b"nothing"]), Value::Int(-2));
}

#[test]
fn an_unknown_sha_is_noscript_and_a_loaded_one_runs() {
    let con = open("noscript");
    let reply = send(&con, &[b"EVALSHA", &[b'0'; 40], b"0"]);
    let Value::ServerError(err) = &reply else {
        panic!("{reply:?}");
    };
    assert_eq!(err.kind(), Some(redis::ServerErrorKind::NoScript));
    assert_eq!(err.details(), Some("No matching script. Please use EVAL."));

    // The store's path: EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA again.
    let inspect: &Script = &scripts::INSPECT;
    let hash = inspect.get_hash().as_bytes().to_vec();
    let reply = send(&con, &[b"EVALSHA", &hash, b"1", b"lock"]);
    assert_eq!(code(&reply).as_deref(), Some("NOSCRIPT"));
    load(&con);
    assert_eq!(
        call(&con, inspect, &[b"lock"], &[]),
        Value::Array(vec![Value::Nil, Value::Int(-2)])
    );

    let hash = send(&con, &[b"SCRIPT", b"LOAD", b"return 1"]);
    assert_eq!(
        hash,
        Value::BulkString(Script::new("return 1").get_hash().as_bytes().to_vec())
    );
}

#[test]
fn a_wrong_type_is_wrongtype_and_incrby_errors_as_redis() {
    let con = open("wrongtype");
    send(&con, &[b"HSET", b"h", b"f", b"v"]);
    assert_eq!(
        code(&send(&con, &[b"GET", b"h"])).as_deref(),
        Some("WRONGTYPE")
    );
    assert_eq!(
        code(&send(&con, &[b"ZADD", b"h", b"1", b"m"])).as_deref(),
        Some("WRONGTYPE")
    );
    send(&con, &[b"SET", b"n", b"9223372036854775806"]);
    assert_eq!(send(&con, &[b"INCRBY", b"n", b"1"]), Value::Int(i64::MAX));
    let overflow = send(&con, &[b"INCRBY", b"n", b"1"]);
    let Value::ServerError(err) = &overflow else {
        panic!("{overflow:?}");
    };
    assert_eq!(err.details(), Some("increment or decrement would overflow"));
    send(&con, &[b"SET", b"s", b"abc"]);
    let not_integer = send(&con, &[b"INCRBY", b"s", b"1"]);
    let Value::ServerError(err) = &not_integer else {
        panic!("{not_integer:?}");
    };
    assert_eq!(err.code(), "ERR");
    assert_eq!(
        err.details(),
        Some("value is not an integer or out of range")
    );

    // Inside a script: pcall hands the error back as a table, call fails the script.
    let pcall = send(
        &con,
        &[
            b"EVAL",
            b"return redis.pcall('GET', KEYS[1]).err",
            b"1",
            b"h",
        ],
    );
    assert_eq!(
        pcall,
        Value::BulkString(
            b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec()
        )
    );
    let call = send(
        &con,
        &[b"EVAL", b"return redis.call('GET', KEYS[1])", b"1", b"h"],
    );
    assert_eq!(code(&call).as_deref(), Some("WRONGTYPE"));
    let runtime = send(&con, &[b"EVAL", b"return nil + 1", b"0"]);
    assert_eq!(code(&runtime).as_deref(), Some("ERR"));
}

/// Keys and arguments reach a script, and its commands, byte for byte: text and any other
/// bytes alike (the two are handed to Lua by different ways), numbers printed as Redis does.
#[test]
fn scripts_pass_keys_and_arguments_on_byte_for_byte() {
    let keyspace = open("script-bytes");
    let script: &[u8] = b"redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], 7 * 6); \
        return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]), #ARGV[1]}";
    for (key, value) in [
        (&b"text"[..], &b"v\xc3\xa9"[..]),
        (b"\xff\x00k", b"\x80\x00\xfe"),
    ] {
        let reply = send(&keyspace, &[b"EVAL", script, b"2", key, b"n", value]);
        assert_eq!(
            reply,
            Value::Array(vec![
                Value::BulkString(value.to_vec()),
                Value::BulkString(b"42".to_vec()),
                Value::Int(value.len() as i64),
            ])
        );
        assert_eq!(
            send(&keyspace, &[b"GET", key]),
            Value::BulkString(value.to_vec())
        );
    }
}

/// What crosses between a script and its commands on Lua's stack (script_stack.rs): numbers
/// printed `%.17g`, nested replies, statuses and errors as tables, a failed `redis.call`
/// named by its line, and a reply cut at the first nil.
#[test]
fn replies_and_arguments_cross_lua_as_redis_converts_them() {
    let keyspace = open("script-stack");
    let reply = send(
        &keyspace,
        &[
            b"EVAL",
            b"redis.call('SET', KEYS[1], 0.1)\n\
              redis.call('ZADD', KEYS[2], 1.5, 'a', 2, 'b')\n\
              local set = redis.call('SET', KEYS[3], 'x')\n\
              local wrong = redis.pcall('INCR', KEYS[2])\n\
              return {redis.call('GET', KEYS[1]), redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES'),\n\
                      set.ok, wrong.err, redis.call('GET', 'none') == false, 3.9, nil, 'after'}",
            b"3",
            b"f",
            b"z",
            b"s",
        ],
    );
    assert_eq!(
        reply,
        Value::Array(vec![
            Value::BulkString(b"0.10000000000000001".to_vec()),
            Value::Array(vec![
                Value::BulkString(b"a".to_vec()),
                Value::BulkString(b"1.5".to_vec()),
                Value::BulkString(b"b".to_vec()),
                Value::BulkString(b"2".to_vec()),
            ]),
            Value::BulkString(b"OK".to_vec()),
            Value::BulkString(
                b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec()
            ),
            Value::Int(1),
            Value::Int(3),
        ])
    );
    let failed = send(
        &keyspace,
        &[
            b"EVAL",
            b"local a = 1\nredis.call('INCR', KEYS[1])\nreturn a",
            b"1",
            b"z",
        ],
    );
    let Value::ServerError(err) = &failed else {
        panic!("{failed:?}");
    };
    assert_eq!(err.code(), "WRONGTYPE");
    let detail = err.details().unwrap_or_default();
    assert!(detail.ends_with("on @user_script:2."), "{detail}");
    assert_eq!(
        send(&keyspace, &[b"EVAL", b"return {ok = 'DONE'}", b"0"]),
        Value::SimpleString("DONE".into())
    );
    assert_eq!(
        code(&send(&keyspace, &[b"EVAL", b"return redis.call()", b"0"])).as_deref(),
        Some("ERR")
    );
}

fn collector() -> (Arc<Mutex<Vec<PushInfo>>>, Pushes) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let pushes = Arc::new(move |push: PushInfo| {
        sink.lock().unwrap_or_else(|p| p.into_inner()).push(push);
    });
    (seen, pushes)
}

#[test]
fn a_publication_reaches_subscribed_connections_only() {
    let (heard, pushes) = collector();
    let (unheard, others) = collector();
    let keyspace = instance("unit-pubsub");
    let listener = keyspace.new_connection_id();
    let plain = keyspace.new_connection_id();

    assert_eq!(
        keyspace.subscribe(listener, ChannelKind::Sharded, b"chan", Some(pushes)),
        1
    );
    // A plain subscriber does not hear SPUBLISH.
    keyspace.subscribe(plain, ChannelKind::Plain, b"chan", Some(others));

    // As announce.lua sends it, from a script.
    load(&keyspace);
    send(&keyspace, &[b"ZADD", b"queue", b"1", b"conn-a"]);
    let woke = call(&keyspace, &scripts::WAKE_NEXT, &[b"queue"], &[b"chan"]);
    assert_eq!(woke, Value::Int(1));
    let heard = heard.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(heard.len(), 1);
    assert_eq!(heard[0].kind, PushKind::SMessage);
    assert_eq!(
        heard[0].data,
        vec![
            Value::BulkString(b"chan".to_vec()),
            Value::BulkString(b"conn-a".to_vec())
        ]
    );
    assert!(unheard.lock().unwrap_or_else(|p| p.into_inner()).is_empty());

    assert_eq!(send(&keyspace, &[b"PUBLISH", b"chan", b"x"]), Value::Int(1));
    assert_eq!(unheard.lock().unwrap_or_else(|p| p.into_inner()).len(), 1);

    // Unsubscribed, as the store leaves an idle channel: nothing more arrives.
    assert_eq!(
        keyspace.unsubscribe(listener, ChannelKind::Sharded, b"chan"),
        0
    );
    assert_eq!(
        send(&keyspace, &[b"SPUBLISH", b"chan", b"y"]),
        Value::Int(0)
    );
}

#[test]
fn a_dropped_connection_stops_counting_as_a_subscriber() {
    let (_, pushes) = collector();
    let keyspace = instance("unit-dropped");
    let listener = keyspace.new_connection_id();
    keyspace.subscribe(listener, ChannelKind::Plain, b"c", Some(pushes));
    assert_eq!(send(&keyspace, &[b"PUBLISH", b"c", b"m"]), Value::Int(1));
    keyspace.drop_connection(listener);
    assert_eq!(send(&keyspace, &[b"PUBLISH", b"c", b"m"]), Value::Int(0));
}

#[test]
fn multi_exec_runs_queued_commands_as_one_step() {
    let con = open("multi");
    let replies: Vec<Value> = con
        .run(&[
            vec![&b"SET"[..], b"lock", b"t", b"NX", b"PX", b"1000"],
            vec![b"INCRBY", b"fence", b"2"],
            vec![b"PTTL", b"lock"],
        ])
        .into_iter()
        .map(MemoryReply::into_value)
        .collect();
    let [set, fence, Value::Int(ttl)] = replies.as_slice() else {
        panic!("{replies:?}");
    };
    assert_eq!(set, &Value::Okay);
    assert_eq!(fence, &Value::Int(2));
    assert!((990..=1000).contains(ttl));
}

/// Two threads acquiring and releasing one lock through the scripts, each counting how
/// many hold it at once: never more than one.
#[test]
fn threads_hammering_one_keyspace_keep_mutual_exclusion() {
    let inside = Arc::new(AtomicUsize::new(0));
    let wins = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let (inside, wins) = (inside.clone(), wins.clone());
            std::thread::spawn(move || {
                let con = instance("unit-hammer");
                load(&con);
                for i in 0..2_000 {
                    let token = format!("t{n}-{i}");
                    let acquire = call(
                        &con,
                        &scripts::ACQUIRE,
                        &[b"lock", b"lock:fence"],
                        &[token.as_bytes(), b"10000", b"604800000"],
                    );
                    let Value::Array(acquired) = acquire else {
                        panic!("{acquire:?}");
                    };
                    if acquired.first() != Some(&Value::Int(1)) {
                        continue;
                    }
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    wins.fetch_add(1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    let released = call(&con, &scripts::RELEASE, &[b"lock"], &[token.as_bytes()]);
                    assert_eq!(released, Value::Int(1));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no thread failed");
    }
    let wins = wins.load(Ordering::SeqCst) as i64;
    assert!(wins > 0);
    // Every win drew two fences.
    let fence = send(&instance("unit-hammer"), &[b"GET", b"lock:fence"]);
    assert_eq!(
        fence,
        Value::BulkString((2 * wins).to_string().into_bytes())
    );
}

/// What one acquire costs here: a script call is microseconds.
#[test]
fn an_acquire_script_costs_microseconds() {
    let con = open("cost");
    let acquire: &Script = &scripts::ACQUIRE;
    load(&con);
    let hash = acquire.get_hash().as_bytes().to_vec();
    let n = 20_000;
    let started = Instant::now();
    for i in 0..n {
        let token = format!("t{i}");
        let lock = format!("lock{}", i % 100);
        let reply = send(
            &con,
            &[
                b"EVALSHA",
                &hash,
                b"2",
                lock.as_bytes(),
                b"fence",
                token.as_bytes(),
                b"10",
                b"604800000",
            ],
        );
        assert!(matches!(reply, Value::Array(_)), "{reply:?}");
    }
    let each = started.elapsed() / n;
    eprintln!("one acquire script call on memory://: {each:?}");
    assert!(each < Duration::from_millis(1), "{each:?}");
}

/// A script with a native form (native.rs) is refused while not loaded, as Redis refuses it.
#[test]
fn a_script_not_loaded_is_refused_rather_than_run_natively() {
    let memory = open("native-unloaded");
    let hash = scripts::RELEASE_WAKE.get_hash().as_bytes().to_vec();
    let evalsha: Vec<&[u8]> = vec![
        b"EVALSHA",
        &hash,
        b"2",
        b"lock:k",
        b"{lock:k}\xffwaiting",
        b"t0",
        b"{lock:k}:released",
        b"0",
    ];
    let reply = memory.run(std::slice::from_ref(&evalsha)).pop();
    assert!(matches!(reply, Some(MemoryReply::Error(e)) if e.starts_with("NOSCRIPT")));
    let source: Vec<&[u8]> = vec![b"SCRIPT", b"LOAD", scripts::RELEASE_WAKE_SOURCE.as_bytes()];
    memory.run(&[source]);
    assert_eq!(memory.run(&[evalsha]).pop(), Some(MemoryReply::Int(0)));
}

#[test]
fn fences_drawn_in_vain_are_counted_as_sent_with_no_script_loaded() {
    use crate::core::proto::missed::{CountMissed, MISSED_LIFE};
    let con = open("count-missed");
    let count = CountMissed {
        missed_key: b"{lock:k}\xffmissed",
        fences: 2,
    };
    let mut wire = Vec::new();
    crate::core::proto::wire::write_whole(&count, &mut wire);
    let Ok(Some((Value::Array(parts), _))) = crate::core::basics::resp::parse(&wire) else {
        panic!("one command");
    };
    let parts: Vec<Vec<u8>> = (parts.into_iter())
        .map(|part| redis::from_redis_value(part).expect("bytes"))
        .collect();
    let command: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    assert_eq!(send(&con, &command), Value::Int(2));
    assert_eq!(send(&con, &command), Value::Int(4));
    let Value::Int(ttl) = send(&con, &[b"PTTL", b"{lock:k}\xffmissed"]) else {
        panic!("PTTL is an integer");
    };
    let life = MISSED_LIFE.as_millis() as i64;
    assert!((life - 100..=life).contains(&ttl), "{ttl}");
}
