//! `Backend`: whichever implementation of `LockStore` an endpoint's address names, chosen
//! once when its store is made. Static dispatch: one `match` per call, no boxed future.
//! Cluster and Redlock are variants of their own; a Sentinel set's master is a `Redis`
//! whose link finds it (see ARCHITECTURE.md, "Where the next backends plug in").

use super::cluster_store::ClusterStore;
use super::endpoint::{Address, Endpoint};
use super::lock_store::{Caps, Listener, LockStore, ScriptsFor, Subscriptions};
use super::memory::MemoryStore;
use super::redis_store::RedisStore;
use super::redlock_store::RedlockStore;
use crate::core::basics::clock::Stamp;
use crate::core::basics::drops::Drops;
use crate::core::basics::error::LockError;
use crate::core::proto::acquire::{AcquireAttempt, Acquired};
use crate::core::proto::extend::Extend;
use crate::core::proto::fenced_set::FencedSet;
use crate::core::proto::queue::{Enqueue, LeaveLine, LeaveQueue, WakeNext};
use crate::core::proto::read::{Exists, Inspect, Pttl};
use crate::core::proto::refresh::RefreshBatch;
use crate::core::proto::release::{HandOver, Release};
use crate::core::proto::syncguard::{
    ExtendById, ReleaseById, ReleasedById, SyncguardIsLocked, SyncguardLookup,
};
use crate::core::proto::Op;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub enum Backend {
    Redis(RedisStore),
    Memory(MemoryStore),
    Redlock(RedlockStore),
    Cluster(ClusterStore),
}

impl Backend {
    /// What keeps the locks at `endpoint`, telling `listener` what its scripts publish. Opens
    /// nothing yet, so it never blocks or fails.
    pub fn open(endpoint: Endpoint, listener: Arc<dyn Listener>) -> Backend {
        match &endpoint.address {
            Address::Memory(name) => {
                let name = name.clone();
                Backend::Memory(MemoryStore::open(endpoint, &name, listener))
            }
            Address::Cluster { .. } => Backend::Cluster(ClusterStore::new(endpoint, listener)),
            // A Sentinel set's master is one Redis, found by the store's link (`upstream.rs`).
            Address::Tcp { .. } | Address::Unix(_) | Address::Sentinel { .. } => {
                Backend::Redis(RedisStore::new(endpoint, listener))
            }
            Address::Redlock(_) => Backend::Redlock(RedlockStore::new(endpoint, listener)),
        }
    }
}

/// Calls the method on whichever store this is.
macro_rules! each {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            Backend::Redis($store) => $call,
            Backend::Memory($store) => $call,
            Backend::Redlock($store) => $call,
            Backend::Cluster($store) => $call,
        }
    };
}

impl LockStore for Backend {
    fn caps(&self) -> Caps {
        each!(self, s => s.caps())
    }

    fn endpoint(&self) -> &Endpoint {
        each!(self, s => s.endpoint())
    }

    async fn run<O: Op + Sync>(&self, op: &O, bound: Duration) -> Result<O::Out, LockError>
    where
        O::Out: Send,
    {
        each!(self, s => s.run(op, bound).await)
    }

    async fn run_on<O: Op + Sync>(
        &self,
        node: Option<usize>,
        op: &O,
        bound: Duration,
    ) -> Result<O::Out, LockError>
    where
        O::Out: Send,
    {
        each!(self, s => s.run_on(node, op, bound).await)
    }

    async fn acquire(
        &self,
        op: &AcquireAttempt<'_>,
        bound: Duration,
    ) -> Result<Acquired, LockError> {
        each!(self, s => s.acquire(op, bound).await)
    }

    fn refresh_shard(&self, key: &[u8]) -> Option<u16> {
        each!(self, s => s.refresh_shard(key))
    }

    async fn refresh(&self, batch: &RefreshBatch, bound: Duration) -> Vec<Option<bool>> {
        each!(self, s => s.refresh(batch, bound).await)
    }

    // Each op below is forwarded, not left to the trait's default (`run`): a Redlock answers
    // each its own way (a quorum of releases, the shortest extension, ...).

    async fn release(&self, op: &Release<'_>, bound: Duration) -> Result<bool, LockError> {
        each!(self, s => s.release(op, bound).await)
    }

    async fn hand_over(
        &self,
        op: &HandOver<'_>,
        bound: Duration,
    ) -> Result<Option<u64>, LockError> {
        each!(self, s => s.hand_over(op, bound).await)
    }

    async fn extend(
        &self,
        op: &Extend<'_>,
        bound: Duration,
    ) -> Result<Option<Duration>, LockError> {
        each!(self, s => s.extend(op, bound).await)
    }

    async fn is_locked(&self, op: &Exists<'_>, bound: Duration) -> Result<bool, LockError> {
        each!(self, s => s.is_locked(op, bound).await)
    }

    async fn holder_ttl(
        &self,
        op: &Pttl<'_>,
        bound: Duration,
    ) -> Result<Option<Duration>, LockError> {
        each!(self, s => s.holder_ttl(op, bound).await)
    }

    async fn inspect(
        &self,
        op: &Inspect<'_>,
        bound: Duration,
    ) -> Result<(Option<Vec<u8>>, i64), LockError> {
        each!(self, s => s.inspect(op, bound).await)
    }

    async fn fenced_write(&self, op: &FencedSet<'_>, bound: Duration) -> Result<bool, LockError> {
        each!(self, s => s.fenced_write(op, bound).await)
    }

    async fn release_by_id(
        &self,
        op: &ReleaseById<'_>,
        bound: Duration,
    ) -> Result<ReleasedById, LockError> {
        each!(self, s => s.release_by_id(op, bound).await)
    }

    async fn extend_by_id(
        &self,
        op: &ExtendById<'_>,
        bound: Duration,
    ) -> Result<Option<i64>, LockError> {
        each!(self, s => s.extend_by_id(op, bound).await)
    }

    async fn syncguard_is_locked(
        &self,
        op: &SyncguardIsLocked<'_>,
        bound: Duration,
    ) -> Result<bool, LockError> {
        each!(self, s => s.syncguard_is_locked(op, bound).await)
    }

    async fn syncguard_lookup(
        &self,
        op: &SyncguardLookup<'_>,
        bound: Duration,
    ) -> Result<Option<Vec<u8>>, LockError> {
        each!(self, s => s.syncguard_lookup(op, bound).await)
    }

    async fn enqueue(&self, op: &Enqueue<'_>, bound: Duration) -> Result<bool, LockError> {
        each!(self, s => s.enqueue(op, bound).await)
    }

    async fn wake_next(&self, op: &WakeNext<'_>, bound: Duration) -> Result<bool, LockError> {
        each!(self, s => s.wake_next(op, bound).await)
    }

    async fn leave_line(&self, op: &LeaveLine<'_>, bound: Duration) -> Result<(), LockError> {
        each!(self, s => s.leave_line(op, bound).await)
    }

    async fn leave_queue(&self, op: &LeaveQueue<'_>, bound: Duration) -> Result<(), LockError> {
        each!(self, s => s.leave_queue(op, bound).await)
    }

    async fn listen(&self, channel: &[u8], subs: &dyn Subscriptions, bound: Duration) -> bool {
        each!(self, s => s.listen(channel, subs, bound).await)
    }

    async fn drop_idle(&self, subs: &dyn Subscriptions, bound: Duration) {
        each!(self, s => s.drop_idle(subs, bound).await)
    }

    async fn prepare(&self, bound: Duration, scripts_for: ScriptsFor) -> Result<(), LockError> {
        each!(self, s => s.prepare(bound, scripts_for).await)
    }

    fn is_prepared(&self) -> bool {
        each!(self, s => s.is_prepared())
    }

    fn lost(&self) -> &Drops {
        each!(self, s => s.lost())
    }

    async fn server_time(&self, key: &[u8], bound: Duration) -> Result<SystemTime, LockError> {
        each!(self, s => s.server_time(key, bound).await)
    }

    fn answered_sent(&self) -> Option<Stamp> {
        each!(self, s => s.answered_sent())
    }

    fn gate_open(&self) -> bool {
        each!(self, s => s.gate_open())
    }

    fn forget_gate(&self) {
        each!(self, s => s.forget_gate())
    }

    fn heed_command_timeout(&self, command_timeout: Duration) {
        each!(self, s => s.heed_command_timeout(command_timeout))
    }

    async fn pass_gate(&self, key: &[u8], bound: Duration) -> Result<(), LockError> {
        each!(self, s => s.pass_gate(key, bound).await)
    }
}

#[cfg(test)]
#[path = "boundary_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "store_equivalence_tests.rs"]
mod store_equivalence_tests;
