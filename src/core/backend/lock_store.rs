//! The boundary at the level of locks: what keeps them answers for each lock operation of
//! `proto` (an attempt, a release, a refresh batch, a queue's step), not for commands. One
//! Redis and `memory://` run each over the same Lua scripts; a quorum of N masters or a
//! cluster routing by slot implement the same methods their own way (see ARCHITECTURE.md,
//! "Where the next backends plug in"), and say in `Caps` what they cannot offer.
//!
//! Every method is bounded by `bound`; every key an op touches shares the lock key's slot
//! (basics/keys.rs), so one atomic script per op is enough on any of them.

use super::endpoint::Endpoint;
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
use std::future::Future;
use std::ops::RangeInclusive;
use std::time::{Duration, SystemTime};

/// Channels nobody waits on stay subscribed (the next wait on the same lock skips the
/// SUBSCRIBE) until there are more than this many.
pub const IDLE_SUBSCRIPTIONS: usize = 64;

/// What the scripts are loaded ahead of: it decides what a server refusing connections does
/// to the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptsFor {
    /// An acquisition's attempt: a refusal fails the load as it would the attempt (at once
    /// while the server is known down), since the attempt after it would fail as fast.
    Attempt,
    /// A held lock's call (extend, refresh): it rides out a restart's refusals, as they do.
    Held,
}

/// What one implementation offers, for the operations to choose by: `handover` and `wake`
/// (ops/store.rs), `fast_path` (ops/route.rs) and `fairness` (a fair lock refused where there
/// is no line) are asked; `fencing` and `transactions` only describe (a Redlock refuses
/// `fenced_write` itself; the JS thread's socket learns what its server takes, `TxSupport`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    pub fencing: Fencing,
    pub handover: Handover,
    pub fairness: Fairness,
    pub fast_path: FastPath,
    pub wake: WakeKind,
    /// Whether an attempt may go as a MULTI transaction (`AttemptForm::Transaction`).
    pub transactions: bool,
    /// Whether a refresh left unconfirmed for its lock's refresh interval puts the lock in
    /// doubt (`Sink::suspended`): a Redlock, whose majority can go silent without dropping
    /// a connection (the other stores' doubt), and whose refresh round waits up to the
    /// lock's deadline for a quorum.
    pub doubt_unconfirmed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fencing {
    /// One counter per lock, drawn in the acquiring script: every fence is larger than any
    /// before it.
    Strict,
    /// Drawn from a majority's counters and written back to a majority (Redlock).
    Quorum,
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handover {
    /// A release gives the lock straight to a waiter's token, fenced, in one script
    /// (handoff.lua).
    InScript,
    /// handoff.lua on every node: the waiter's once a quorum handed it over with the
    /// waiter's validity left (Redlock).
    Quorum,
    /// In-process as `InScript`; across processes a release grants the lock to the next
    /// waiting connection of the lock's ring, told on its own channel (release_grant.lua).
    /// One server with pushes (RESP3), with `crossProcessGrants` on.
    Ring,
    /// Release and wake only.
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fairness {
    /// A fair lock's line of waiters beside it (acquire_fair.lua).
    Line,
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastPath {
    /// The JS thread may carry calls on a plain TCP socket of its own (one server, no TLS).
    Socket,
    /// Calls may run where the caller is, in the process (memory://: `MemoryInline`).
    Inline,
    /// One socket per node of a Redlock, every call sent to all of them at once and decided
    /// at the quorum (ops/fast/quorum.rs).
    Quorum,
    /// One socket per master, each call routed by its slot (Cluster, later).
    SlotRouted,
    /// Every call goes through the runtime.
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeKind {
    /// A release pops one queued connection and tells it on the lock's channel.
    Queue,
    /// As `Queue`, and the server counts every receiver of a publish (one server): a waiting
    /// connection also listens on its own wake channel of the lock and queues under a marked
    /// name, and a release tells it there, popping the next in the same step when nobody
    /// hears (its process died). Not on Cluster: a plain PUBLISH counts only the receiving
    /// node's subscribers, so a count of 0 proves nothing there.
    QueueChecked,
    /// Any node's message wakes every listener; polling covers the rest.
    Broadcast,
    /// Nothing is published: waiters only poll.
    Poll,
}

/// Which subscriptions a lost connection took with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LostScope {
    /// Every channel (one connection carried them all).
    All,
    /// The channels whose lock keys hash to these slots (one shard of a cluster).
    Slots(RangeInclusive<u16>),
}

impl LostScope {
    pub fn covers(&self, slot: u16) -> bool {
        match self {
            LostScope::All => true,
            LostScope::Slots(slots) => slots.contains(&slot),
        }
    }
}

/// Who hears what the scripts publish on the channels we subscribed to, and that
/// subscriptions were lost (with messages in flight on them).
pub trait Listener: Send + Sync {
    fn message(&self, channel: &[u8], payload: &[u8]);
    /// A message heard by node `node` of a store of several (a Redlock's; `None`: the store's
    /// one connection), for an answer that must go back where the request came from.
    fn message_on(&self, node: Option<usize>, channel: &[u8], payload: &[u8]) {
        let _any_node = node;
        self.message(channel, payload)
    }
    fn connection_lost(&self, scope: LostScope);
    /// The server dropped one subscription itself (a cluster's slot moved to another node):
    /// a release announced there is no longer heard. Only a cluster's nodes do this.
    fn unsubscribed(&self, channel: &[u8]);
}

/// Which channels are subscribed, kept by the listener beside its own state of each channel.
pub trait Subscriptions: Sync {
    fn is_subscribed(&self, channel: &[u8]) -> bool;
    /// Whether anyone still waits for what the channel announces. SUBSCRIBEs go one at a
    /// time, so in a burst of waiters one may come up long after its waiters got their locks
    /// and left: made then, it would only sit on the server.
    fn is_wanted(&self, channel: &[u8]) -> bool;
    /// Channels nobody listens on any more, to unsubscribe, once more than `keep` of them
    /// pile up (called while no other SUBSCRIBE or UNSUBSCRIBE is under way).
    fn take_idle(&self, keep: usize) -> Vec<Vec<u8>>;
    fn mark_subscribed(&self, channel: &[u8]);
}

/// A published message as our scripts send it: a channel and one payload.
pub fn published(push: &redis::PushInfo) -> Option<(&[u8], &[u8])> {
    match (&push.kind, push.data.as_slice()) {
        (
            redis::PushKind::Message | redis::PushKind::SMessage,
            [redis::Value::BulkString(channel), redis::Value::BulkString(payload)],
        ) => Some((channel, payload)),
        _ => None,
    }
}

/// The channel of an SUNSUBSCRIBE push: the server's own when the slot left the node, or
/// the confirmation of ours (whose channel the book has forgotten already).
pub fn unsubscribed(push: &redis::PushInfo) -> Option<&[u8]> {
    match (&push.kind, push.data.as_slice()) {
        (redis::PushKind::SUnsubscribe, [redis::Value::BulkString(channel), ..]) => Some(channel),
        _ => None,
    }
}

/// What keeps the locks, at the level of lock operations. Each op is atomic on one lock's
/// keys; its answer is what `proto` decodes. Futures are `Send`: the operations spawn them.
pub trait LockStore: Send + Sync {
    fn caps(&self) -> Caps;

    fn endpoint(&self) -> &Endpoint;

    /// Runs one op and reads its answer: what every op below is unless a store has more to
    /// do for it (a quorum asks a majority, a cluster routes by slot).
    fn run<O: Op + Sync>(
        &self,
        op: &O,
        bound: Duration,
    ) -> impl Future<Output = Result<O::Out, LockError>> + Send
    where
        O::Out: Send;

    /// `run`, on node `node` only where the store has several (`Listener::message_on`): an
    /// answer to the one that asked, not a quorum's round.
    fn run_on<O: Op + Sync>(
        &self,
        node: Option<usize>,
        op: &O,
        bound: Duration,
    ) -> impl Future<Output = Result<O::Out, LockError>> + Send
    where
        O::Out: Send,
    {
        let _one_node = node;
        self.run(op, bound)
    }

    /// One attempt. One that timed out may still run: the store frees what it may have won
    /// (One Redis sends the release behind it on the same connection), except for
    /// ExclusiveLock's layout, whose caller frees its own pair through `Exclusive::abandon`.
    fn acquire(
        &self,
        op: &AcquireAttempt<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<Acquired, LockError>> + Send;

    /// Whether the lock was ours and is now released.
    fn release(
        &self,
        op: &Release<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<bool, LockError>> + Send {
        self.run(op, bound)
    }

    /// The waiter's fence, `None` when the lock was not ours any more.
    fn hand_over(
        &self,
        op: &HandOver<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<Option<u64>, LockError>> + Send {
        self.run(op, bound)
    }

    /// The new TTL, `None` when not ours. Never sent twice.
    fn extend(
        &self,
        op: &Extend<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<Option<Duration>, LockError>> + Send {
        self.run(op, bound)
    }

    fn is_locked(
        &self,
        op: &Exists<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<bool, LockError>> + Send {
        self.run(op, bound)
    }

    fn holder_ttl(
        &self,
        op: &Pttl<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<Option<Duration>, LockError>> + Send {
        self.run(op, bound)
    }

    fn inspect(
        &self,
        op: &Inspect<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<(Option<Vec<u8>>, i64), LockError>> + Send {
        self.run(op, bound)
    }

    fn fenced_write(
        &self,
        op: &FencedSet<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<bool, LockError>> + Send {
        self.run(op, bound)
    }

    /// syncguard's release by lockId: what the node (or a quorum of them) found.
    fn release_by_id(
        &self,
        op: &ReleaseById<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<ReleasedById, LockError>> + Send {
        self.run(op, bound)
    }

    /// syncguard's extend by lockId: the record's new expiry (server ms), `None` when not
    /// that lockId's.
    fn extend_by_id(
        &self,
        op: &ExtendById<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<Option<i64>, LockError>> + Send {
        self.run(op, bound)
    }

    /// syncguard's isLocked: whether a live record sits at the key.
    fn syncguard_is_locked(
        &self,
        op: &SyncguardIsLocked<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<bool, LockError>> + Send {
        self.run(op, bound)
    }

    /// syncguard's lookup: the live record's JSON, or `None`.
    fn syncguard_lookup(
        &self,
        op: &SyncguardLookup<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, LockError>> + Send {
        self.run(op, bound)
    }

    /// Which shard keeps `key`, for the watchdog to refresh each shard's locks as a round of
    /// their own, filed when that shard answers: a shard that is down or paused must not
    /// hold back the answers of another's locks past their deadlines. `None` where one round
    /// can carry every lock (one server, memory, Redlock: each lock is on every node).
    fn refresh_shard(&self, key: &[u8]) -> Option<u16> {
        let _ = key;
        None
    }

    /// One answer per lock of the batch: refreshed, not ours, or `None` (no answer).
    fn refresh(
        &self,
        batch: &RefreshBatch,
        bound: Duration,
    ) -> impl Future<Output = Vec<Option<bool>>> + Send;

    /// Subscribes to a lock's channel (sharded where it can), unsubscribing idle ones
    /// first. `false` when not listening: the waiter then only polls.
    fn listen(
        &self,
        channel: &[u8],
        subs: &dyn Subscriptions,
        bound: Duration,
    ) -> impl Future<Output = bool> + Send;

    /// Unsubscribes from the channels nobody listens on, if more than half of what we keep
    /// pile up.
    fn drop_idle(
        &self,
        subs: &dyn Subscriptions,
        bound: Duration,
    ) -> impl Future<Output = ()> + Send;

    /// `true` when the lock turned out free.
    fn enqueue(
        &self,
        op: &Enqueue<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<bool, LockError>> + Send {
        self.run(op, bound)
    }

    fn wake_next(
        &self,
        op: &WakeNext<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<bool, LockError>> + Send {
        self.run(op, bound)
    }

    fn leave_line(
        &self,
        op: &LeaveLine<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<(), LockError>> + Send {
        self.run(op, bound)
    }

    fn leave_queue(
        &self,
        op: &LeaveQueue<'_>,
        bound: Duration,
    ) -> impl Future<Output = Result<(), LockError>> + Send {
        self.run(op, bound)
    }

    /// Loads the scripts, so no lock's TTL is counted from a call that came back NOSCRIPT
    /// (where the store loads them ahead: a cluster does not).
    fn prepare(
        &self,
        bound: Duration,
        scripts_for: ScriptsFor,
    ) -> impl Future<Output = Result<(), LockError>> + Send;

    fn is_prepared(&self) -> bool;

    /// Signalled when the connection dropped: every lock may be gone (the watchdog's
    /// re-check).
    fn lost(&self) -> &Drops;

    /// When the latest request whose reply has been read on the connection that carries
    /// pushes was sent: read while a push is handed on, it precedes whatever the push tells
    /// of (Redis writes replies and pushes in the order it ran them). `None` when unknown.
    fn answered_sent(&self) -> Option<Stamp> {
        None
    }

    /// Whether an attempt may go now, on any connection to the store, with no word from it
    /// first: false whenever a restart quarantine is on (proto/epoch.rs), whose gate only
    /// the connection an attempt goes out on can vouch for. Stores with none are open.
    fn gate_open(&self) -> bool {
        true
    }

    /// Waits, within `bound`, until the restart quarantine lets an attempt at `key` go out,
    /// so the attempt's lease counts from then. At once where there is no quarantine.
    fn pass_gate(
        &self,
        key: &[u8],
        bound: Duration,
    ) -> impl Future<Output = Result<(), LockError>> + Send {
        let _ = (key, bound);
        std::future::ready(Ok(()))
    }

    /// Another connection to the store broke: what `gate_open` knows may be stale.
    fn forget_gate(&self) {}

    /// A caller of this store gives up on a call after `command_timeout` when nothing
    /// shorter bounds it: only a call that went unanswered that long shows the server silent
    /// (`silences::SilenceBar`). A store with no connection to doubt ignores it.
    fn heed_command_timeout(&self, command_timeout: Duration) {
        let _ = command_timeout;
    }

    /// The clock of the server that keeps `key` (Redis TIME), for callers that must not trust
    /// their own: on a cluster, the master of the key's slot, which times the lock's TTL.
    fn server_time(
        &self,
        key: &[u8],
        bound: Duration,
    ) -> impl Future<Output = Result<SystemTime, LockError>> + Send;
}
