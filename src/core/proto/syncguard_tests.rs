//! What syncguard's ops send (the exact bytes, on both transports) and what each reply shape
//! means, the malformed ones included.

use super::super::golden_tests::{assert_sends, evalsha};
use super::super::{scripts, Op};
use super::*;
use redis::Value;
use std::time::Duration;

// Shared with syncguard's attempt's tests (acquire_syncguard_tests.rs).
pub(in crate::core::proto) const LOCK: &[u8] = b"syncguard:job";
pub(in crate::core::proto) const INDEX: &[u8] = b"syncguard:id:AAAAAAAAAAAAAAAAAAAAAA";
pub(in crate::core::proto) const ID: &str = "AAAAAAAAAAAAAAAAAAAAAA";

pub(in crate::core::proto) fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

pub(in crate::core::proto) fn error(text: &str) -> Value {
    let wire = format!("-{text}\r\n");
    match crate::core::basics::resp::parse(wire.as_bytes()) {
        Ok(Some((value, _))) => value,
        other => panic!("not an error reply: {other:?}"),
    }
}

#[test]
fn release_by_id_names_the_expected_lock_to_wake_its_queue() {
    let bare = ReleaseById {
        index_key: INDEX,
        lock_id: ID,
        expect: None,
        ours_wait: false,
    };
    assert_sends(
        &bare,
        &evalsha(&scripts::SG_RELEASE, &[INDEX], &[ID.as_bytes()]),
    );
    let expecting = ReleaseById {
        expect: Some(LOCK),
        ..bare
    };
    let want = evalsha(
        &scripts::SG_RELEASE,
        &[INDEX, LOCK, b"{syncguard:job}\xffwaiting"],
        &[ID.as_bytes(), b"{syncguard:job}:released"],
    );
    assert_sends(&expecting, &want);
    let ours = ReleaseById {
        ours_wait: true,
        ..expecting
    };
    let want = evalsha(
        &scripts::SG_RELEASE,
        &[INDEX, LOCK, b"{syncguard:job}\xffwaiting"],
        &[ID.as_bytes(), b"{syncguard:job}:released", b"1"],
    );
    assert_sends(&ours, &want);
}

#[test]
fn release_by_id_replies_mean_released_expired_another_s_or_none() {
    let release = ReleaseById {
        index_key: INDEX,
        lock_id: ID,
        expect: None,
        ours_wait: false,
    };
    let key = || LOCK.to_vec();
    let cases = [
        (
            vec![Value::Int(1), bulk("syncguard:job")],
            ReleasedById::Released { lock_key: key() },
        ),
        (
            vec![Value::Int(-2), bulk("syncguard:job")],
            ReleasedById::Expired { lock_key: key() },
        ),
        (vec![Value::Int(0)], ReleasedById::NotOwner),
        (vec![Value::Int(-1)], ReleasedById::NotFound),
    ];
    for (reply, want) in cases {
        let got = release.decode(Value::Array(reply)).ok();
        assert_eq!(got.as_ref().and_then(ReleasedById::freed), want.freed());
        assert_eq!(got, Some(want));
    }
    for reply in [
        Value::Int(1),
        Value::Array(vec![Value::Int(1)]),
        Value::Array(vec![Value::Int(2), bulk("k")]),
        Value::Array(vec![Value::Int(0), bulk("k")]),
        error("ERR boom"),
    ] {
        let shown = format!("{reply:?}");
        assert!(release.decode(reply).is_err(), "{shown}");
    }
}

#[test]
fn release_expecting_a_lock_key_reads_a_bare_code_as_that_key_freed() {
    let release = ReleaseById {
        index_key: INDEX,
        lock_id: ID,
        expect: Some(LOCK),
        ours_wait: false,
    };
    let key = || LOCK.to_vec();
    let cases = [
        (Value::Int(1), ReleasedById::Released { lock_key: key() }),
        (Value::Int(-2), ReleasedById::Expired { lock_key: key() }),
        // Another key freed still comes named.
        (
            Value::Array(vec![Value::Int(1), bulk("syncguard:other")]),
            ReleasedById::Released {
                lock_key: b"syncguard:other".to_vec(),
            },
        ),
        (Value::Array(vec![Value::Int(0)]), ReleasedById::NotOwner),
        (Value::Array(vec![Value::Int(-1)]), ReleasedById::NotFound),
    ];
    for (reply, want) in cases {
        assert_eq!(release.decode(reply).ok(), Some(want));
    }
    for reply in [Value::Int(0), Value::Int(-1), Value::Int(2)] {
        let shown = format!("{reply:?}");
        assert!(release.decode(reply).is_err(), "{shown}");
    }
}

#[test]
fn extend_by_id_sets_the_ttl_and_answers_the_servers_expiry() {
    let extend = ExtendById {
        index_key: INDEX,
        lock_id: ID,
        ttl: Duration::from_millis(45_000),
    };
    assert_sends(
        &extend,
        &evalsha(&scripts::SG_EXTEND, &[INDEX], &[ID.as_bytes(), b"45000"]),
    );
    let extended = Value::Array(vec![Value::Int(1), Value::Int(1_717_000_045_000)]);
    assert_eq!(extend.decode(extended).ok(), Some(Some(1_717_000_045_000)));
    assert_eq!(extend.decode(Value::Int(0)).ok(), Some(None));
    for reply in [
        Value::Int(1),
        Value::Array(vec![Value::Int(1)]),
        Value::Array(vec![Value::Int(0), Value::Int(5)]),
        Value::Array(vec![Value::Int(1), bulk("x")]),
        error("ERR boom"),
    ] {
        let shown = format!("{reply:?}");
        assert!(extend.decode(reply).is_err(), "{shown}");
    }
}

#[test]
fn is_locked_sends_the_prefix_and_whether_to_clean_up() {
    let plain = SyncguardIsLocked {
        lock_key: LOCK,
        key_prefix: b"syncguard",
        cleanup: false,
    };
    assert_sends(
        &plain,
        &evalsha(&scripts::SG_IS_LOCKED, &[LOCK], &[b"syncguard", b"false"]),
    );
    let cleaning = SyncguardIsLocked {
        cleanup: true,
        ..plain
    };
    assert_sends(
        &cleaning,
        &evalsha(&scripts::SG_IS_LOCKED, &[LOCK], &[b"syncguard", b"true"]),
    );
    assert_eq!(plain.decode(Value::Int(1)).ok(), Some(true));
    assert_eq!(plain.decode(Value::Int(0)).ok(), Some(false));
    for reply in [Value::Int(2), Value::Nil, error("ERR boom")] {
        let shown = format!("{reply:?}");
        assert!(plain.decode(reply).is_err(), "{shown}");
    }
}

#[test]
fn lookups_by_key_and_by_id_answer_the_records_json() {
    let by_key = SyncguardLookup::ByKey { lock_key: LOCK };
    assert_sends(&by_key, &evalsha(&scripts::SG_LOOKUP, &[LOCK], &[]));
    let by_id = SyncguardLookup::ById {
        index_key: INDEX,
        lock_id: ID,
    };
    assert_sends(
        &by_id,
        &evalsha(&scripts::SG_LOOKUP, &[INDEX], &[ID.as_bytes()]),
    );
    let json = br#"{"lockId":"x","fence":"000000000000001"}"#.to_vec();
    for lookup in [&by_key, &by_id] {
        let found = lookup.decode(Value::BulkString(json.clone())).ok();
        assert_eq!(found, Some(Some(json.clone())));
        assert_eq!(lookup.decode(Value::Nil).ok(), Some(None));
        assert!(lookup.decode(Value::Int(1)).is_err());
        assert!(lookup.decode(error("ERR boom")).is_err());
    }
}

#[test]
fn a_fence_write_back_names_the_record_the_counter_the_lock_id_and_the_fence() {
    let raise = SyncguardFenceRaise {
        lock_key: b"syncguard:k",
        fence_key: b"syncguard:fence:syncguard:k",
        lock_id: "AAAAAAAAAAAAAAAAAAAAA1",
        fence: 11,
    };
    let want = evalsha(
        &scripts::SG_FENCE_RAISE,
        &[b"syncguard:k", b"syncguard:fence:syncguard:k"],
        &[b"AAAAAAAAAAAAAAAAAAAAA1", b"11"],
    );
    assert_sends(&raise, &want);
    assert_eq!(raise.decode(Value::Int(11)).ok(), Some(Some(11)));
    assert_eq!(raise.decode(Value::Int(0)).ok(), Some(None));
    assert!(raise.decode(Value::Int(-1)).is_err());
    assert!(raise.decode(error("NOFENCE no fence")).is_err());
}
