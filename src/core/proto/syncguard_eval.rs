//! syncguard's operations carried by a caller's own `eval` instead of our connection: what
//! syncguard's "test mock" support is (an object with only `eval`). Each operation is the one
//! defined in syncguard.rs and acquire.rs, captured as script text, keys and args; a reply is
//! read as that operation reads it, and also as syncguard reads the bare codes its own test
//! mocks answer (an acquire or extend won without its details, a release's code alone).

use super::acquire::{AcquireAttempt, Acquired};
use super::syncguard::{ExtendById, ReleaseById, ReleasedById, SyncguardIsLocked, SyncguardLookup};
use super::{scripts, Op, Wire};
use crate::core::basics::error::LockError;
use redis::{Script, Value};

/// One script call as `eval(script, keys.length, ...keys, ...args)` takes it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EvalCall {
    pub script: &'static str,
    pub keys: Vec<Vec<u8>>,
    pub args: Vec<Vec<u8>>,
}

/// A wire keeping the script call an operation writes.
#[derive(Default)]
struct Captured {
    call: Option<EvalCall>,
}

impl Wire for Captured {
    fn script(&mut self, script: &'static Script, keys: &[&[u8]], args: &[&[u8]]) {
        self.call = scripts::sg_source(script).map(|script| EvalCall {
            script,
            keys: keys.iter().map(|key| key.to_vec()).collect(),
            args: args.iter().map(|arg| arg.to_vec()).collect(),
        });
    }

    fn command(&mut self, _parts: &[&[u8]]) {
        self.call = None;
    }
}

/// The script call of `op`; an error for an operation that is not one syncguard script.
pub fn eval_call<O: Op>(op: &O) -> Result<EvalCall, LockError> {
    let mut wire = Captured::default();
    op.encode(&mut wire);
    wire.call.ok_or_else(|| {
        LockError::Redis("this operation cannot be sent through a caller's eval".into())
    })
}

/// A won acquisition's fence and expiry (ms since the epoch).
pub type EvalWon = (u64, i64);

/// An acquire's reply: won, or `None` when the lock is held. A bare `1` is won without its
/// details (syncguard reads it as fence 1, expiring `ttl` from `now_ms`); a bare `0` held.
pub fn acquired(
    op: &AcquireAttempt<'_>,
    reply: Value,
    now_ms: u64,
) -> Result<Option<EvalWon>, LockError> {
    let ttl_ms = i64::try_from(op.ttl.as_millis()).unwrap_or(i64::MAX);
    match reply {
        Value::Int(1) => Ok(Some((1, (now_ms as i64).saturating_add(ttl_ms)))),
        Value::Int(0) => Ok(None),
        reply => match op.decode(reply)? {
            Acquired::Won {
                fence,
                set_at: Some(expires),
            } => Ok(Some((fence, expires))),
            Acquired::Held { .. } => Ok(None),
            // The syncguard decode answers nothing else.
            _ => Err(LockError::Redis(
                "syncguard's acquire answered no fence".into(),
            )),
        },
    }
}

/// A release's reply as syncguard's code: 1 released, 0 another's, -1 not found, -2
/// expired. A bare integer is that code (one syncguard does not know means not released).
pub fn released(op: &ReleaseById<'_>, reply: Value) -> Result<i64, LockError> {
    match reply {
        Value::Int(code) => Ok(if (-2..=1).contains(&code) { code } else { -1 }),
        reply => Ok(match op.decode(reply)? {
            ReleasedById::Released { .. } => 1,
            ReleasedById::NotOwner => 0,
            ReleasedById::NotFound => -1,
            ReleasedById::Expired { .. } => -2,
        }),
    }
}

/// An extend's reply: the new expiry, or `None` when not extended. A bare `1` is extended
/// without its expiry (syncguard reads `ttl` from `now_ms`); any other bare integer, not.
pub fn extended(op: &ExtendById<'_>, reply: Value, now_ms: u64) -> Result<Option<i64>, LockError> {
    match reply {
        Value::Int(1) => {
            let ttl_ms = i64::try_from(op.ttl.as_millis()).unwrap_or(i64::MAX);
            Ok(Some((now_ms as i64).saturating_add(ttl_ms)))
        }
        Value::Int(_) => Ok(None),
        reply => op.decode(reply),
    }
}

/// An isLocked reply: locked only on `1`, as syncguard reads it.
pub fn locked(op: &SyncguardIsLocked<'_>, reply: Value) -> Result<bool, LockError> {
    match reply {
        Value::Int(code) => Ok(code == 1),
        reply => op.decode(reply),
    }
}

/// A lookup's reply: the record's JSON, `None` for none (an empty text too, as syncguard
/// reads it).
pub fn looked_up(op: &SyncguardLookup<'_>, reply: Value) -> Result<Option<Vec<u8>>, LockError> {
    Ok(op.decode(reply)?.filter(|json| !json.is_empty()))
}

#[cfg(test)]
#[path = "syncguard_eval_tests.rs"]
mod tests;
