//! Unit tests of `exclusive.rs` on the embedded keyspace: what a transaction whose
//! reply is lost, late or without a fence leaves behind.
use super::*;
use crate::core::backend::endpoint::{Address, Endpoint, EndpointSpec};
use crate::core::basics::keys;
use crate::core::ops::exclusive::ExclusiveSpec;
use crate::core::ops::scripts;
use crate::core::ops::store::Store;
use crate::core::proto::scripts::EXPIRY_SLACK_MS;

const KEY: &[u8] = b"exclusive-lock:job";
const SECOND: Duration = Duration::from_secs(1);

fn lock(name: &str) -> Arc<Exclusive> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(format!("memory://{name}")),
        ..Default::default()
    })
    .unwrap();
    let spec = ExclusiveSpec {
        name: "job".into(),
        key_prefix: "exclusive-lock".into(),
        client_key_prefix: String::new(),
        fence_retention_ms: crate::core::basics::token::FENCE_RETENTION_MS,
    };
    Arc::new(Exclusive::new(Store::shared(endpoint), spec, SECOND))
}

fn terms() -> Terms {
    Terms {
        contents: "1".into(),
        ttl: Duration::from_secs(3),
        refresh: SECOND,
    }
}

/// An attempt written as the transaction (as the JS thread's connection does once MULTI
/// worked there).
fn transaction(lock: &Arc<Exclusive>) -> ExclusiveAttempt {
    let attempt = ExclusiveAttempt::new(lock, &terms());
    let mut out = Vec::new();
    assert_eq!(attempt.write(&mut out, AttemptForm::Transaction), 7);
    attempt
}

async fn run<T: redis::FromRedisValue>(lock: &Exclusive, args: &[&[u8]]) -> T {
    let Address::Memory(name) = &lock.store().endpoint().address else {
        panic!("these tests run on memory://");
    };
    redis::from_redis_value(crate::core::backend::memory::command(name, args)).unwrap()
}

#[tokio::test]
async fn a_lost_transaction_that_won_leaves_its_lock_key_to_its_ttl_and_never_two_holders() {
    // Our transaction set the lock key, then its reply was lost: the fresh attempt cannot
    // tell that lock key ours, so it answers held, and the key runs out by its TTL.
    let lock = lock("fast-exclusive-lost-won");
    let attempt = transaction(&lock);
    run::<()>(&lock, &[b"SET", KEY, b"1", b"NX", b"PX", b"3000"]).await;
    run::<i64>(&lock, &[b"INCRBY", &keys::fence_key(KEY), b"2"]).await;
    let won = attempt.resend(None).await.unwrap();
    assert!(won.is_none(), "two holders");
    let value: Option<String> = run(&lock, &[b"GET", KEY]).await;
    assert_eq!(value.as_deref(), Some("1"));
    let owner: Option<String> = run(&lock, &[b"GET", &keys::owner_key(KEY)]).await;
    assert_eq!(owner, None);
}

#[tokio::test]
async fn a_lost_transaction_that_never_ran_is_made_again() {
    let lock = lock("fast-exclusive-unsent");
    let attempt = transaction(&lock);
    let won = attempt.resend(None).await.unwrap();
    assert!(won.is_some());
    let owner: Option<String> = run(&lock, &[b"GET", &keys::owner_key(KEY)]).await;
    assert_eq!(owner, won.map(|claim| claim.token));
}

/// What a late EXEC answer `[lock, counter, counter kept (two), lock expiry]` makes the
/// transaction send to undo itself: whether it sends anything, and the text sent.
fn undo_of(lock: &Arc<Exclusive>, set: bool, expiry: i64) -> (bool, String) {
    let answer = Value::Array(vec![
        if set { Value::Okay } else { Value::Nil },
        Value::Int(4),
        Value::Int(1),
        Value::Int(0),
        Value::Int(expiry),
    ]);
    let mut out = Vec::new();
    let sent = transaction(lock).answered_late(answer, &mut out).is_some();
    (sent, String::from_utf8_lossy(&out).into_owned())
}

#[test]
fn a_late_answer_undoes_exactly_what_the_transaction_did() {
    let lock = lock("fast-exclusive-late");
    // Won: the release of the lock key it set, told by the expiry the transaction read.
    let (sent, text) = undo_of(&lock, true, 7);
    assert!(sent);
    assert!(
        text.contains(scripts::RELEASE_SOURCE) && text.ends_with("$1\r\n7\r\n"),
        "{text}"
    );
    // Lost: it set nothing.
    let (sent, text) = undo_of(&lock, false, 9);
    assert!(!sent);
    assert!(text.is_empty());
}

#[tokio::test]
async fn a_won_transaction_is_released_by_its_expiry_until_a_refresh_makes_the_owner_key_ours() {
    // The owner key was there already (left by a holder whose lock key another client
    // deleted): the transaction set the lock key only.
    let lock = lock("fast-exclusive-expiry");
    let owner = keys::owner_key(KEY);
    run::<()>(&lock, &[b"SET", &owner, b"left-behind", b"PX", b"60000"]).await;
    let attempt = transaction(&lock);
    let request = attempt.request.clone();
    run::<()>(&lock, &[b"SET", KEY, b"1", b"NX", b"PX", b"3000"]).await;
    let set_at: i64 = run(&lock, &[b"PEXPIRETIME", KEY]).await;
    // Another expiry, or no expiry known, proves nothing: the lock stays.
    assert!(!lock
        .release(&request.proof(Some(set_at + 1)))
        .await
        .unwrap());
    assert!(!lock.release(&request.proof(None)).await.unwrap());
    assert!(lock.release(&request.proof(Some(set_at))).await.unwrap());
    let left: i64 = run(&lock, &[b"EXISTS", KEY, &owner]).await;
    assert_eq!(left, 0, "both keys go");
}

#[tokio::test]
async fn the_expiry_proves_nothing_once_an_owner_key_on_it_is_someone_elses_or_ours() {
    let lock = lock("fast-exclusive-proofs");
    let owner = keys::owner_key(KEY);
    let request = transaction(&lock).request.clone();
    // Re-created by another holder through the acquire script, by chance on our very expiry:
    // its owner key shares the lock key's expiry, so the lock key is theirs.
    run::<()>(&lock, &[b"SET", KEY, b"1", b"PX", b"3000"]).await;
    let at: i64 = run(&lock, &[b"PEXPIRETIME", KEY]).await;
    let at_text = at.to_string();
    run::<()>(
        &lock,
        &[b"SET", &owner, b"theirs", b"PXAT", at_text.as_bytes()],
    )
    .await;
    assert!(!lock.release(&request.proof(Some(at))).await.unwrap());
    let left: i64 = run(&lock, &[b"EXISTS", KEY, &owner]).await;
    assert_eq!(left, 2, "their lock and owner key stay");
    // Our owner key, on another expiry than the lock key's: re-timed by someone else, so the
    // expiry our transaction read proves nothing any more.
    let ours = request.terms.token.as_bytes();
    run::<()>(&lock, &[b"SET", &owner, ours, b"PX", b"9000"]).await;
    assert!(!lock.release(&request.proof(Some(at))).await.unwrap());
    let lock_left: i64 = run(&lock, &[b"EXISTS", KEY]).await;
    assert_eq!(lock_left, 1, "the lock key stays");
}

#[tokio::test]
async fn beside_our_owner_key_a_lock_key_moved_by_a_migration_is_ours_and_one_re_timed_is_not() {
    // A slot's migration (MIGRATE) carries each key's remaining TTL: the new node counts it
    // from when it got that key, so the two keys' expiries come apart by a few ms.
    let lock = lock("fast-exclusive-moved");
    let owner = keys::owner_key(KEY);
    let request = transaction(&lock).request.clone();
    let ours = request.terms.token.as_bytes();
    run::<()>(&lock, &[b"SET", KEY, b"1", b"PX", b"3000"]).await;
    let at: i64 = run(&lock, &[b"PEXPIRETIME", KEY]).await;
    let owner_at = |apart: i64| (at + apart).to_string();
    let re_timed = owner_at(EXPIRY_SLACK_MS + 1);
    run::<()>(&lock, &[b"SET", &owner, ours, b"PXAT", re_timed.as_bytes()]).await;
    assert!(!lock.release(&request.proof(None)).await.unwrap());
    let moved = owner_at(-EXPIRY_SLACK_MS);
    run::<()>(&lock, &[b"SET", &owner, ours, b"PXAT", moved.as_bytes()]).await;
    assert!(lock.release(&request.proof(None)).await.unwrap());
    let left: i64 = run(&lock, &[b"EXISTS", KEY, &owner]).await;
    assert_eq!(left, 0, "both keys go");
}
