//! `Backend`: whichever implementation of `LockStore` an endpoint's address names, chosen
//! once when its store is made. Static dispatch: one `match` per call, no boxed future.
//! Sentinel, Cluster and Redlock are further variants (see ARCHITECTURE.md, "Where the next
//! backends plug in").

use super::endpoint::{Address, Endpoint};
use super::lock_store::{Caps, Listener, LockStore, Subscriptions};
use super::memory::MemoryStore;
use super::redis_store::RedisStore;
use crate::core::basics::error::LockError;
use crate::core::proto::acquire::{AcquireAttempt, Acquired};
use crate::core::proto::refresh::RefreshBatch;
use crate::core::proto::Op;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;

pub enum Backend {
    Redis(RedisStore),
    Memory(MemoryStore),
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
            Address::Tcp { .. } | Address::Unix(_) => {
                Backend::Redis(RedisStore::new(endpoint, listener))
            }
        }
    }
}

/// Calls the method on whichever store this is.
macro_rules! each {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            Backend::Redis($store) => $call,
            Backend::Memory($store) => $call,
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

    async fn acquire(
        &self,
        op: &AcquireAttempt<'_>,
        bound: Duration,
    ) -> Result<Acquired, LockError> {
        each!(self, s => s.acquire(op, bound).await)
    }

    async fn refresh(&self, batch: &RefreshBatch, bound: Duration) -> Vec<Option<bool>> {
        each!(self, s => s.refresh(batch, bound).await)
    }

    async fn listen(&self, channel: &[u8], subs: &dyn Subscriptions, bound: Duration) -> bool {
        each!(self, s => s.listen(channel, subs, bound).await)
    }

    async fn drop_idle(&self, subs: &dyn Subscriptions, bound: Duration) {
        each!(self, s => s.drop_idle(subs, bound).await)
    }

    async fn prepare(&self, bound: Duration) -> Result<(), LockError> {
        each!(self, s => s.prepare(bound).await)
    }

    fn is_prepared(&self) -> bool {
        each!(self, s => s.is_prepared())
    }

    fn unprepared(&self) {
        each!(self, s => s.unprepared())
    }

    fn lost(&self) -> &Notify {
        each!(self, s => s.lost())
    }

    async fn server_time(&self, bound: Duration) -> Result<SystemTime, LockError> {
        each!(self, s => s.server_time(bound).await)
    }
}

#[cfg(test)]
#[path = "boundary_tests.rs"]
mod tests;
