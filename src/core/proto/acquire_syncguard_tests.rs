//! syncguard's attempt (`Layout::Syncguard`): the exact bytes on both transports, and what
//! each reply shape means, the malformed ones included.

use super::super::golden_tests::{assert_sends, evalsha};
use super::super::scripts;
use super::super::syncguard::tests::{bulk, error, ID, INDEX, LOCK};
use super::*;
use redis::Value;
use std::time::Duration;

fn attempt(ttl: Duration) -> AcquireAttempt<'static> {
    AcquireAttempt {
        lock_key: LOCK,
        fence_key: b"syncguard:fence:syncguard:job",
        token: ID,
        ttl,
        fence_retention_ms: 0,
        keep_fences: false,
        fences_known_kept: false,
        layout: Layout::Syncguard {
            index_key: INDEX,
            stored_key: b"app:syncguard:job",
            user_key: "job",
        },
        form: AttemptForm::Script,
        sent: Instant::now(),
    }
}

#[test]
fn acquire_sends_the_three_keys_and_syncguards_arguments() {
    let want = evalsha(
        &scripts::SG_ACQUIRE,
        &[LOCK, INDEX, b"syncguard:fence:syncguard:job"],
        &[ID.as_bytes(), b"30000", b"app:syncguard:job", b"job"],
    );
    assert_sends(&attempt(Duration::from_millis(30_000)), &want);
    assert_eq!(attempt(Duration::from_millis(1)).replies(), 1);
}

/// A TTL Redis will refuse still goes as written (syncguard's behaviour, see sg_acquire.lua),
/// past what a u64 of milliseconds holds.
#[test]
fn acquire_writes_huge_ttls_whole() {
    let huge = Duration::from_secs(u64::MAX / 100);
    let want = evalsha(
        &scripts::SG_ACQUIRE,
        &[LOCK, INDEX, b"syncguard:fence:syncguard:job"],
        &[
            ID.as_bytes(),
            b"184467440737095516000",
            b"app:syncguard:job",
            b"job",
        ],
    );
    assert_sends(&attempt(huge), &want);
}

#[test]
fn acquire_replies_mean_won_with_the_servers_expiry_or_held() {
    let attempt = attempt(Duration::from_secs(30));
    let won = Value::Array(vec![
        Value::Int(1),
        bulk("000000000000042"),
        Value::Int(1_717_000_030_123),
    ]);
    assert_eq!(
        attempt.decode(won).ok(),
        Some(Acquired::Won {
            fence: 42,
            set_at: Some(1_717_000_030_123)
        })
    );
    let held = Value::Array(vec![Value::Int(0), Value::Int(2500)]);
    assert_eq!(
        attempt.decode(held).ok(),
        Some(Acquired::Held {
            ttl: Some(Duration::from_millis(2500))
        })
    );
    let forever = Value::Array(vec![Value::Int(0), Value::Int(-1)]);
    assert_eq!(
        attempt.decode(forever).ok(),
        Some(Acquired::Held { ttl: None })
    );
    let sixteen = Value::Array(vec![Value::Int(1), bulk("1000000000000000"), Value::Int(5)]);
    assert!(matches!(
        attempt.decode(sixteen),
        Ok(Acquired::Won {
            fence: 1_000_000_000_000_000,
            ..
        })
    ));
}

#[test]
fn acquire_refuses_malformed_replies_and_reports_server_errors() {
    let attempt = attempt(Duration::from_secs(30));
    let malformed = [
        Value::Int(0),
        Value::Int(1),
        Value::Array(vec![Value::Int(1)]),
        Value::Array(vec![Value::Int(1), bulk("000000000000001")]),
        Value::Array(vec![Value::Int(1), bulk("12a"), Value::Int(5)]),
        Value::Array(vec![Value::Int(1), bulk(""), Value::Int(5)]),
        Value::Array(vec![Value::Int(1), bulk("000000000000000"), Value::Int(5)]),
        Value::Array(vec![Value::Int(1), Value::Int(1), Value::Int(5)]),
        Value::Array(vec![
            Value::Int(1),
            bulk("000000000000001"),
            bulk("1.5e+14"),
        ]),
        Value::Array(vec![Value::Int(2), bulk("000000000000001"), Value::Int(5)]),
        Value::Array(vec![Value::Int(0), bulk("5")]),
        Value::Nil,
    ];
    for reply in malformed {
        let shown = format!("{reply:?}");
        assert!(attempt.decode(reply).is_err(), "{shown}");
    }
    // Unlike our own layouts' attempts (`Refused`, sent again), a server error is the
    // answer: syncguard rejects with it.
    let refused = attempt.decode(error("ERR value is not an integer or out of range"));
    assert!(refused.is_err());
}
