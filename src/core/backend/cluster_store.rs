//! A Redis Cluster keeping the locks: each op is sent as on one server (`RedisStore` over the
//! cluster's connection, which routes it by its lock key's slot: every key of an op shares
//! it), bar what spans slots. A refresh batch is cut by slot and its parts go concurrently;
//! the JS thread's socket steps aside, so no MOVED can reach it. No call waits on a node other
//! than its slot's: scripts are not loaded ahead on every node, a call answered NOSCRIPT goes
//! again whole to its own (`ScriptLoading::ByCall`).

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
use crate::core::proto::{Op, Request};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

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

    /// TIME names no key, so the crate would send it to any node: from a script given `key`,
    /// it goes to the key's master and follows a MOVED there like any lock call.
    async fn server_time(&self, key: &[u8], bound: Duration) -> Result<SystemTime, LockError> {
        let mut time = redis::cmd("EVAL");
        time.arg(TIME_OF_KEY).arg(1).arg(key);
        self.nodes.time(Request::Command(time), bound).await
    }
}
