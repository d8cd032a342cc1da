//! syncguard's operations through a caller's eval: the call captured is the script's whole
//! text with the keys and args our transports send, and each reply shape (ours, and the bare
//! codes of syncguard's test mocks) means what syncguard reads.

use super::super::acquire::{AttemptForm, Layout};
use super::super::syncguard::tests::{bulk, ID, INDEX, LOCK};
use super::*;
use std::time::{Duration, Instant};

const NOW: u64 = 1_700_000_000_000;

fn attempt() -> AcquireAttempt<'static> {
    AcquireAttempt {
        lock_key: LOCK,
        fence_key: b"syncguard:fence:syncguard:job",
        token: ID,
        ttl: Duration::from_millis(30_000),
        fence_retention_ms: 0,
        keep_fences: false,
        fences_known_kept: false,
        layout: Layout::Syncguard {
            index_key: INDEX,
            stored_key: LOCK,
            user_key: "job",
        },
        form: AttemptForm::Script,
        sent: Instant::now(),
    }
}

fn release() -> ReleaseById<'static> {
    ReleaseById {
        index_key: INDEX,
        lock_id: ID,
        expect: None,
        ours_wait: false,
    }
}

fn extend() -> ExtendById<'static> {
    ExtendById {
        index_key: INDEX,
        lock_id: ID,
        ttl: Duration::from_millis(5_000),
    }
}

#[test]
fn the_call_is_the_whole_script_with_the_keys_and_args_we_send() {
    let call = eval_call(&attempt()).expect("a script");
    assert!(call.script.contains("cjson.encode(record)"));
    assert!(call
        .script
        .starts_with(include_str!("scripts/sg_common.lua")));
    let keys: Vec<&[u8]> = call.keys.iter().map(Vec::as_slice).collect();
    assert_eq!(
        keys,
        [LOCK, INDEX, b"syncguard:fence:syncguard:job".as_slice()]
    );
    assert_eq!(call.args[0], ID.as_bytes());
    assert_eq!(call.args[1], b"30000");
    assert_eq!(call.args.len(), 4);

    let call = eval_call(&release()).expect("a script");
    assert_eq!(call.keys, [INDEX.to_vec()]);
    assert_eq!(call.args, [ID.as_bytes().to_vec()]);
    let call = eval_call(&extend()).expect("a script");
    assert_eq!(call.args, [ID.as_bytes().to_vec(), b"5000".to_vec()]);
}

#[test]
fn acquire_replies_ours_and_the_mocks() {
    let won = Value::Array(vec![Value::Int(1), bulk("000000000000007"), Value::Int(42)]);
    assert_eq!(acquired(&attempt(), won, NOW).ok(), Some(Some((7, 42))));
    let held = Value::Array(vec![Value::Int(0), Value::Int(900)]);
    assert_eq!(acquired(&attempt(), held, NOW).ok(), Some(None));
    assert_eq!(
        acquired(&attempt(), Value::Int(1), NOW).ok(),
        Some(Some((1, NOW as i64 + 30_000)))
    );
    assert_eq!(acquired(&attempt(), Value::Int(0), NOW).ok(), Some(None));
    assert!(acquired(&attempt(), Value::Int(2), NOW).is_err());
    assert!(acquired(&attempt(), Value::Nil, NOW).is_err());
}

#[test]
fn release_replies_become_syncguards_codes() {
    let ours = |code| Value::Array(vec![Value::Int(code), bulk("syncguard:job")]);
    assert_eq!(released(&release(), ours(1)).ok(), Some(1));
    assert_eq!(released(&release(), ours(-2)).ok(), Some(-2));
    assert_eq!(
        released(&release(), Value::Array(vec![Value::Int(0)])).ok(),
        Some(0)
    );
    for code in [1, 0, -1, -2] {
        assert_eq!(released(&release(), Value::Int(code)).ok(), Some(code));
    }
    assert_eq!(released(&release(), Value::Int(7)).ok(), Some(-1));
    assert!(released(&release(), bulk("1")).is_err());
}

#[test]
fn extend_is_locked_and_lookup_replies() {
    let won = Value::Array(vec![Value::Int(1), Value::Int(99)]);
    assert_eq!(extended(&extend(), won, NOW).ok(), Some(Some(99)));
    assert_eq!(
        extended(&extend(), Value::Int(1), NOW).ok(),
        Some(Some(NOW as i64 + 5_000))
    );
    assert_eq!(extended(&extend(), Value::Int(0), NOW).ok(), Some(None));
    assert_eq!(extended(&extend(), Value::Int(-2), NOW).ok(), Some(None));
    assert!(extended(&extend(), Value::Nil, NOW).is_err());

    let is = SyncguardIsLocked {
        lock_key: LOCK,
        key_prefix: b"syncguard",
        cleanup: false,
    };
    assert_eq!(locked(&is, Value::Int(1)).ok(), Some(true));
    assert_eq!(locked(&is, Value::Int(0)).ok(), Some(false));
    assert_eq!(locked(&is, Value::Int(5)).ok(), Some(false));

    let by = SyncguardLookup::ByKey { lock_key: LOCK };
    assert_eq!(looked_up(&by, Value::Nil).ok(), Some(None));
    assert_eq!(looked_up(&by, bulk("")).ok(), Some(None));
    assert_eq!(looked_up(&by, bulk("{}")).ok(), Some(Some(b"{}".to_vec())));
    assert!(looked_up(&by, Value::Int(1)).is_err());
}
