//! syncguard's layout (a JSON record at the lock key, an index key from each lockId to its
//! lock key, a fence counter that never expires): what its release, extend, isLocked and
//! lookups send, and what their replies mean. Its acquire is an `AcquireAttempt` with
//! `Layout::Syncguard` (acquire.rs). The scripts are sg_*.lua.

use super::{int, scripts, Op, Wire};
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::resp;
use redis::Value;
use std::time::Duration;

/// A reply none of these scripts gives.
pub(super) fn malformed(what: &str, reply: &Value) -> LockError {
    LockError::Redis(format!("unexpected reply to syncguard's {what}: {reply:?}"))
}

/// A fence as sg_acquire.lua writes it: 15 digits or more, zero-padded.
pub(super) fn fence(value: &Value) -> Option<u64> {
    let Value::BulkString(digits) = value else {
        return None;
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits)
        .ok()?
        .parse()
        .ok()
        .filter(|&fence| fence > 0)
}

/// Releases the lock `lock_id` holds, found through its index key (sg_release.lua).
pub struct ReleaseById<'a> {
    pub index_key: &'a [u8],
    pub lock_id: &'a str,
    /// The lock key the caller expects the index to name: when it does, the release wakes
    /// that lock's next queued connection in the same script.
    pub expect: Option<&'a [u8]>,
    /// The releasing connection has waiters of its own for that lock, and wakes one itself.
    pub ours_wait: bool,
}

/// What a release by lockId found.
#[derive(Debug, PartialEq, Eq)]
pub enum ReleasedById {
    /// Ours and live: deleted (syncguard's 1).
    Released { lock_key: Vec<u8> },
    /// Expired, whoever held it: deleted with the index key (syncguard's -2).
    Expired { lock_key: Vec<u8> },
    /// Another lockId's record (0).
    NotOwner,
    /// No index key, or no record at the key it names (-1).
    NotFound,
}

impl ReleasedById {
    /// The lock key the release deleted: its waiters may go.
    pub fn freed(&self) -> Option<&[u8]> {
        match self {
            ReleasedById::Released { lock_key } | ReleasedById::Expired { lock_key } => {
                Some(lock_key)
            }
            _ => None,
        }
    }
}

impl Op for ReleaseById<'_> {
    type Out = ReleasedById;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let id = self.lock_id.as_bytes();
        match self.expect {
            None => wire.script(&scripts::SG_RELEASE, &[self.index_key], &[id]),
            Some(lock_key) => {
                let keys = [self.index_key, lock_key, &keys::queue_key(lock_key)];
                let channel = keys::released_channel(lock_key);
                // The flag goes only when set: every argument costs the script a slot.
                let args: &[&[u8]] = if self.ours_wait {
                    &[id, &channel, b"1"]
                } else {
                    &[id, &channel]
                };
                wire.script(&scripts::SG_RELEASE, &keys, args);
            }
        }
    }

    fn decode(&self, reply: Value) -> Result<ReleasedById, LockError> {
        let reply = reply.extract_error()?;
        // A bare code: the lock key deleted is the one expected (the script names only another).
        if let (Value::Int(code), Some(lock_key)) = (&reply, self.expect) {
            let lock_key = lock_key.to_vec();
            return match code {
                1 => Ok(ReleasedById::Released { lock_key }),
                -2 => Ok(ReleasedById::Expired { lock_key }),
                _ => Err(malformed("release", &reply)),
            };
        }
        let Value::Array(items) = &reply else {
            return Err(malformed("release", &reply));
        };
        match items.as_slice() {
            [Value::Int(1), Value::BulkString(key)] => Ok(ReleasedById::Released {
                lock_key: key.clone(),
            }),
            [Value::Int(-2), Value::BulkString(key)] => Ok(ReleasedById::Expired {
                lock_key: key.clone(),
            }),
            [Value::Int(0)] => Ok(ReleasedById::NotOwner),
            [Value::Int(-1)] => Ok(ReleasedById::NotFound),
            _ => Err(malformed("release", &reply)),
        }
    }
}

/// Sets the expiry of the lock `lock_id` holds to the server's now + `ttl` (sg_extend.lua):
/// it sets, so it may be sent twice. Answers the new expiry (server ms), `None` when the
/// lock is not (or no longer) ours.
pub struct ExtendById<'a> {
    pub index_key: &'a [u8],
    pub lock_id: &'a str,
    pub ttl: Duration,
}

impl Op for ExtendById<'_> {
    type Out = Option<i64>;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let ttl = self.ttl.as_millis().to_string();
        wire.script(
            &scripts::SG_EXTEND,
            &[self.index_key],
            &[self.lock_id.as_bytes(), ttl.as_bytes()],
        );
    }

    fn decode(&self, reply: Value) -> Result<Option<i64>, LockError> {
        let reply = reply.extract_error()?;
        match &reply {
            Value::Int(0) => Ok(None),
            Value::Array(items) => match items.as_slice() {
                [Value::Int(1), Value::Int(expires)] => Ok(Some(*expires)),
                _ => Err(malformed("extend", &reply)),
            },
            _ => Err(malformed("extend", &reply)),
        }
    }
}

/// Whether a live record sits at `lock_key` (sg_is_locked.lua); with `cleanup`, one
/// expired over 2 s ago is deleted with the index key named from `key_prefix`.
pub struct SyncguardIsLocked<'a> {
    pub lock_key: &'a [u8],
    pub key_prefix: &'a [u8],
    pub cleanup: bool,
}

impl Op for SyncguardIsLocked<'_> {
    type Out = bool;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let cleanup: &[u8] = if self.cleanup { b"true" } else { b"false" };
        wire.script(
            &scripts::SG_IS_LOCKED,
            &[self.lock_key],
            &[self.key_prefix, cleanup],
        );
    }

    fn decode(&self, reply: Value) -> Result<bool, LockError> {
        match int(reply)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(malformed("isLocked", &Value::Int(other))),
        }
    }
}

/// The live record's JSON (sg_lookup.lua), `None` when there is none.
pub enum SyncguardLookup<'a> {
    ByKey {
        lock_key: &'a [u8],
    },
    ById {
        index_key: &'a [u8],
        lock_id: &'a str,
    },
}

impl Op for SyncguardLookup<'_> {
    type Out = Option<Vec<u8>>;

    fn encode<W: Wire>(&self, wire: &mut W) {
        match self {
            SyncguardLookup::ByKey { lock_key } => {
                wire.script(&scripts::SG_LOOKUP, &[lock_key], &[])
            }
            SyncguardLookup::ById { index_key, lock_id } => {
                wire.script(&scripts::SG_LOOKUP, &[index_key], &[lock_id.as_bytes()])
            }
        }
    }

    fn decode(&self, reply: Value) -> Result<Option<Vec<u8>>, LockError> {
        match reply.extract_error()? {
            Value::Nil => Ok(None),
            Value::BulkString(json) => Ok(Some(json)),
            other => Err(malformed("lookup", &other)),
        }
    }
}

/// Redlock's write-back on one node (sg_fence_raise.lua): `fence`, the one a quorum's
/// acquisition took, written into the record of `lock_id` at `lock_key` and under the counter
/// at `fence_key` (raised to it at least). Answers the counter after, `None` when the record
/// is not that lockId's, or not live (nothing written).
pub struct SyncguardFenceRaise<'a> {
    pub lock_key: &'a [u8],
    pub fence_key: &'a [u8],
    pub lock_id: &'a str,
    pub fence: u64,
}

impl Op for SyncguardFenceRaise<'_> {
    type Out = Option<u64>;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let fence = resp::decimal(self.fence);
        wire.script(
            &scripts::SG_FENCE_RAISE,
            &[self.lock_key, self.fence_key],
            &[self.lock_id.as_bytes(), fence.as_bytes()],
        );
    }

    fn decode(&self, reply: Value) -> Result<Option<u64>, LockError> {
        match int(reply)? {
            0 => Ok(None),
            counter => u64::try_from(counter)
                .map(Some)
                .map_err(|_| malformed("fence write-back", &Value::Int(counter))),
        }
    }
}

#[cfg(test)]
#[path = "syncguard_tests.rs"]
pub(super) mod tests;
