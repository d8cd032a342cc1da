//! The exact bytes each operation sends, on both transports: the JS-thread socket's RESP and
//! the runtime's command (recorded from what the redis crate would write). A change here is a
//! change of what Redis is sent, never a refactoring.

use super::lock::{self, Locker};
use super::release;
use super::scripts;
use crate::core::basics::clock::Stamp;
use crate::core::basics::lease::Lease;
use redis::{ConnectionLike, RedisResult, Value};
use std::time::Duration;

/// RESP written by hand, apart from the code under test.
fn resp(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        out.extend(format!("${}\r\n", part.len()).bytes());
        out.extend(*part);
        out.extend(b"\r\n");
    }
    out
}

fn evalsha(script: &redis::Script, keys: &[&[u8]], args: &[&[u8]]) -> Vec<u8> {
    let count = keys.len().to_string();
    let mut parts = vec![
        b"EVALSHA".as_slice(),
        script.get_hash().as_bytes(),
        count.as_bytes(),
    ];
    parts.extend(keys.iter().chain(args));
    resp(&parts)
}

/// What the runtime's connection writes for a script call.
struct Recorder(Vec<u8>);

impl ConnectionLike for Recorder {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.0.extend_from_slice(cmd);
        Ok(Value::Int(1))
    }
    fn req_packed_commands(&mut self, cmd: &[u8], _: usize, _: usize) -> RedisResult<Vec<Value>> {
        self.0.extend_from_slice(cmd);
        Ok(vec![])
    }
    fn get_db(&self) -> i64 {
        0
    }
    fn check_connection(&mut self) -> bool {
        true
    }
    fn is_open(&self) -> bool {
        true
    }
}

fn sent(invocation: &redis::ScriptInvocation<'_>) -> Vec<u8> {
    let mut recorder = Recorder(Vec::new());
    let _: RedisResult<Value> = invocation.invoke(&mut recorder);
    recorder.0
}

fn text(out: Vec<u8>) -> Vec<u8> {
    out
}

fn lease() -> Lease {
    Lease::new(
        "k".into(),
        b"lock:k".to_vec(),
        "tok".into(),
        7,
        Stamp::now(),
        Duration::from_secs(3),
    )
}

const WAKE_RELEASE: [&[u8]; 2] = [b"lock:k", b"{lock:k}\xffwaiting"];

#[test]
fn release_with_no_local_waiter_is_release_wake_with_zero() {
    let mut out = Vec::new();
    lock::write_release(&mut out, b"lock:k", "tok");
    let want = evalsha(
        &scripts::RELEASE_WAKE,
        &WAKE_RELEASE,
        &[b"tok", b"{lock:k}:released", b"0"],
    );
    assert_eq!(text(out), want);
}

#[test]
fn handover_names_both_tokens_the_ttl_and_our_fence() {
    let mut out = Vec::new();
    lock::write_handoff(&mut out, &lease(), "theirs", Duration::from_millis(3000));
    let want = evalsha(
        &scripts::HANDOFF,
        &[b"lock:k", b"{lock:k}\xfffence"],
        &[b"tok", b"theirs", b"3000", b"7"],
    );
    assert_eq!(text(out), want);
}

#[test]
fn extend_names_the_fence_key_and_the_extra_ms() {
    let mut out = Vec::new();
    Locker::write_extend(&mut out, &lease(), Duration::from_millis(500));
    let want = evalsha(
        &scripts::EXTEND,
        &[b"lock:k", b"{lock:k}\xfffence"],
        &[b"tok", b"500"],
    );
    assert_eq!(text(out), want);
}

#[test]
fn is_locked_is_exists() {
    let locker = super::test_support::locker(1, "lock:");
    let mut out = Vec::new();
    locker.write_exists(&mut out, "k");
    assert_eq!(text(out), resp(&[b"EXISTS", b"lock:k"]));
}

#[test]
fn a_fair_release_names_the_line_and_its_liveness() {
    let want = evalsha(
        &scripts::RELEASE_FAIR,
        &[b"lock:k", b"{lock:k}\xffline", b"{lock:k}\xffalive"],
        &[b"tok", b"{lock:k}:released"],
    );
    assert_eq!(sent(&release::fair_invocation(b"lock:k", "tok")), want);
}

#[test]
fn an_exclusive_release_names_the_owner_key_first_and_proves_the_contents() {
    let locker = super::test_support::locker(1, "lock:");
    let lock = super::exclusive::Exclusive::new(
        locker.store().clone(),
        super::exclusive::ExclusiveSpec {
            name: "a".into(),
            key_prefix: "exclusive-lock".into(),
            client_key_prefix: String::new(),
            fence_retention_ms: 0,
        },
        Duration::from_secs(1),
    );
    let proof = super::exclusive::Proof {
        token: "tok",
        contents: "1",
        set_at: Some(5000),
    };
    let mut out = Vec::new();
    lock.write_release(&mut out, &proof);
    let want = evalsha(
        &scripts::RELEASE,
        &[b"{exclusive-lock:a}\xffowner", b"exclusive-lock:a"],
        &[b"tok", b"1", b"5000"],
    );
    assert_eq!(text(out), want);
}
