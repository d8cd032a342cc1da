//! syncguard (`createRedisBackend`): its options, the keys of each call as its storage
//! scheme named them (JS computes them; the client's own ioredis `keyPrefix` is put in
//! front here, as ioredis would, and into the key the index stores, so that the index names
//! the key really written), and which operation each backend method is. The decisions are
//! the operations' (ops/syncguard.rs) and the scripts'. JS has validated every argument as
//! syncguard does before any of this runs; the checks here are of shape only, naming the
//! argument, so that no call from elsewhere can send what JS never would. On a Redis Cluster
//! whose prefix holds no hash tag, the index and fence keys are put in the lock key's slot
//! and the lockId names it (syncguard_slots.rs).

use super::connection::LockConnection;
use super::syncguard_calls::HeldIds;
pub use super::syncguard_calls::{
    SyncguardAcquire, SyncguardGranted, SyncguardLock, SyncguardReleaseCall,
};
use super::syncguard_slots;
use crate::core::backend::endpoint::Address;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::pace::Pace;
use crate::core::basics::stats::{CallCounters, StatsSnapshot};
use crate::core::basics::sync;
use crate::core::basics::validate::{self, DEFAULT_COMMAND_TIMEOUT};
use crate::core::ops::key_scheme::SyncguardKeys;
use crate::core::ops::lock::Locker;
pub use crate::core::ops::syncguard::SyncguardWon;
pub use crate::core::proto::syncguard::ReleasedById;
use crate::core::proto::syncguard::SyncguardLookup;
use crate::core::wait::owner::Owner;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Options of `createRedisBackend(redis, options)` that reach the core.
#[derive(Default)]
pub struct SyncguardSettings {
    /// syncguard's `keyPrefix` (trailing colons stripped by JS), for isLocked's clean-up of
    /// an index key. Default `"syncguard"`.
    pub key_prefix: Option<String>,
    /// Whether isLocked deletes a record expired past its guard. Default false.
    pub cleanup_in_is_locked: Option<bool>,
    /// The `keyPrefix` of the user's ioredis client.
    pub client_key_prefix: Option<String>,
    /// Bound on every Redis call. Default 5000.
    pub command_timeout_ms: Option<f64>,
    /// Count what its calls do, for `stats()`. Default true.
    pub stats: Option<bool>,
}

pub(super) const DEFAULT_PREFIX: &str = "syncguard";
/// Length of syncguard's lockIds: 16 random bytes in base64url, unpadded.
const LOCK_ID_CHARS: usize = 22;

/// One syncguard lock's keys as its storage scheme named them (before the client's prefix).
pub struct SyncguardCall<'a> {
    /// The normalised user key.
    pub key: &'a str,
    pub lock_key: &'a [u8],
    pub index_key: &'a [u8],
    pub fence_key: &'a [u8],
    pub lock_id: &'a str,
}

/// One syncguard backend on a shared connection.
pub struct Syncguard {
    locker: Arc<Locker>,
    client_prefix: Vec<u8>,
    /// syncguard's `keyPrefix`, as given.
    prefix: Vec<u8>,
    /// isLocked's `keyPrefix` argument, with the client's prefix in front.
    key_prefix: Vec<u8>,
    /// On a cluster with an untagged prefix: index and fence keys in the lock key's slot.
    slot_safe: bool,
    cleanup: bool,
    /// The lock key of each lockId this backend won and has not released, until its expiry
    /// (by our clock): a bare `release({ lockId })` then names the key it expects, and the
    /// release wakes that lock's next waiter in its one round trip.
    held: Arc<Mutex<HeldIds>>,
}

pub(super) fn lock_id(lock_id: &str) -> Result<(), LockError> {
    let base64url = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    if lock_id.len() != LOCK_ID_CHARS || !lock_id.bytes().all(base64url) {
        return Err(LockError::invalid_type(
            "lockId",
            "lockId must be 22 base64url characters",
        ));
    }
    Ok(())
}

pub(super) fn redis_key(arg: &'static str, key: &[u8]) -> Result<(), LockError> {
    if key.is_empty() {
        return Err(LockError::invalid_type(
            arg,
            format!("{arg} must be a non-empty key"),
        ));
    }
    Ok(())
}

/// A TTL as syncguard takes it: any whole number of ms from 1 (Redis refuses the huge ones,
/// as it does syncguard's), below 2^64 so that it is written digit for digit.
pub(super) fn ttl(value: f64) -> Result<Duration, LockError> {
    if !((1.0..18_446_744_073_709_551_616.0).contains(&value) && value.fract() == 0.0) {
        return Err(LockError::invalid_range(
            "ttlMs",
            format!(
                "ttlMs must be a positive whole number of ms, got {}",
                validate::js_number(value)
            ),
        ));
    }
    // Whole and in range, so the cast is exact.
    Ok(Duration::from_millis(value as u64))
}

/// `call`'s keys, checked, with `client_prefix` in front of each (as the client sends them).
pub(super) fn keys_of(
    call: &SyncguardCall<'_>,
    client_prefix: &[u8],
) -> Result<SyncguardKeys, LockError> {
    validate::key("key", call.key)?;
    redis_key("lockKey", call.lock_key)?;
    redis_key("indexKey", call.index_key)?;
    redis_key("fenceKey", call.fence_key)?;
    lock_id(call.lock_id)?;
    let sent = |key: &[u8]| [client_prefix, key].concat();
    let lock_key = sent(call.lock_key);
    Ok(SyncguardKeys {
        user_key: call.key.to_owned(),
        stored_key: lock_key.clone(),
        lock_key,
        index_key: sent(call.index_key),
        fence_key: sent(call.fence_key),
        lock_id: call.lock_id.to_owned(),
    })
}

impl Syncguard {
    /// Checks `settings` (naming the option at fault); the connection opens on first use.
    /// Its waits and locks belong to `owner`.
    pub fn new(
        connection: &LockConnection,
        settings: SyncguardSettings,
        owner: Owner,
    ) -> Result<Self, LockError> {
        let command_timeout = match settings.command_timeout_ms {
            Some(ms) => validate::positive_ms("commandTimeoutMs", ms)?,
            None => DEFAULT_COMMAND_TIMEOUT,
        };
        let client_prefix = settings.client_key_prefix.unwrap_or_default().into_bytes();
        let prefix = settings.key_prefix.as_deref().unwrap_or(DEFAULT_PREFIX);
        let key_prefix = [&client_prefix[..], prefix.as_bytes()].concat();
        // syncguard's keys of one lock (record, lockId index, fence) span three slots unless
        // the prefix they share holds a hash tag.
        let cluster = matches!(connection.endpoint().address, Address::Cluster { .. });
        let slot_safe = syncguard_slots::slot_safe(cluster, &key_prefix);
        // Every key is named whole by the caller: the locker adds no prefix of its own.
        let locker = Locker::new(connection.store().clone(), Vec::new(), command_timeout)
            .owned_by(owner)
            .counting(settings.stats.unwrap_or(true));
        Ok(Syncguard {
            locker: Arc::new(locker),
            client_prefix,
            prefix: prefix.as_bytes().to_vec(),
            key_prefix,
            slot_safe,
            cleanup: settings.cleanup_in_is_locked.unwrap_or(false),
            held: Arc::default(),
        })
    }

    /// What its calls have done so far (see basics/stats.rs).
    pub fn stats(&self) -> StatsSnapshot {
        self.locker.stats().snapshot()
    }

    /// Where its calls are counted (an observer may be added there).
    pub fn counters(&self) -> &Arc<CallCounters> {
        self.locker.stats()
    }

    /// `key` as sent: the client's prefix in front.
    fn sent(&self, key: &[u8]) -> Vec<u8> {
        [&self.client_prefix[..], key].concat()
    }

    /// Whether its index and fence keys are put in the lock key's slot, and its lockIds name
    /// it (on a cluster whose prefix holds no hash tag): a lockId then comes from `lock_id_for`.
    pub fn slot_safe(&self) -> bool {
        self.slot_safe
    }

    /// The lockId an acquisition of `lock_key` takes, made from the fresh `lock_id`: itself,
    /// or in the slot-safe layout the same naming the lock key's slot.
    pub fn lock_id_for(&self, lock_key: &[u8], lock_id: &str) -> Result<String, LockError> {
        redis_key("lockKey", lock_key)?;
        self::lock_id(lock_id)?;
        if !self.slot_safe {
            return Ok(lock_id.to_owned());
        }
        let slot = keys::slot(&self.sent(lock_key));
        syncguard_slots::lock_id_in(lock_id, slot).ok_or_else(|| {
            LockError::invalid_type("lockId", "lockId must be 22 base64url characters")
        })
    }

    fn keys(&self, call: &SyncguardCall<'_>) -> Result<SyncguardKeys, LockError> {
        let mut keys = keys_of(call, &self.client_prefix)?;
        if self.slot_safe {
            let slot = keys::slot(&keys.lock_key);
            if syncguard_slots::slot_of_lock_id(call.lock_id) != Some(slot) {
                return Err(LockError::invalid_type(
                    "lockId",
                    "lockId must name its lock key's slot on a Redis Cluster",
                ));
            }
            keys.index_key = syncguard_slots::in_slot(&self.client_prefix, slot, call.index_key);
            keys.fence_key = syncguard_slots::in_slot(&self.client_prefix, slot, call.fence_key);
        }
        Ok(keys)
    }

    /// The index key of `lock_id`, as sent: in the slot-safe layout, in the slot it names.
    fn index_of(&self, index_key: &[u8], lock_id: &str) -> Vec<u8> {
        match syncguard_slots::slot_of_lock_id(lock_id) {
            Some(slot) if self.slot_safe => {
                syncguard_slots::in_slot(&self.client_prefix, slot, index_key)
            }
            _ => self.sent(index_key),
        }
    }

    /// `backend.acquire({ key, ttlMs })`, checked: `None` when the lock is held.
    pub fn acquire(
        &self,
        call: &SyncguardCall<'_>,
        ttl_ms: f64,
    ) -> Result<SyncguardAcquire, LockError> {
        let (keys, ttl) = (self.keys(call)?, ttl(ttl_ms)?);
        let (locker, held) = (self.locker.clone(), self.held.clone());
        Ok(SyncguardAcquire {
            locker,
            held,
            keys,
            ttl,
        })
    }

    /// `lock(backend, fn, { acquisition })`'s acquisition: paced by `pace` from `started`
    /// (when the JS call began), woken by releases made through this package, ended by
    /// `cancel` (either signal). Ends with the lock, or `LockError::GaveUp`.
    pub fn lock(
        &self,
        call: &SyncguardCall<'_>,
        ttl_ms: f64,
        pace: Pace,
        started: Instant,
        cancel: impl Into<Cancel>,
    ) -> Result<SyncguardLock, LockError> {
        let (keys, ttl) = (self.keys(call)?, ttl(ttl_ms)?);
        let (locker, held) = (self.locker.clone(), self.held.clone());
        Ok(SyncguardLock {
            locker,
            held,
            keys,
            ttl,
            pace,
            started,
            cancel: cancel.into(),
        })
    }

    /// `backend.release({ lockId })`, with the index key syncguard's scheme names for it.
    pub fn release(
        &self,
        index_key: &[u8],
        lock_id: &str,
    ) -> Result<SyncguardReleaseCall, LockError> {
        redis_key("indexKey", index_key)?;
        self::lock_id(lock_id)?;
        let (index_key, lock_id) = (self.index_of(index_key, lock_id), lock_id.to_owned());
        let expect = sync::lock(&self.held)
            .keys
            .remove(&lock_id)
            .map(|(lock_key, _)| lock_key);
        Ok(SyncguardReleaseCall {
            locker: self.locker.clone(),
            index_key,
            lock_id,
            expect,
        })
    }

    /// `backend.extend({ lockId, ttlMs })`: the record's new expiry (server ms), `None`
    /// when the lock is not (or no longer) this lockId's.
    pub fn extend(
        &self,
        index_key: &[u8],
        lock_id: &str,
        ttl_ms: f64,
    ) -> Result<impl Future<Output = Result<Option<i64>, LockError>> + Send + 'static, LockError>
    {
        redis_key("indexKey", index_key)?;
        self::lock_id(lock_id)?;
        let ttl = ttl(ttl_ms)?;
        let (index_key, lock_id) = (self.index_of(index_key, lock_id), lock_id.to_owned());
        let (locker, held) = (self.locker.clone(), self.held.clone());
        Ok(async move {
            let expiry = locker.sg_extend(&index_key, &lock_id, ttl).await?;
            let mut held = sync::lock(&held);
            match (expiry, held.keys.get_mut(&lock_id)) {
                (Some(_), Some((_, until))) => {
                    *until = Instant::now().checked_add(ttl).unwrap_or(*until)
                }
                (None, Some(_)) => drop(held.keys.remove(&lock_id)),
                (_, None) => {}
            }
            Ok(expiry)
        })
    }

    /// `backend.isLocked({ key })`, cleaning up as the backend was told to.
    pub fn is_locked(
        &self,
        lock_key: &[u8],
    ) -> Result<impl Future<Output = Result<bool, LockError>> + Send + 'static, LockError> {
        redis_key("lockKey", lock_key)?;
        let lock_key = self.sent(lock_key);
        // The clean-up's index key is the prefix's: in the slot-safe layout, in the lock's slot.
        let prefix = if self.slot_safe {
            let slot = keys::slot(&lock_key);
            syncguard_slots::in_slot(&self.client_prefix, slot, &self.prefix)
        } else {
            self.key_prefix.clone()
        };
        let (locker, cleanup) = (self.locker.clone(), self.cleanup);
        Ok(async move { locker.sg_is_locked(&lock_key, &prefix, cleanup).await })
    }

    /// `backend.lookup({ key })`: the live record's JSON.
    pub fn lookup_key(
        &self,
        lock_key: &[u8],
    ) -> Result<impl Future<Output = Result<Option<Vec<u8>>, LockError>> + Send + 'static, LockError>
    {
        redis_key("lockKey", lock_key)?;
        let lock_key = self.sent(lock_key);
        let locker = self.locker.clone();
        Ok(async move {
            let by = SyncguardLookup::ByKey {
                lock_key: &lock_key,
            };
            locker.sg_lookup(&by).await
        })
    }

    /// `backend.lookup({ lockId })`: the live record's JSON, when it is that lockId's.
    pub fn lookup_id(
        &self,
        index_key: &[u8],
        lock_id: &str,
    ) -> Result<impl Future<Output = Result<Option<Vec<u8>>, LockError>> + Send + 'static, LockError>
    {
        redis_key("indexKey", index_key)?;
        self::lock_id(lock_id)?;
        let (index_key, lock_id) = (self.index_of(index_key, lock_id), lock_id.to_owned());
        let locker = self.locker.clone();
        Ok(async move {
            let by = SyncguardLookup::ById {
                index_key: &index_key,
                lock_id: &lock_id,
            };
            locker.sg_lookup(&by).await
        })
    }
}
