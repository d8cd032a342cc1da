//! syncguard's backend on a caller's object that has only `eval` (syncguard's test mocks):
//! for each backend method, the script call to hand to that `eval` and the meaning of what it
//! answers, both the operation's own (proto/syncguard_eval.rs). Nothing connects: the
//! caller's `eval` is the transport, and there is no wake, no fast lane and no waiting here.

use super::syncguard::{keys_of, lock_id, redis_key, ttl, SyncguardCall, DEFAULT_PREFIX};
use crate::core::basics::clock::wall_ms;
use crate::core::basics::error::LockError;
use crate::core::ops::syncguard::attempt_op;
use crate::core::proto::syncguard::{ExtendById, ReleaseById, SyncguardIsLocked, SyncguardLookup};
use crate::core::proto::syncguard_eval as eval;
pub use crate::core::proto::syncguard_eval::{EvalCall, EvalWon};
use redis::Value;
use std::time::Instant;

/// One backend's settings: isLocked's clean-up and the prefix it names index keys with.
pub struct SyncguardEval {
    key_prefix: Vec<u8>,
    cleanup: bool,
}

fn release_op<'a>(index_key: &'a [u8], lock_id: &'a str) -> Result<ReleaseById<'a>, LockError> {
    redis_key("indexKey", index_key)?;
    self::lock_id(lock_id)?;
    // No expected lock key: a caller's eval has no waiters of ours to wake.
    Ok(ReleaseById {
        index_key,
        lock_id,
        expect: None,
        ours_wait: false,
    })
}

fn extend_op<'a>(
    index_key: &'a [u8],
    lock_id: &'a str,
    ttl_ms: f64,
) -> Result<ExtendById<'a>, LockError> {
    redis_key("indexKey", index_key)?;
    self::lock_id(lock_id)?;
    Ok(ExtendById {
        index_key,
        lock_id,
        ttl: ttl(ttl_ms)?,
    })
}

fn lookup_op<'a>(
    lock_key: Option<&'a [u8]>,
    by_id: Option<(&'a [u8], &'a str)>,
) -> Result<SyncguardLookup<'a>, LockError> {
    match (lock_key, by_id) {
        (Some(lock_key), None) => {
            redis_key("lockKey", lock_key)?;
            Ok(SyncguardLookup::ByKey { lock_key })
        }
        (None, Some((index_key, id))) => {
            redis_key("indexKey", index_key)?;
            lock_id(id)?;
            Ok(SyncguardLookup::ById {
                index_key,
                lock_id: id,
            })
        }
        _ => Err(LockError::invalid_type(
            "lookup",
            "lookup takes a lock key or an index key with its lockId",
        )),
    }
}

impl SyncguardEval {
    pub fn new(key_prefix: Option<String>, cleanup: Option<bool>) -> Self {
        let key_prefix = key_prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_owned());
        SyncguardEval {
            key_prefix: key_prefix.into_bytes(),
            cleanup: cleanup.unwrap_or(false),
        }
    }

    /// `backend.acquire`'s script call.
    pub fn acquire(&self, call: &SyncguardCall<'_>, ttl_ms: f64) -> Result<EvalCall, LockError> {
        let keys = keys_of(call, b"")?;
        // Sent by the caller's client as soon as written.
        eval::eval_call(&attempt_op(&keys, ttl(ttl_ms)?, Instant::now()))
    }

    /// What `backend.acquire`'s reply means: won, or `None` when held.
    pub fn acquired(
        &self,
        call: &SyncguardCall<'_>,
        ttl_ms: f64,
        reply: Value,
    ) -> Result<Option<EvalWon>, LockError> {
        let keys = keys_of(call, b"")?;
        // Only read: its instant is unused.
        eval::acquired(
            &attempt_op(&keys, ttl(ttl_ms)?, Instant::now()),
            reply,
            wall_ms(),
        )
    }

    /// What follows `backend.acquire`'s reply when it came past the call's bound, its caller
    /// already told the call failed: the release of what it may have won, which nobody else
    /// would release before its TTL. Only a reply that says the lock was held needs none; one
    /// that cannot be read is released too (a release by lockId frees only that lockId's lock).
    pub fn late_acquired(
        &self,
        call: &SyncguardCall<'_>,
        ttl_ms: f64,
        reply: Value,
    ) -> Result<Option<EvalCall>, LockError> {
        match self.acquired(call, ttl_ms, reply) {
            Ok(None) => Ok(None),
            Ok(Some(_)) | Err(_) => self.release(call.index_key, call.lock_id).map(Some),
        }
    }

    pub fn release(&self, index_key: &[u8], lock_id: &str) -> Result<EvalCall, LockError> {
        eval::eval_call(&release_op(index_key, lock_id)?)
    }

    /// syncguard's release code (1, 0, -1, -2).
    pub fn released(
        &self,
        index_key: &[u8],
        lock_id: &str,
        reply: Value,
    ) -> Result<i64, LockError> {
        eval::released(&release_op(index_key, lock_id)?, reply)
    }

    pub fn extend(
        &self,
        index_key: &[u8],
        lock_id: &str,
        ttl_ms: f64,
    ) -> Result<EvalCall, LockError> {
        eval::eval_call(&extend_op(index_key, lock_id, ttl_ms)?)
    }

    /// The new expiry, `None` when not extended.
    pub fn extended(
        &self,
        index_key: &[u8],
        lock_id: &str,
        ttl_ms: f64,
        reply: Value,
    ) -> Result<Option<i64>, LockError> {
        eval::extended(&extend_op(index_key, lock_id, ttl_ms)?, reply, wall_ms())
    }

    fn is_locked_op<'a>(&'a self, lock_key: &'a [u8]) -> Result<SyncguardIsLocked<'a>, LockError> {
        redis_key("lockKey", lock_key)?;
        Ok(SyncguardIsLocked {
            lock_key,
            key_prefix: &self.key_prefix,
            cleanup: self.cleanup,
        })
    }

    pub fn is_locked(&self, lock_key: &[u8]) -> Result<EvalCall, LockError> {
        eval::eval_call(&self.is_locked_op(lock_key)?)
    }

    pub fn is_locked_reply(&self, lock_key: &[u8], reply: Value) -> Result<bool, LockError> {
        eval::locked(&self.is_locked_op(lock_key)?, reply)
    }

    /// A lookup by lock key, or by index key and lockId.
    pub fn lookup(
        &self,
        lock_key: Option<&[u8]>,
        by_id: Option<(&[u8], &str)>,
    ) -> Result<EvalCall, LockError> {
        eval::eval_call(&lookup_op(lock_key, by_id)?)
    }

    /// The live record's JSON, `None` for none.
    pub fn looked_up(
        &self,
        lock_key: Option<&[u8]>,
        by_id: Option<(&[u8], &str)>,
        reply: Value,
    ) -> Result<Option<Vec<u8>>, LockError> {
        eval::looked_up(&lookup_op(lock_key, by_id)?, reply)
    }
}
