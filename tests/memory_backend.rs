//! The `memory://` backend on its own: expiry on its clock, scripts by SHA, pub/sub, error
//! replies, and atomicity under threads. (tests/memory_equivalence.rs holds it against a
//! real redis-server.)

use native_redis_lock::core::api::scripts;
use native_redis_lock::core::api::{MemoryConnection, Pushes};
use redis::aio::ConnectionLike;
use redis::{PushInfo, PushKind, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fresh keyspace per test: keyspaces live for the process, tests run in parallel.
fn open(test: &str) -> MemoryConnection {
    MemoryConnection::open(&format!("unit-{test}"), None)
}

async fn send(con: &mut MemoryConnection, args: &[&[u8]]) -> Value {
    let mut cmd = redis::Cmd::new();
    for arg in args {
        cmd.arg(*arg);
    }
    con.req_packed_command(&cmd)
        .await
        .expect("memory never fails to answer")
}

fn code(value: &Value) -> Option<String> {
    match value {
        Value::ServerError(err) => Some(err.code().to_owned()),
        _ => None,
    }
}

#[tokio::test]
async fn a_key_set_with_px_is_gone_once_its_ttl_ran_out() {
    let mut con = open("expiry");
    let set = send(&mut con, &[b"SET", b"k", b"v", b"PX", b"50"]).await;
    assert_eq!(set, Value::Okay);
    let Value::Int(ttl) = send(&mut con, &[b"PTTL", b"k"]).await else {
        panic!("PTTL is an integer");
    };
    assert!((40..=50).contains(&ttl), "{ttl}");
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(send(&mut con, &[b"GET", b"k"]).await, Value::Nil);
    assert_eq!(send(&mut con, &[b"PTTL", b"k"]).await, Value::Int(-2));
    assert_eq!(send(&mut con, &[b"EXISTS", b"k"]).await, Value::Int(0));
}

#[tokio::test]
async fn pttl_is_minus_one_without_expiry_and_pexpiretime_is_absolute() {
    let mut con = open("pttl");
    send(&mut con, &[b"SET", b"k", b"v"]).await;
    assert_eq!(send(&mut con, &[b"PTTL", b"k"]).await, Value::Int(-1));
    assert_eq!(
        send(&mut con, &[b"PEXPIRETIME", b"k"]).await,
        Value::Int(-1)
    );
    assert_eq!(
        send(&mut con, &[b"PEXPIRE", b"k", b"10000"]).await,
        Value::Int(1)
    );
    let Value::Array(time) = send(&mut con, &[b"TIME"]).await else {
        panic!("TIME is an array");
    };
    let parts: Vec<i64> = time
        .iter()
        .map(|part| redis::from_redis_value_ref(part).expect("a number"))
        .collect();
    let now_ms = parts[0] * 1000 + parts[1] / 1000;
    let Value::Int(at) = send(&mut con, &[b"PEXPIRETIME", b"k"]).await else {
        panic!("PEXPIRETIME is an integer");
    };
    assert!((at - now_ms - 10_000).abs() <= 5, "{at} vs {now_ms}");
    assert_eq!(send(&mut con, &[b"PTTL", b"nothing"]).await, Value::Int(-2));
}

#[tokio::test]
async fn an_unknown_sha_is_noscript_and_a_loaded_one_runs() {
    let mut con = open("noscript");
    let reply = send(&mut con, &[b"EVALSHA", &[b'0'; 40], b"0"]).await;
    let Value::ServerError(err) = &reply else {
        panic!("{reply:?}");
    };
    assert_eq!(err.kind(), Some(redis::ServerErrorKind::NoScript));
    assert_eq!(err.details(), Some("No matching script. Please use EVAL."));

    // The redis crate's own path: EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA again.
    let invocation = scripts::INSPECT.key("lock");
    let (value, ttl): (Option<String>, i64) = invocation
        .invoke_async(&mut con)
        .await
        .expect("loaded on NOSCRIPT");
    assert_eq!((value, ttl), (None, -2));

    let hash = send(&mut con, &[b"SCRIPT", b"LOAD", b"return 1"]).await;
    assert_eq!(
        hash,
        Value::BulkString(
            redis::Script::new("return 1")
                .get_hash()
                .as_bytes()
                .to_vec()
        )
    );
}

#[tokio::test]
async fn a_wrong_type_is_wrongtype_and_incrby_errors_as_redis() {
    let mut con = open("wrongtype");
    send(&mut con, &[b"HSET", b"h", b"f", b"v"]).await;
    assert_eq!(
        code(&send(&mut con, &[b"GET", b"h"]).await).as_deref(),
        Some("WRONGTYPE")
    );
    assert_eq!(
        code(&send(&mut con, &[b"ZADD", b"h", b"1", b"m"]).await).as_deref(),
        Some("WRONGTYPE")
    );
    send(&mut con, &[b"SET", b"n", b"9223372036854775806"]).await;
    assert_eq!(
        send(&mut con, &[b"INCRBY", b"n", b"1"]).await,
        Value::Int(i64::MAX)
    );
    let overflow = send(&mut con, &[b"INCRBY", b"n", b"1"]).await;
    let Value::ServerError(err) = &overflow else {
        panic!("{overflow:?}");
    };
    assert_eq!(err.details(), Some("increment or decrement would overflow"));
    send(&mut con, &[b"SET", b"s", b"abc"]).await;
    let not_integer = send(&mut con, &[b"INCRBY", b"s", b"1"]).await;
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
        &mut con,
        &[
            b"EVAL",
            b"return redis.pcall('GET', KEYS[1]).err",
            b"1",
            b"h",
        ],
    )
    .await;
    assert_eq!(
        pcall,
        Value::BulkString(
            b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec()
        )
    );
    let call = send(
        &mut con,
        &[b"EVAL", b"return redis.call('GET', KEYS[1])", b"1", b"h"],
    )
    .await;
    assert_eq!(code(&call).as_deref(), Some("WRONGTYPE"));
    let runtime = send(&mut con, &[b"EVAL", b"return nil + 1", b"0"]).await;
    assert_eq!(code(&runtime).as_deref(), Some("ERR"));
}

/// Keys and arguments reach a script, and its commands, byte for byte: text and any other
/// bytes alike (the two are handed to Lua by different ways), numbers printed as Redis does.
#[tokio::test]
async fn scripts_pass_keys_and_arguments_on_byte_for_byte() {
    let mut con = open("script-bytes");
    let script: &[u8] = b"redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], 7 * 6); \
        return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]), #ARGV[1]}";
    for (key, value) in [
        (&b"text"[..], &b"v\xc3\xa9"[..]),
        (b"\xff\x00k", b"\x80\x00\xfe"),
    ] {
        let reply = send(&mut con, &[b"EVAL", script, b"2", key, b"n", value]).await;
        assert_eq!(
            reply,
            Value::Array(vec![
                Value::BulkString(value.to_vec()),
                Value::BulkString(b"42".to_vec()),
                Value::Int(value.len() as i64),
            ])
        );
        assert_eq!(
            send(&mut con, &[b"GET", key]).await,
            Value::BulkString(value.to_vec())
        );
    }
}

fn collector() -> (Arc<Mutex<Vec<PushInfo>>>, Pushes) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let pushes = Arc::new(move |push: PushInfo| {
        sink.lock().unwrap_or_else(|p| p.into_inner()).push(push);
    });
    (seen, pushes)
}

#[tokio::test]
async fn a_publication_reaches_subscribed_connections_only() {
    let (heard, pushes) = collector();
    let (unheard, others) = collector();
    let mut listener = MemoryConnection::open("unit-pubsub", Some(pushes));
    let _bystander = MemoryConnection::open("unit-pubsub", Some(others.clone()));
    let mut plain = MemoryConnection::open("unit-pubsub", Some(others));
    let mut publisher = MemoryConnection::open("unit-pubsub", None);

    let reply: Value = redis::cmd("SSUBSCRIBE")
        .arg("chan")
        .query_async(&mut listener)
        .await
        .expect("subscribed");
    assert_eq!(
        reply,
        Value::Push {
            kind: PushKind::SSubscribe,
            data: vec![Value::BulkString(b"chan".to_vec()), Value::Int(1)]
        }
    );
    // A plain subscriber does not hear SPUBLISH.
    send(&mut plain, &[b"SUBSCRIBE", b"chan"]).await;

    // As announce.lua sends it, from a script.
    let mut invocation = scripts::WAKE_NEXT.key("queue");
    invocation.arg("chan");
    send(&mut publisher, &[b"ZADD", b"queue", b"1", b"conn-a"]).await;
    let woke: i64 = invocation.invoke_async(&mut publisher).await.expect("ran");
    assert_eq!(woke, 1);
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

    assert_eq!(
        send(&mut publisher, &[b"PUBLISH", b"chan", b"x"]).await,
        Value::Int(1)
    );
    assert_eq!(unheard.lock().unwrap_or_else(|p| p.into_inner()).len(), 1);

    // Unsubscribed (the store's pipeline of SUNSUBSCRIBE), nothing more arrives.
    let mut pipe = redis::pipe();
    pipe.cmd("SUNSUBSCRIBE").arg("chan").ignore();
    let () = pipe.query_async(&mut listener).await.expect("unsubscribed");
    assert_eq!(
        send(&mut publisher, &[b"SPUBLISH", b"chan", b"y"]).await,
        Value::Int(0)
    );
    // The connection manager's own subscribe: one pipeline, every confirmation.
    let confirmations = listener
        .req_packed_commands(redis::pipe().cmd("SUBSCRIBE").arg("a").arg("b"), 0, 1)
        .await
        .expect("confirmed");
    assert_eq!(confirmations.len(), 2);
}

#[tokio::test]
async fn a_dropped_connection_stops_counting_as_a_subscriber() {
    let (_, pushes) = collector();
    let mut publisher = MemoryConnection::open("unit-dropped", None);
    {
        let mut listener = MemoryConnection::open("unit-dropped", Some(pushes));
        send(&mut listener, &[b"SUBSCRIBE", b"c"]).await;
        assert_eq!(
            send(&mut publisher, &[b"PUBLISH", b"c", b"m"]).await,
            Value::Int(1)
        );
    }
    assert_eq!(
        send(&mut publisher, &[b"PUBLISH", b"c", b"m"]).await,
        Value::Int(0)
    );
}

#[tokio::test]
async fn multi_exec_runs_queued_commands_as_one_step() {
    let mut con = open("multi");
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("SET")
        .arg("lock")
        .arg("t")
        .arg("NX")
        .arg("PX")
        .arg(1000)
        .cmd("INCRBY")
        .arg("fence")
        .arg(2)
        .cmd("PTTL")
        .arg("lock");
    let (set, fence, ttl): (Option<String>, i64, i64) =
        pipe.query_async(&mut con).await.expect("exec");
    assert_eq!(set.as_deref(), Some("OK"));
    assert_eq!(fence, 2);
    assert!((990..=1000).contains(&ttl));
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
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    let mut con = MemoryConnection::open("unit-hammer", None);
                    for i in 0..2_000 {
                        let token = format!("t{n}-{i}");
                        let mut acquire = scripts::ACQUIRE.key("lock");
                        acquire
                            .key("lock:fence")
                            .arg(&token)
                            .arg(10_000)
                            .arg(604_800_000);
                        let (won, _): (i64, i64) =
                            acquire.invoke_async(&mut con).await.expect("acquire");
                        if won != 1 {
                            continue;
                        }
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        wins.fetch_add(1, Ordering::SeqCst);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        let mut release = scripts::RELEASE.key("lock");
                        release.arg(&token);
                        let released: i64 = release.invoke_async(&mut con).await.expect("release");
                        assert_eq!(released, 1);
                    }
                })
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no thread failed");
    }
    let wins = wins.load(Ordering::SeqCst) as i64;
    assert!(wins > 0);
    // Every win drew two fences.
    let mut con = MemoryConnection::open("unit-hammer", None);
    let fence = futures_util::FutureExt::now_or_never(send(&mut con, &[b"GET", b"lock:fence"]));
    assert_eq!(
        fence,
        Some(Value::BulkString((2 * wins).to_string().into_bytes()))
    );
}

/// What one acquire costs here: a script call is microseconds.
#[test]
fn an_acquire_script_costs_microseconds() {
    let mut con = MemoryConnection::open("unit-cost", None);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let n = 20_000;
        let started = Instant::now();
        for i in 0..n {
            let token = format!("t{i}");
            let mut acquire = scripts::ACQUIRE.key(format!("lock{}", i % 100));
            acquire.key("fence").arg(&token).arg(10).arg(604_800_000);
            let _: (i64, i64) = acquire.invoke_async(&mut con).await.expect("acquire");
        }
        let each = started.elapsed() / n;
        eprintln!("one acquire script call on memory://: {each:?}");
        assert!(each < Duration::from_millis(1), "{each:?}");
    });
}
