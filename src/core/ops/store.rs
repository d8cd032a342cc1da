//! The connection of each endpoint as the lock operations use it: one `Link` (see
//! backend/link.rs) shared by every user of the same settings in the process, the wake table
//! of its waiters, and what its announcements ask of it: a release announced to this
//! connection wakes one of its waiters or is passed on, and waiters are made wakeable by
//! subscribing and queueing for their lock.

use super::kept_fences::KeptFences;
use super::passing::Passing;
use crate::core::backend::boundary::Backend;
use crate::core::backend::endpoint::Endpoint;
use crate::core::backend::lock_store::{
    Handover, Listener, LockStore, LostScope, ScriptsFor, Subscriptions, WakeKind,
};
use crate::core::basics::background::spawn;
use crate::core::basics::drops::Drops;
use crate::core::basics::error::LockError;
use crate::core::basics::glob;
use crate::core::basics::key_counts::{KeyWatch, IDLE};
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::sync::lock;
use crate::core::proto::queue::{Enqueue, LeaveLine, LeaveQueue, WakeNext};
use crate::core::proto::ring::{GrantMessage, LeaveRing};
use crate::core::proto::watch::{self, Publish, WatchRequest};
use crate::core::wait::cleanup::{Cleaner, Cleanup};
use crate::core::wait::wake::{self, Turn, Wakes};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

/// Bound of the calls a connection makes on its own (queueing again, passing a wake on).
pub(crate) const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(5);

/// The bound of freeing a lock nobody holds any more: no longer than it would live anyway.
/// An unconfirmed grant's life is estimated from the connection's last answer, which may be
/// long ago (or none since a reconnect): no bound for a call, whose timeout would drop the
/// connection. Redis's claim ends it anyway, and the release script checks the token.
pub(crate) fn orphan_bound(lease: &Lease) -> Duration {
    if lease.is_claim_only() {
        return BACKGROUND_TIMEOUT;
    }
    lease
        .remaining()
        .clamp(Duration::from_millis(1), BACKGROUND_TIMEOUT)
}

pub struct Store {
    backend: Backend,
    wakes: Arc<Wakes>,
    /// This connection's name in the queues of waiting connections (see wake.rs).
    id: String,
    kept_fences: KeptFences,
    /// Locks handed to us that are being freed in the background (see closing.rs).
    passing: Arc<Passing>,
    /// Told when a release of ours ends a tenure by granting (ops/tenure.rs): the kickers
    /// look again while this thread runs anyway, rather than at their timers.
    pub(super) tenures_ended: tokio::sync::Notify,
    /// Hand-overs and wakes per key on this store, while a `watch` asks for them.
    key_watch: KeyWatch,
    /// The store's name in its answers to `watch`: not `id`, which would tell anyone who may
    /// subscribe where to publish a wake.
    watch_name: String,
    me: Weak<Store>,
}

/// Hands the connection's news to its store: a message to whoever it names, a drop to every
/// waiter. The wake table is held here, not reached through the store, so a drop still
/// reaches waiters while the store is going away.
struct Announcements {
    store: Weak<Store>,
    wakes: Arc<Wakes>,
}

impl Listener for Announcements {
    fn message(&self, channel: &[u8], payload: &[u8]) {
        self.message_on(None, channel, payload);
    }

    fn message_on(&self, node: Option<usize>, channel: &[u8], payload: &[u8]) {
        if let Some(store) = self.store.upgrade() {
            store.announced(node, channel, payload);
        }
    }

    fn connection_lost(&self, scope: LostScope) {
        self.wakes.connection_lost(&scope);
    }

    fn unsubscribed(&self, channel: &[u8]) {
        self.wakes.unsubscribed(channel);
    }
}

impl Subscriptions for Wakes {
    fn is_subscribed(&self, channel: &[u8]) -> bool {
        Wakes::is_subscribed(self, channel)
    }

    fn is_wanted(&self, channel: &[u8]) -> bool {
        Wakes::has_waiters(self, &wake::entry_of(channel))
    }

    fn take_idle(&self, keep: usize) -> Vec<Vec<u8>> {
        Wakes::take_idle(self, keep)
    }

    fn mark_subscribed(&self, channel: &[u8]) {
        Wakes::mark_subscribed(self, channel)
    }
}

/// The pauses between the tries of a failed subscription (see `Store::listen`).
const LISTEN_PAUSES: [Duration; 4] = [
    Duration::from_millis(20),
    Duration::from_millis(80),
    Duration::from_millis(300),
    Duration::from_millis(1000),
];

static REGISTRY: LazyLock<Mutex<HashMap<Endpoint, Weak<Store>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl Store {
    /// The store for `endpoint`, shared with every other live user of the same settings. The
    /// connection itself opens on the first command, so constructing never blocks or fails.
    pub fn shared(endpoint: Endpoint) -> Arc<Store> {
        let mut registry = lock(&REGISTRY);
        if let Some(store) = registry.get(&endpoint).and_then(Weak::upgrade) {
            return store;
        }
        registry.retain(|_, store| store.strong_count() > 0);
        let wakes = Arc::new(Wakes::default());
        let store = Arc::new_cyclic(|me: &Weak<Store>| {
            let listener = Arc::new(Announcements {
                store: me.clone(),
                wakes: wakes.clone(),
            });
            Store {
                backend: Backend::open(endpoint.clone(), listener),
                wakes: wakes.clone(),
                id: crate::core::basics::token::new_token(),
                kept_fences: KeptFences::default(),
                passing: Arc::default(),
                tenures_ended: tokio::sync::Notify::new(),
                key_watch: KeyWatch::new(),
                watch_name: crate::core::basics::token::new_token(),
                me: me.clone(),
            }
        });
        let cleaner: Weak<dyn Cleaner> = store.me.clone();
        wakes.set_cleaner(cleaner);
        registry.insert(endpoint, Arc::downgrade(&store));
        store
    }

    /// Every store still in use in the process.
    pub(crate) fn live() -> Vec<Arc<Store>> {
        let registry = lock(&REGISTRY);
        registry.values().filter_map(Weak::upgrade).collect()
    }

    pub(crate) fn passing(&self) -> &Arc<Passing> {
        &self.passing
    }

    /// The store itself, for work that outlives the call that starts it.
    pub(crate) fn me(&self) -> Option<Arc<Store>> {
        self.me.upgrade()
    }

    /// What keeps this endpoint's locks: every lock operation goes through it.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Resolves after the connection dropped (one waiter: the watchdog).
    pub fn dropped(&self) -> &Drops {
        self.backend.lost()
    }

    pub fn endpoint(&self) -> &Endpoint {
        self.backend.endpoint()
    }

    pub fn wakes(&self) -> &Arc<Wakes> {
        &self.wakes
    }

    /// How long this connection's transactions kept each fence counter.
    pub fn kept_fences(&self) -> &KeptFences {
        &self.kept_fences
    }

    /// This connection's name in the queues of waiting connections.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether this connection's releases grant the lock to other processes' waiters, and
    /// its waiters take grants (`Handover::Ring`).
    pub fn grants(&self) -> bool {
        self.backend.caps().handover == Handover::Ring
    }

    /// Whether this connection's waiters listen on their own wake channel of a lock too, and
    /// queue under the marked name releases check (`WakeKind::QueueChecked`).
    fn checks_wakes(&self) -> bool {
        self.backend.caps().wake == WakeKind::QueueChecked
    }

    /// A release was announced on `channel` for `to`: this connection (popped off the lock's
    /// queue, under either of its names there), one waiter of ours by name (`<id>:<seq>`,
    /// next in a fair lock's line), or someone else. On our grant channel of a lock, a grant
    /// (see `granted`); on our wake channel of a lock, our turn.
    fn announced(&self, node: Option<usize>, channel: &[u8], to: &[u8]) {
        if channel == watch::CHANNEL {
            self.watch_asked(node, to);
            return;
        }
        if let Some((lock_key, id)) = keys::grant_of_channel(channel) {
            if id == self.id {
                self.granted(lock_key, to);
            }
            return;
        }
        if let Some((lock_key, id)) = keys::wake_of_channel(channel) {
            if id == self.id {
                self.take_turn(&wake::channel(&lock_key));
            }
            return;
        }
        let Some(rest) = to.strip_prefix(self.id.as_bytes()) else {
            return;
        };
        // Our marked name, told on the released channel by a release of an earlier version.
        if rest.is_empty() || rest == keys::WAKE_MARK.as_bytes() {
            self.take_turn(channel);
            return;
        }
        let seq = rest
            .strip_prefix(b":")
            .and_then(|seq| std::str::from_utf8(seq).ok())
            .and_then(|seq| seq.parse::<u64>().ok());
        if let Some(seq) = seq {
            self.wakes.wake_member(channel, seq);
        }
    }

    /// The hand-overs and wakes per key of this store's locks, for a `watch`.
    pub fn key_watch(&self) -> &KeyWatch {
        &self.key_watch
    }

    /// A `watch` asked for this store's counts per key: answered on its reply channel, by the
    /// connection that heard it (`node`, one of a Redlock's), once per store. Here, in the
    /// connection's push callback, only the map is copied: the pattern is run and the answer
    /// written in a task. A failure costs the watch this store's counts for one frame.
    fn watch_asked(&self, node: Option<usize>, payload: &[u8]) {
        let Some(request) = WatchRequest::parse(payload) else {
            return;
        };
        let Some(tally) = self.key_watch.asked(request.id, std::time::Instant::now()) else {
            return;
        };
        let me = self.me.clone();
        let (id, reply_to, pattern) = (
            request.id.to_vec(),
            request.reply_to.to_vec(),
            request.pattern.to_vec(),
        );
        spawn(async move {
            let Some(store) = me.upgrade() else {
                return;
            };
            let keep = |key: &[u8]| pattern.is_empty() || glob::matches(&pattern, key);
            let answer = watch::answer(&id, &store.watch_name, &tally.narrowed(keep));
            let publish = Publish {
                channel: &reply_to,
                payload: &answer,
            };
            let _ignored = (store.backend)
                .run_on(node, &publish, BACKGROUND_TIMEOUT)
                .await;
            drop(store);
            // Without a count to see it idle, the map would stay until the next request.
            tokio::time::sleep(IDLE + Duration::from_millis(100)).await;
            if let Some(store) = me.upgrade() {
                store.key_watch.expire(std::time::Instant::now());
            }
        });
    }

    /// A release popped this connection off a lock's queue and told us: wake our first
    /// waiter, or pass the wake on if nobody waits here.
    fn take_turn(&self, channel: &[u8]) {
        match self.wakes.take_turn(channel) {
            Turn::Woke => {}
            Turn::PassOn(lock_key) => self.pass_on(lock_key),
        }
    }

    /// Another process's release granted us the lock at `lock_key` (release_grant.lua): our
    /// first waiter takes it, with no attempt of its own; with nobody here to take it, it is
    /// passed on at once, as our own release would. Runs as the push is read, so the request
    /// last answered on the connection ran before the grant: the grant's claim counts from
    /// when that request was sent, never later than Redis counts it.
    fn granted(&self, lock_key: Vec<u8>, message: &[u8]) {
        let Some(grant) = GrantMessage::parse(message) else {
            return;
        };
        let anchor = self.backend.answered_sent();
        let channel = wake::channel(&lock_key);
        // The grant's block of fences (`last`) is drawn again by whoever releases it next.
        let GrantMessage {
            fence,
            claim,
            token,
            ..
        } = grant;
        let orphan = self.wakes.grant_remote(&channel, |ttl| {
            let ttl = ttl.unwrap_or(claim);
            Lease::granted(lock_key.clone(), token, fence, (anchor, claim), ttl)
        });
        if orphan.is_none() {
            self.tenure_began(lock_key);
        }
        // Nobody here takes it: released as ours would be, which grants it to the next
        // connection of the ring (this one leaving it when nobody here waits). Unconfirmed,
        // it runs out after its claim should that fail.
        if let Some(orphan) = orphan {
            self.release_orphan(orphan);
        }
    }

    /// Frees, in the background, a lock handed to a waiter that left before taking it, as
    /// a release would (to the next waiter of ours, or waking the next connection).
    pub(crate) fn release_orphan(&self, lease: Lease) {
        self.clean_up(Cleanup::FreeGranted(lease));
    }

    /// Runs `work` on this store in the background, bounded by `BACKGROUND_TIMEOUT`; its
    /// failure is left to what follows (a place runs out, a poll finds the lock).
    pub(super) fn in_background<F>(&self, work: impl FnOnce(Arc<Store>) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        if let Some(store) = self.me.upgrade() {
            spawn(work(store));
        }
    }

    /// Hands a wake nobody here will use to the next connection in the lock's queue.
    pub(crate) fn pass_on(&self, lock_key: Vec<u8>) {
        if lock_key.is_empty() {
            return;
        }
        self.in_background(|store| async move {
            let wake = WakeNext {
                lock_key: &lock_key,
            };
            let _ignored = store.backend.wake_next(&wake, BACKGROUND_TIMEOUT).await;
        });
    }

    /// Gives up a fair waiter's place in the lock's line; a failure leaves the place to run
    /// out (see `wake::FAIR_PLACE`).
    pub(crate) fn leave_line(&self, lock_key: Vec<u8>, member: String) {
        self.in_background(|store| async move {
            let leave = LeaveLine {
                lock_key: &lock_key,
                member: &member,
            };
            let _ignored = store.backend.leave_line(&leave, BACKGROUND_TIMEOUT).await;
        });
    }

    /// Takes this connection off a lock's queue; a failure leaves the place to be popped
    /// (the wake is then passed on) or to run out.
    pub(crate) fn leave_queue(&self, lock_key: Vec<u8>) {
        self.in_background(|store| async move {
            if store.grants() {
                let leave = LeaveRing {
                    lock_key: &lock_key,
                    id: &store.id,
                };
                let _ignored = store.backend.run(&leave, BACKGROUND_TIMEOUT).await;
                return;
            }
            let leave = LeaveQueue {
                lock_key: &lock_key,
                id: &store.id,
            };
            let _ignored = store.backend.leave_queue(&leave, BACKGROUND_TIMEOUT).await;
        });
    }

    /// Unsubscribes from the locks nobody waits for, once there are more of them than the
    /// connection keeps for the next wait.
    pub(crate) fn drop_idle_subscriptions(&self) {
        self.in_background(|store| async move {
            store
                .backend
                .drop_idle(&*store.wakes, BACKGROUND_TIMEOUT)
                .await;
        });
    }

    /// Puts this connection in the queue for `lock_key` (it keeps its place if already
    /// there), under its marked name when it listens on its own wake channel (`own`).
    /// `Some(true)` when the lock turned out free, `None` when queueing failed (an ACL
    /// without sorted sets, say): the waiter then only polls.
    async fn enqueue(&self, lock_key: &[u8], own: bool, timeout: Duration) -> Option<bool> {
        let marked;
        let id = if own {
            marked = format!("{}{}", self.id, keys::WAKE_MARK);
            &marked
        } else {
            &self.id
        };
        let enqueue = Enqueue {
            lock_key,
            id,
            score: wake::queue_score(),
            lifetime: wake::QUEUE_LIFETIME,
        };
        let channel = wake::channel(lock_key);
        let turns = self.wakes.turns(&channel);
        let free = self.backend.enqueue(&enqueue, timeout).await.ok()?;
        self.wakes.mark_queued_after(&channel, true, turns);
        Some(free)
    }
    /// Makes a lock's waiters wakeable, in the background: the connection subscribes to the
    /// lock's channel, then queues for the lock. No waiter waits for either (its poll is the
    /// safety net); if the lock turns out free meanwhile, a waiter is woken to try.
    /// A fair lock's waiters only subscribe: their attempts keep their places in its line.
    /// On a store that grants, a waiter listens on this connection's grant channel of the
    /// lock instead, and the first waiter tries at once: its attempt joins the lock's ring.
    /// Done again when the subscription was lost while it ran (a cluster's node gave the
    /// slot away meanwhile, see `Wakes::end_preparing`): the waiter woken by the loss found
    /// it under way, and would otherwise be left to its poll.
    pub fn prepare_wake(self: &Arc<Self>, lock_key: Vec<u8>, timeout: Duration, fair: bool) {
        let channel = wake::channel(&lock_key);
        if !self.wakes.begin_preparing(&channel) {
            return;
        }
        let store = self.clone();
        spawn(async move {
            loop {
                store.prepare_once(&lock_key, &channel, timeout, fair).await;
                if !store.wakes.end_preparing(&channel) {
                    break;
                }
            }
        });
    }

    /// One run of `prepare_wake`'s work.
    async fn prepare_once(&self, lock_key: &[u8], channel: &[u8], timeout: Duration, fair: bool) {
        if !fair && self.grants() {
            let grants = keys::grant_channel(lock_key, &self.id);
            if self.listen(&grants, timeout).await && self.wakes.needs_queueing(channel) {
                self.wakes.wake_local(channel);
            }
            return;
        }
        // Queued only where a wake can reach us: a wake popped for a connection that is
        // not listening would be lost to every waiter.
        if self.listen(channel, timeout).await && !fair && self.wakes.needs_queueing(channel) {
            // Our own wake channel too, where the store can tell who hears it: a release
            // then skips us once we are gone (a process killed while queued) instead of
            // losing its wake on us. The released channel stays: releases of earlier
            // versions, and of stores that cannot tell, announce there. Both stay
            // subscribed between waits, so no section pays for either.
            let own = self.checks_wakes()
                && self
                    .backend
                    .listen(
                        &keys::wake_channel(lock_key, &self.id),
                        &*self.wakes,
                        timeout,
                    )
                    .await;
            if self.enqueue(lock_key, own, timeout).await == Some(true) {
                self.wakes.wake_local(channel);
            }
        }
    }

    /// Subscribes to `channel` for its waiters, trying again after short pauses while they
    /// wait: a subscription that failed (a cluster's node still connecting, a connection
    /// dropped as it was sent) would otherwise leave them to their poll, which may be
    /// `retryDelayMs` (30 s for maestro) away. `false` once nobody waits any more.
    /// Tries stop once `timeout` has passed: a server that does not answer is the watchdog's
    /// to notice, not ours to keep asking.
    async fn listen(&self, channel: &[u8], timeout: Duration) -> bool {
        let started = tokio::time::Instant::now();
        for pause in LISTEN_PAUSES {
            if self.backend.listen(channel, &*self.wakes, timeout).await {
                return true;
            }
            let waited_for = self.wakes.has_waiters(&wake::entry_of(channel));
            if !waited_for || started.elapsed() + pause >= timeout {
                return false;
            }
            tokio::time::sleep(pause).await;
        }
        self.backend.listen(channel, &*self.wakes, timeout).await
    }

    pub async fn ensure_scripts(
        &self,
        timeout: Duration,
        scripts_for: ScriptsFor,
    ) -> Result<(), LockError> {
        self.backend.prepare(timeout, scripts_for).await
    }

    pub fn scripts_ready(&self) -> bool {
        self.backend.is_prepared()
    }

    /// Whether an attempt may leave the runtime now: no restart quarantine is on (see
    /// `LockStore::gate_open`).
    pub fn gate_open(&self) -> bool {
        self.backend.gate_open()
    }

    /// Another connection to the server (the JS thread's socket) broke: the gate is learned
    /// again before the next attempt leaves the runtime.
    pub fn forget_gate(&self) {
        self.backend.forget_gate()
    }

    /// See `LockStore::pass_gate`: for the lock `key` names, made only when a quarantine is
    /// on, as the store tells (`gate_open`): an attempt without one allocates nothing for it.
    pub async fn pass_gate<'k>(
        &self,
        key: impl FnOnce() -> std::borrow::Cow<'k, [u8]>,
        timeout: Duration,
    ) -> Result<(), LockError> {
        if self.gate_open() {
            return Ok(());
        }
        self.backend.pass_gate(&key(), timeout).await
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
