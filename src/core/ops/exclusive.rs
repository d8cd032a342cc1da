//! ExclusiveLock's layout: the lock key and its value are exactly the original package's
//! (`<slug(prefix)>:<slug(name)>` = `lock_contents`, with PX), so a fleet half on the original
//! and half on us never has two holders and the original's `inspect()` reads our locks. Our
//! owner token lives in a sibling key in the same hash slot, expired together with the lock
//! key, so refresh and release act only on a lock that is provably ours (see
//! same_expiry.lua). A transaction that took the lock writes no owner key: it tells the lock
//! key's absolute expiry, which proves the lock ours until the first refresh writes the owner
//! key beside it, both on one new expiry.

use super::attempt::AttemptTerms;
use super::pair::Pair;
use super::store::Store;
use super::watched::Target;
use crate::core::backend::lock_store::{LockStore, ScriptsFor};
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::stats::CallCounters;
use crate::core::proto::acquire::{AcquireAttempt, Acquired, AttemptForm, Layout};
use crate::core::proto::read::Inspect;
use crate::core::proto::release::{Release, ReleaseKind};
use crate::core::proto::wire::write_whole;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

pub struct ExclusiveSpec {
    pub name: String,
    pub key_prefix: String,
    /// The user's ioredis `keyPrefix`, which the original's keys carry too.
    pub client_key_prefix: String,
    /// How long the lock's fence counter outlives it, in ms; 0 forever (see fence.lua).
    pub fence_retention_ms: u64,
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
    fence_retention_ms: u64,
    command_timeout: Duration,
    /// What its calls have done (`stats()` of every instance sharing this front).
    stats: Arc<CallCounters>,
}

/// A lock we won.
pub struct Claim {
    pub token: String,
    pub fence: u64,
    pub sent: Stamp,
    /// The lock key's absolute expiry (ms) as the transaction that won it set it.
    pub set_at: Option<i64>,
}

/// What proves a hold ours to release.
pub struct Proof<'a> {
    pub token: &'a str,
    pub contents: &'a str,
    pub set_at: Option<i64>,
}

impl<'a> Proof<'a> {
    /// The release of the lock at `data_key` (guarded by `owner_key`) this proves ours.
    fn release(&self, owner_key: &'a [u8], data_key: &'a [u8]) -> Release<'a> {
        Release {
            lock_key: owner_key,
            token: self.token,
            kind: ReleaseKind::Pair {
                data_key,
                contents: self.contents.as_bytes(),
                set_at: self.set_at,
            },
        }
    }
}

/// What `inspect()` reports of whoever holds the lock.
pub struct Inspection {
    pub contents: String,
    pub ttl_ms: i64,
}

impl Exclusive {
    pub fn new(store: Arc<Store>, spec: ExclusiveSpec, command_timeout: Duration) -> Self {
        store.backend().heed_command_timeout(command_timeout);
        let name = keys::slug(&spec.name);
        let key = format!("{}:{}", keys::slug(&spec.key_prefix), name);
        let redis_key = format!("{}{}", spec.client_key_prefix, key).into_bytes();
        Exclusive {
            store,
            owner_key: keys::owner_key(&redis_key),
            fence_key: keys::fence_key(&redis_key),
            fence_retention_ms: spec.fence_retention_ms,
            redis_key,
            key,
            name,
            command_timeout,
            stats: Arc::default(),
        }
    }

    pub fn stats(&self) -> &Arc<CallCounters> {
        &self.stats
    }

    /// Counts its calls only when `on` (the API's `stats` option).
    pub fn counting(mut self, on: bool) -> Self {
        self.stats = Arc::new(CallCounters::new(on));
        self
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// One attempt, as the original's `SET NX PX`; `None` when someone holds the lock.
    pub async fn acquire(&self, terms: &Terms) -> Result<Option<Claim>, LockError> {
        (self.store)
            .ensure_scripts(self.command_timeout, ScriptsFor::Attempt)
            .await?;
        // Stamped after the restart quarantine's gate, as `Locker::attempt_bounded`.
        let key = || Cow::Borrowed(&self.redis_key[..]);
        self.store.pass_gate(key, self.command_timeout).await?;
        let request = self.attempt_request(terms);
        self.acquire_again(request, self.command_timeout).await
    }

    /// An attempt built by `attempt_request`, through the shared connection: sent elsewhere
    /// first (the JS thread's connection) with an unknown outcome, or never. The script
    /// recognises its token, so an attempt that already won wins again with its fence.
    pub async fn acquire_again(
        &self,
        request: ExclusiveRequest,
        timeout: Duration,
    ) -> Result<Option<Claim>, LockError> {
        let op = request.op(AttemptForm::Script);
        match self.store.backend().acquire(&op, timeout).await? {
            Acquired::Won { fence, .. } => Ok(Some(request.claim(fence, None))),
            Acquired::Held { .. } => {
                self.stats.contended(&self.key);
                Ok(None)
            }
            // The runtime's connection reports a server error as an error, and a script
            // sets no lock without a fence.
            Acquired::SetWithoutFence { .. } | Acquired::Refused => Err(LockError::no_fence()),
        }
    }

    /// One attempt to send on a connection of its own (see `ExclusiveRequest`); `sent` is
    /// now.
    pub fn attempt_request(&self, terms: &Terms) -> ExclusiveRequest {
        let (redis_key, fence_key) = (self.redis_key.clone(), self.fence_key.clone());
        let window = self.fence_retention_ms;
        ExclusiveRequest {
            terms: AttemptTerms::new(
                &self.store,
                redis_key,
                fence_key,
                terms.ttl,
                window,
                Stamp::now(),
            ),
            owner_key: self.owner_key.clone(),
            contents: terms.contents.clone(),
        }
    }

    /// The release of the lock `proof` proves ours.
    pub fn release_op<'a>(&'a self, proof: &Proof<'a>) -> Release<'a> {
        proof.release(&self.owner_key, &self.redis_key)
    }

    /// Deletes the lock only if it is still ours; says whether it was.
    pub async fn release(&self, proof: &Proof<'_>) -> Result<bool, LockError> {
        self.release_within(proof, self.command_timeout).await
    }

    async fn release_within(
        &self,
        proof: &Proof<'_>,
        timeout: Duration,
    ) -> Result<bool, LockError> {
        self.store
            .backend()
            .release(&self.release_op(proof), timeout)
            .await
    }

    /// Frees the lock a transaction of `request` took with the absolute expiry `set_at`,
    /// which nobody holds (its caller stopped waiting, or no fence could be drawn for it).
    /// Clean-up nobody waits on: bounded by the lock's TTL, after which there is nothing to
    /// clean.
    pub async fn undo(&self, request: &ExclusiveRequest, set_at: Option<i64>) {
        let proof = request.proof(set_at);
        let _ignored = self.release_within(&proof, request.terms.ttl).await;
    }

    /// Frees a lock `request` may have taken after its caller stopped waiting, through the
    /// shared connection (the attempt's own is gone), bounded by the lock's TTL.
    pub async fn abandon(&self, request: &ExclusiveRequest) {
        let _ignored = self
            .release_within(&request.proof(None), request.terms.ttl)
            .await;
    }

    /// The holder's contents and remaining TTL, for any instance, as the original's
    /// `MULTI GET PTTL EXEC` (here one script). Never shows an owner token.
    pub async fn inspect(&self) -> Result<Option<Inspection>, LockError> {
        let inspect = Inspect {
            lock_key: &self.redis_key,
        };
        let (contents, ttl_ms) = self
            .store
            .backend()
            .inspect(&inspect, self.command_timeout)
            .await?;
        // Another client may have stored any bytes; show them as ioredis would (lossy UTF-8).
        Ok(contents.map(|bytes| Inspection {
            contents: String::from_utf8_lossy(&bytes).into_owned(),
            ttl_ms,
        }))
    }

    /// What the watchdog refreshes for a claim.
    pub fn target(&self, claim: &Claim, terms: &Terms) -> Target {
        Target {
            key: self.owner_key.clone(),
            name_at: 0,
            token: claim.token.clone(),
            pair: Some(Pair {
                data_key: self.redis_key.clone(),
                expected: terms.contents.clone().into_bytes(),
                set_at: claim.set_at,
                name: self.key.clone(),
            }),
            ttl: terms.ttl,
            every: terms.refresh,
            // The original refreshes on a `setInterval` of lock_refresh_ms, and its users
            // read the `refreshed` events by that clock.
            punctual: true,
            fence_retention_ms: self.fence_retention_ms,
        }
    }
}

/// One acquire attempt of an ExclusiveLock sent on a connection of its own (the JS thread's,
/// see ops/fast/exclusive.rs), and sent again through `acquire_again` when that connection
/// cannot finish it.
#[derive(Clone)]
pub struct ExclusiveRequest {
    pub terms: AttemptTerms,
    owner_key: Vec<u8>,
    pub contents: String,
}

impl ExclusiveRequest {
    /// The attempt `golden_tests` writes: token `t`, contents `1`, 3 s, a 5 s fence window.
    #[cfg(test)]
    pub(crate) fn sample(redis_key: &[u8], keep_fences: bool) -> Self {
        ExclusiveRequest {
            terms: AttemptTerms::sample(redis_key, Duration::from_millis(3000), keep_fences),
            owner_key: keys::owner_key(redis_key),
            contents: "1".into(),
        }
    }

    /// The attempt, written in `form`.
    pub fn op(&self, form: AttemptForm) -> AcquireAttempt<'_> {
        let layout = Layout::Exclusive {
            owner_key: &self.owner_key,
            contents: &self.contents,
        };
        self.terms.op(layout, form)
    }

    /// What proves its lock ours: its token, the contents, and (for a transaction) the lock
    /// key's expiry as it set it.
    pub fn proof(&self, set_at: Option<i64>) -> Proof<'_> {
        Proof {
            token: &self.terms.token,
            contents: &self.contents,
            set_at,
        }
    }

    /// The same attempt under a fresh token, `sent` now: what is sent once a transaction's
    /// outcome is lost (see fast/exclusive.rs).
    pub fn renewed(self) -> ExclusiveRequest {
        ExclusiveRequest {
            terms: self.terms.renewed(),
            ..self
        }
    }

    /// The claim of an attempt that won with `fence`; a transaction's set the lock key's
    /// absolute expiry to `set_at`.
    pub fn claim(self, fence: u64, set_at: Option<i64>) -> Claim {
        Claim {
            token: self.terms.token,
            fence,
            sent: self.terms.sent,
            set_at,
        }
    }

    /// The release of the lock this attempt took (with the absolute expiry `set_at`, for a
    /// transaction), written to `out` (one reply): for a late reply that won, after its
    /// caller was told of the timeout. Sent whole, its reply being for nobody
    /// (`wire::write_whole`).
    pub fn write_release(&self, out: &mut Vec<u8>, set_at: Option<i64>) {
        let proof = self.proof(set_at);
        let release = proof.release(&self.owner_key, &self.terms.redis_key);
        write_whole(&release, out);
    }
}

#[cfg(test)]
#[path = "exclusive_gate_tests.rs"]
mod gate_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::proto::scripts;

    #[test]
    fn releases_with_the_owner_key_first_and_the_value_then_the_expiry() {
        let mut out = Vec::new();
        ExclusiveRequest::sample(b"exclusive-lock:a", true).write_release(&mut out, Some(5000));
        let text = String::from_utf8_lossy(&out);
        // Its reply is for nobody: sent whole, so a flushed script cache cannot drop it.
        assert!(text.starts_with("*8\r\n$4\r\nEVAL\r\n"), "{text}");
        assert!(text.contains(scripts::RELEASE_SOURCE));
        assert!(
            text.ends_with("$1\r\nt\r\n$1\r\n1\r\n$4\r\n5000\r\n"),
            "token, contents, then the expiry: {text}"
        );
    }
}
