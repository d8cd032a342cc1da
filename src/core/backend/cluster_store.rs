//! A Redis Cluster keeping the locks: each op is sent as on one server (`RedisStore` over the
//! cluster's connection, which routes it by its lock key's slot: every key of an op shares
//! it), bar what spans slots. A refresh batch is cut by slot and its parts go concurrently;
//! the JS thread's socket steps aside, so no MOVED can reach it. No call waits on a node other
//! than its slot's: scripts are not loaded ahead on every node, a call answered NOSCRIPT goes
//! again whole to its own (`ScriptLoading::ByCall`). syncguard's calls by lockId that find
//! nothing are checked again with their lock key declared (cluster_declared.rs): a migrating
//! slot could have split the index from its record.

use super::cluster_declared::{Declaring, IndexTarget};
use super::cluster_wire::ClusterPair;
use super::endpoint::Endpoint;
use super::lock_store::{
    Caps, Fairness, FastPath, Fencing, Handover, Listener, LockStore, ScriptsFor, Subscriptions,
    WakeKind,
};
use super::redis_store::RedisStore;
use crate::core::basics::drops::Drops;
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::proto::acquire::{AcquireAttempt, Acquired};
use crate::core::proto::refresh::RefreshBatch;
use crate::core::proto::syncguard::{ExtendById, ReleaseById, ReleasedById, SyncguardLookup};
use crate::core::proto::{Op, Request};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Reads only: Redis runs it on the master that holds the key it is given.
const TIME_OF_KEY: &str = "return redis.call('TIME')";

pub struct ClusterStore {
    nodes: RedisStore<ClusterPair>,
}

impl ClusterStore {
    /// Opens nothing yet: the nodes are reached on the first command.
    pub fn new(endpoint: Endpoint, listener: Arc<dyn Listener>) -> ClusterStore {
        ClusterStore {
            nodes: RedisStore::new(endpoint, listener),
        }
    }
}

impl ClusterStore {
    /// The lock key `index_key` names now, asked within what is left of `bound`.
    async fn index_target(
        &self,
        index_key: &[u8],
        bound: Duration,
        started: Instant,
    ) -> Result<Option<Vec<u8>>, LockError> {
        let left = bound.saturating_sub(started.elapsed());
        self.nodes.run(&IndexTarget { index_key }, left).await
    }

    /// `op` again with `lock_key` declared, within what is left of `bound`.
    async fn declaring<O: Op + Sync>(
        &self,
        op: &O,
        lock_key: &[u8],
        bound: Duration,
        started: Instant,
    ) -> Result<O::Out, LockError>
    where
        O::Out: Send,
    {
        let left = bound.saturating_sub(started.elapsed());
        self.nodes.run(&Declaring { op, lock_key }, left).await
    }
}

impl LockStore for ClusterStore {
    fn caps(&self) -> Caps {
        Caps {
            fencing: Fencing::Strict,
            handover: Handover::InScript,
            fairness: Fairness::Line,
            // One plain socket would be answered MOVED for most slots.
            fast_path: FastPath::None,
            wake: WakeKind::Queue,
            transactions: false,
            doubt_unconfirmed: false,
        }
    }

    fn endpoint(&self) -> &Endpoint {
        self.nodes.endpoint()
    }

    async fn run<O: Op + Sync>(&self, op: &O, bound: Duration) -> Result<O::Out, LockError>
    where
        O::Out: Send,
    {
        self.nodes.run(op, bound).await
    }

    async fn acquire(
        &self,
        op: &AcquireAttempt<'_>,
        bound: Duration,
    ) -> Result<Acquired, LockError> {
        self.nodes.acquire(op, bound).await
    }

    /// The key's slot: a round per slot waits on no node but the slot's master. (Its node
    /// would do, with fewer rounds, but the crate keeps the slot map to itself, and a slot
    /// may move.)
    fn refresh_shard(&self, key: &[u8]) -> Option<u16> {
        Some(keys::slot(key))
    }

    /// One batch per slot (a script's keys must share one), all sent at once within the one
    /// bound; each slot's batch is what one server's refresh is (one pipeline, a NOSCRIPT
    /// sent again whole). The answers come back together, so a slot that does not answer
    /// holds back the others' until the bound: the watchdog sends one slot per call
    /// (`refresh_shard`).
    async fn refresh(&self, batch: &RefreshBatch, bound: Duration) -> Vec<Option<bool>> {
        let split = batch.split();
        let parts = split
            .batches()
            .iter()
            .map(|(_, part)| self.nodes.refresh(part, bound));
        split.merge(futures_util::future::join_all(parts).await)
    }

    async fn listen(&self, channel: &[u8], subs: &dyn Subscriptions, bound: Duration) -> bool {
        self.nodes.listen(channel, subs, bound).await
    }

    async fn drop_idle(&self, subs: &dyn Subscriptions, bound: Duration) {
        self.nodes.drop_idle(subs, bound).await
    }

    /// Answers at once: nothing is loaded ahead (see the module's comment).
    async fn prepare(&self, bound: Duration, scripts_for: ScriptsFor) -> Result<(), LockError> {
        self.nodes.prepare(bound, scripts_for).await
    }

    fn is_prepared(&self) -> bool {
        self.nodes.is_prepared()
    }

    fn lost(&self) -> &Drops {
        self.nodes.lost()
    }

    fn heed_command_timeout(&self, command_timeout: Duration) {
        self.nodes.heed_command_timeout(command_timeout)
    }

    /// Closed while a quarantine is on, as on one server: only the slot's own connection
    /// can tell its master's gate.
    fn gate_open(&self) -> bool {
        self.nodes.gate_open()
    }

    fn forget_gate(&self) {
        self.nodes.forget_gate()
    }

    /// Waits at the gate of `key`'s slot only, so a lease stamped after it counts its TTL
    /// from when the attempt can go out (the attempt itself is gated again when sent); a
    /// master in quarantine holds up no key on another.
    async fn pass_gate(&self, key: &[u8], bound: Duration) -> Result<(), LockError> {
        self.nodes.pass_gate(key, bound).await
    }

    /// A release by lockId that found nothing, its lock key unknown to the caller, goes again
    /// expecting the key the index names (declared, and its waiter woken by the script).
    async fn release_by_id(
        &self,
        op: &ReleaseById<'_>,
        bound: Duration,
    ) -> Result<ReleasedById, LockError> {
        let started = Instant::now();
        let first = self.nodes.run(op, bound).await?;
        if first != ReleasedById::NotFound {
            return Ok(first);
        }
        let Some(lock_key) = self.index_target(op.index_key, bound, started).await? else {
            return Ok(first);
        };
        let again = ReleaseById {
            index_key: op.index_key,
            lock_id: op.lock_id,
            expect: Some(&lock_key),
            ours_wait: op.ours_wait && op.expect == Some(lock_key.as_slice()),
        };
        let left = bound.saturating_sub(started.elapsed());
        self.nodes.run(&again, left).await
    }

    async fn extend_by_id(
        &self,
        op: &ExtendById<'_>,
        bound: Duration,
    ) -> Result<Option<i64>, LockError> {
        let started = Instant::now();
        let first = self.nodes.run(op, bound).await?;
        if first.is_some() {
            return Ok(first);
        }
        match self.index_target(op.index_key, bound, started).await? {
            Some(lock_key) => self.declaring(op, &lock_key, bound, started).await,
            None => Ok(first),
        }
    }

    async fn syncguard_lookup(
        &self,
        op: &SyncguardLookup<'_>,
        bound: Duration,
    ) -> Result<Option<Vec<u8>>, LockError> {
        let started = Instant::now();
        let first = self.nodes.run(op, bound).await?;
        let SyncguardLookup::ById { index_key, .. } = op else {
            return Ok(first);
        };
        if first.is_some() {
            return Ok(first);
        }
        match self.index_target(index_key, bound, started).await? {
            Some(lock_key) => self.declaring(op, &lock_key, bound, started).await,
            None => Ok(first),
        }
    }

    /// TIME names no key, so the crate would send it to any node: from a script given `key`,
    /// it goes to the key's master and follows a MOVED there like any lock call.
    async fn server_time(&self, key: &[u8], bound: Duration) -> Result<SystemTime, LockError> {
        let mut time = redis::cmd("EVAL");
        time.arg(TIME_OF_KEY).arg(1).arg(key);
        self.nodes.time(Request::Command(time), bound).await
    }
}
