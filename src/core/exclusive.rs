//! ExclusiveLock's layout: the lock key and its value are exactly the original package's
//! (`<slug(prefix)>:<slug(name)>` = `lock_contents`, with PX), so a fleet half on the original
//! and half on us never has two holders and the original's `inspect()` reads our locks. Our
//! owner token lives in a sibling key in the same hash slot, set and expired together with the
//! lock key, so refresh and release act only on a lock that is provably ours.

use super::clock::Stamp;
use super::error::LockError;
use super::keys;
use super::scripts;
use super::store::{Replay, Store};
use super::token;
use super::watchdog::{Pair, Target};
use std::sync::Arc;
use std::time::Duration;

pub struct ExclusiveSpec {
    pub name: String,
    pub key_prefix: String,
    /// The user's ioredis `keyPrefix`, which the original's keys carry too.
    pub client_key_prefix: String,
}

/// What one hold is taken with: the original reads these at every acquire, so a user who
/// changed them between holds gets the new ones.
#[derive(Clone)]
pub struct Terms {
    pub contents: String,
    pub ttl: Duration,
    pub refresh: Duration,
}

pub struct Exclusive {
    store: Arc<Store>,
    /// The key as the original names it (`this.key`), without the client's prefix.
    pub key: String,
    pub name: String,
    redis_key: Vec<u8>,
    owner_key: Vec<u8>,
    fence_key: Vec<u8>,
    command_timeout: Duration,
}

/// A lock we won.
pub struct Claim {
    pub token: String,
    pub fence: u64,
    pub sent: Stamp,
}

/// What `inspect()` reports of whoever holds the lock.
pub struct Inspection {
    pub contents: String,
    pub ttl_ms: i64,
}

impl Exclusive {
    pub fn new(store: Arc<Store>, spec: ExclusiveSpec, command_timeout: Duration) -> Self {
        let name = keys::slug(&spec.name);
        let key = format!("{}:{}", keys::slug(&spec.key_prefix), name);
        let redis_key = format!("{}{}", spec.client_key_prefix, key).into_bytes();
        Exclusive {
            store,
            owner_key: keys::owner_key(&redis_key),
            fence_key: keys::fence_key(&redis_key),
            redis_key,
            key,
            name,
            command_timeout,
        }
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// One attempt, as the original's `SET NX PX`; `None` when someone holds the lock.
    pub async fn acquire(&self, terms: &Terms) -> Result<Option<Claim>, LockError> {
        let token = token::new_token();
        let mut invocation = scripts::ACQUIRE.key(&self.redis_key);
        invocation
            .key(&self.fence_key)
            .key(&self.owner_key)
            .arg(&terms.contents)
            .arg(terms.ttl.as_millis() as u64)
            .arg(&token);
        self.store.ensure_scripts(self.command_timeout).await?;
        let sent = Stamp::now();
        let (won, fence): (i64, i64) = self
            .store
            .eval(&invocation, self.command_timeout, Replay::Safe)
            .await?;
        if won != 1 {
            return Ok(None);
        }
        Ok(Some(Claim {
            token,
            fence: super::lock::fence_of(fence)?,
            sent,
        }))
    }

    /// Deletes the lock only if it is still ours; says whether it was.
    pub async fn release(&self, token: &str, contents: &str) -> Result<bool, LockError> {
        let mut invocation = scripts::RELEASE.key(&self.owner_key);
        invocation.key(&self.redis_key).arg(token).arg(contents);
        let deleted: i64 = self
            .store
            .eval(&invocation, self.command_timeout, Replay::Safe)
            .await?;
        Ok(deleted == 1)
    }

    /// The holder's contents and remaining TTL, for any instance, as the original's
    /// `MULTI GET PTTL EXEC` (here one script). Never shows an owner token.
    pub async fn inspect(&self) -> Result<Option<Inspection>, LockError> {
        let invocation = scripts::INSPECT.key(&self.redis_key);
        let (contents, ttl_ms): (Option<Vec<u8>>, i64) = self
            .store
            .eval(&invocation, self.command_timeout, Replay::Safe)
            .await?;
        // Another client may have stored any bytes; show them as ioredis would (lossy UTF-8).
        Ok(contents.map(|bytes| Inspection {
            contents: String::from_utf8_lossy(&bytes).into_owned(),
            ttl_ms,
        }))
    }

    /// What the watchdog refreshes for a claim.
    pub fn target(&self, token: &str, terms: &Terms) -> Target {
        Target {
            key: self.owner_key.clone(),
            name_at: 0,
            token: token.to_owned(),
            pair: Some(Pair {
                data_key: self.redis_key.clone(),
                expected: terms.contents.clone().into_bytes(),
                name: self.key.clone(),
            }),
            ttl: terms.ttl,
            every: terms.refresh,
        }
    }
}
