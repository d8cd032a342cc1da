//! One refresh scheduler per connection for every lock kept alive through it. Each tick sends
//! a single pipeline with one refresh per lock that is due, so 10,000 held locks cost one
//! round trip per tick, not 10,000. A lock whose refresh fails, or whose TTL runs out before
//! Redis confirms one, is reported lost at once; the watchdog never waits past a deadline.

use super::orphan::Orphan;
use super::schedule::Schedule;
use super::signals::{Confirmed, Sink};
use super::store::Store;
pub use super::watched::{Limits, Target};
use super::watched::{TickClock, Watched};
use crate::core::backend::lock_store::{LockStore, ScriptsFor};
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::proto::refresh::{Refresh, RefreshBatch};
use crate::core::wait::owner::{Freeing, Keeper, Owner};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Default)]
struct State {
    entries: Schedule,
    running: bool,
    /// When the scheduler means to wake next (ms): a lock that needs it earlier wakes it.
    wake_at: u64,
    /// Drops of the connection seen so far: a refresh sent before the last one cannot end
    /// the doubt it raised.
    drops: u64,
    /// The connection's last drop as of the last re-check of every lock: a wake-up that
    /// finds it unchanged came for some slots only (`Drops::signal_slot`).
    seen_drop: Option<std::time::Instant>,
}

pub struct Watchdog {
    store: Arc<Store>,
    clock: TickClock,
    state: Mutex<State>,
    wake: Notify,
    pipelines: AtomicU64,
    refreshes: AtomicU64,
}

/// Counters for tests and benchmarks: how much work the refreshes cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Pipelines sent (one round trip each).
    pub pipelines: u64,
    /// Refresh commands inside them.
    pub refreshes: u64,
    /// Locks being kept alive right now.
    pub watched: u64,
    /// Entries the scheduler looked at, to watch, stop, check or refresh them: what the
    /// bookkeeping costs, which must grow with the locks started, stopped and due, never
    /// with the number held.
    pub visited: u64,
}

/// A lock being kept alive; dropping it stops the refreshes.
pub struct Watch {
    id: u64,
    watchdog: Arc<Watchdog>,
}

impl Watch {
    pub fn new(watchdog: Arc<Watchdog>, id: u64) -> Self {
        Watch { id, watchdog }
    }

    pub fn stop(&self) {
        self.watchdog.stop(self.id);
    }

    /// Whether a refresh of this lock is on its way to Redis right now.
    pub fn refreshing(&self) -> bool {
        self.watchdog.refreshing(self.id)
    }

    /// Whether the lock is watched and not in doubt (see `Watchdog::certain`).
    pub fn certain(&self) -> bool {
        self.watchdog.certain(self.id)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Each connection's watchdog, by the address of its store. Kept here, not in the store, so
/// the dependency runs one way (the watchdog uses the store). A watchdog keeps its store
/// alive, so an entry that still upgrades names the live store at that address. A BTreeMap:
/// found in as few instructions as the slot in the store was (a hashed key costs twice that,
/// and this runs for every watched hold).
static WATCHDOGS: LazyLock<Mutex<BTreeMap<usize, Weak<Watchdog>>>> =
    LazyLock::new(|| Mutex::new(BTreeMap::new()));

/// Refreshes sent in one pipeline at most.
const REFRESH_CHUNK: usize = 1024;

impl Watchdog {
    /// The watchdog of `store`'s connection, created on first use.
    pub fn of(store: &Arc<Store>) -> Arc<Watchdog> {
        let at = Arc::as_ptr(store) as usize;
        let mut all = lock(&WATCHDOGS);
        if let Some(watchdog) = all.get(&at).and_then(Weak::upgrade) {
            return watchdog;
        }
        all.retain(|_, watchdog| watchdog.strong_count() > 0);
        let watchdog = Arc::new(Watchdog {
            store: store.clone(),
            clock: TickClock::default(),
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            pipelines: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
        });
        all.insert(at, Arc::downgrade(&watchdog));
        watchdog
    }

    pub fn stats(&self) -> Stats {
        let state = lock(&self.state);
        Stats {
            pipelines: self.pipelines.load(Ordering::Relaxed),
            refreshes: self.refreshes.load(Ordering::Relaxed),
            watched: state.entries.len() as u64,
            visited: state.entries.visited(),
        }
    }

    /// Loads the scripts ahead of the first tick, so every refresh is one round trip.
    pub async fn prepare(&self, timeout: Duration) -> Result<(), LockError> {
        // Only ever ahead of an acquisition: fails as its attempt would.
        self.store
            .ensure_scripts(timeout, ScriptsFor::Attempt)
            .await
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Stops keeping every lock of `owner` alive and hands back those to be released (not
    /// those left to their TTL, see `Limits::outlives_owner`).
    pub(crate) fn orphans_of(&self, owner: &Owner) -> Vec<Orphan> {
        let mut state = lock(&self.state);
        let ids: Vec<u64> = state
            .entries
            .iter_mut()
            .filter(|(_, entry)| entry.is_owned_by(owner))
            .map(|(id, _)| id)
            .collect();
        let orphans: Vec<Orphan> = ids
            .into_iter()
            .filter_map(|id| state.entries.remove(id))
            .filter(|entry| !entry.outlives_owner())
            .map(|entry| entry.into_orphan(&self.clock))
            .collect();
        drop(state);
        // Lets the scheduler exit now when those were its last locks.
        self.wake.notify_one();
        orphans
    }

    /// Stops keeping lock `id` alive (a no-op when it is not watched any more).
    ///
    /// Called on the JavaScript thread for every release: it only frees the slot, and wakes
    /// the scheduler only to drop the queued times of many stopped locks at once. The last
    /// lock's stop does not wake it: it exits when it next wakes and finds nothing to watch,
    /// and a lock watched before then finds it still running. Waking it to exit at once, and
    /// spawning it again for the next hold, cost two thread wake-ups per hold, more than the
    /// whole acquire and release when locks are taken one after another.
    pub fn stop(&self, id: u64) {
        let mut state = lock(&self.state);
        let Some(entry) = state.entries.remove(id) else {
            return;
        };
        let wake = state.entries.needs_rebuild();
        drop(state);
        drop(entry);
        if wake {
            self.wake.notify_one();
        }
    }

    /// The owner token of lock `id`, while it is watched.
    pub fn token(&self, id: u64) -> Option<String> {
        let state = lock(&self.state);
        let entry = state.entries.get(id)?;
        Some(String::from_utf8_lossy(entry.token()).into_owned())
    }

    /// What was last confirmed of lock `id`; `None` once it is lost or no longer watched.
    pub fn confirmed(&self, id: u64) -> Option<Confirmed> {
        lock(&self.state)
            .entries
            .get(id)
            .map(|entry| entry.confirmed(&self.clock))
    }

    /// Whether a refresh of lock `id` is on its way to Redis right now.
    pub fn refreshing(&self, id: u64) -> bool {
        lock(&self.state)
            .entries
            .get(id)
            .is_some_and(|entry| entry.in_flight)
    }

    /// Starts keeping `target` alive; the answer names it for `stop` (never 0). `sent` is
    /// when the request that last set its TTL was sent; news goes to `sink` with `tag`.
    /// Must be called on the runtime (it may start the scheduler task). The lock of an owner
    /// that has ended is released instead, and the answer is 0: nobody is left to use it.
    pub fn watch_id(
        self: &Arc<Self>,
        target: Target,
        sent: std::time::Instant,
        limits: Limits,
        sink: Arc<dyn Sink>,
        tag: u32,
    ) -> u64 {
        let sent = Instant::from_std(sent);
        let owner = limits.owner.clone();
        let entry = Watched::new(target, &self.clock, sent, limits, sink, tag);
        let enlisted = owner.as_ref().is_none_or(|owner| owner.enlist(self));
        let mut state = lock(&self.state);
        // Checked under the table's lock: an owner ending now either finds the entry in the
        // table or is seen gone here (see Owner::end).
        if !enlisted || owner.as_ref().is_some_and(Owner::is_gone) {
            drop(state);
            if !entry.outlives_owner() {
                tokio::spawn(entry.into_orphan(&self.clock).release(self.store.clone()));
            }
            return 0;
        }
        if state.entries.is_empty() {
            // Nothing else is watched: the drops heard so far concern this lock alone, which
            // is checked against them exactly below. Left to the scheduler, they would be
            // compared in whole ms on a clock that may start after both the drop and the
            // send (made at the first hold, each then reads 0), and the lock doubted.
            state.seen_drop = self.store.dropped().last();
        }
        let (id, at) = state.entries.insert(entry, &self.clock);
        if !state.running {
            state.running = true;
            state.wake_at = 0;
            tokio::spawn(self.clone().run());
        } else {
            self.wake_by(&mut state, at);
        }
        drop(state);
        // A drop between the request and now may have been heard before this lock was in
        // the table: it is in doubt from the start. Only it: the scheduler hears the drop
        // itself (its wake-up is kept until it waits) and doubts the others then, once. A
        // pass over the table here made each lock watched after a drop cost every lock held:
        // on a starved machine, whose calls time out (each timeout is a drop), a batch of
        // acquisitions cost k x n and starved the scheduler in turn.
        if self.store.dropped().since(sent.into_std()) {
            self.doubt(id);
        }
        id
    }

    /// Lock `id` is due now and in doubt until a refresh answers (see `recheck_all`).
    fn doubt(&self, id: u64) {
        let now = self.clock.ms(Instant::now());
        let told = {
            let mut state = lock(&self.state);
            let told = state.entries.doubt(id, now, &self.clock);
            self.wake_by(&mut state, now);
            told
        };
        if let Some((sink, tag)) = told {
            sink.suspended(tag);
        }
    }

    /// As `watch_id`, stopped when the answer is dropped.
    pub fn watch(
        self: &Arc<Self>,
        target: Target,
        sent: std::time::Instant,
        limits: Limits,
        sink: Arc<dyn Sink>,
        tag: u32,
    ) -> Watch {
        Watch::new(self.clone(), self.watch_id(target, sent, limits, sink, tag))
    }

    /// Wakes the scheduler when a lock needs it at `at` (ms), before it meant to wake.
    fn wake_by(&self, state: &mut State, at: u64) {
        if at < state.wake_at {
            state.wake_at = at;
            self.wake.notify_one();
        }
    }

    async fn run(self: Arc<Self>) {
        loop {
            let now = self.clock.ms(Instant::now());
            let (gone, due, wake_at) = {
                let mut state = lock(&self.state);
                let tick = state.entries.tick(now, &self.clock);
                if state.entries.is_empty() {
                    state.running = false;
                    drop(state);
                    report_lost(self.lost(tick.lost));
                    return;
                }
                let wake_at = state
                    .entries
                    .next_wake(&self.clock)
                    .unwrap_or(now + 3_600_000);
                state.wake_at = wake_at;
                (tick.lost, tick.due, wake_at)
            };
            report_lost(self.lost(gone));
            if !due.is_empty() {
                tokio::spawn(self.clone().refresh(due));
            }
            tokio::select! {
                _ = tokio::time::sleep_until(self.clock.at(wake_at)) => {}
                _ = self.wake.notified() => {}
                _ = self.store.dropped().notified() => self.recheck(),
            }
        }
    }

    /// The store signalled: the whole connection dropped, or a cluster node left calls on
    /// some slots unanswered (its connection kept), which puts those slots' locks alone in
    /// doubt.
    fn recheck(&self) {
        let drops = self.store.dropped();
        let slots = drops.take_slots();
        if lock(&self.state).seen_drop != drops.last() {
            self.recheck_all();
        } else if !slots.is_empty() {
            let now = self.clock.ms(Instant::now());
            let doubted = lock(&self.state)
                .entries
                .slots_due(now, &slots, &self.clock);
            for (sink, tag) in doubted {
                sink.suspended(tag);
            }
        }
    }

    /// The connection dropped (Redis restarted, failed over, or a call timed out): every lock
    /// may be gone, so refresh them all now. The refresh waits for the reconnection and
    /// reports a lost lock the moment Redis answers.
    fn recheck_all(&self) {
        let now = self.clock.ms(Instant::now());
        let last = self.store.dropped().last();
        // A drop stored while nothing was watched concerns only the locks sent before it.
        let dropped_at = last.map_or(now, |at| self.clock.ms(Instant::from_std(at)));
        let doubted = {
            let mut state = lock(&self.state);
            state.drops += 1;
            state.seen_drop = last;
            state.entries.all_due(now, dropped_at, &self.clock)
        };
        for (sink, tag) in doubted {
            sink.suspended(tag);
        }
    }

    /// Whether lock `id` is watched and not in doubt.
    pub fn certain(&self, id: u64) -> bool {
        lock(&self.state)
            .entries
            .get(id)
            .is_some_and(|entry| !entry.in_doubt)
    }

    fn lost(&self, gone: Vec<(Watched, LockError)>) -> Vec<Lost> {
        gone.into_iter()
            .map(|(entry, err)| Lost::of(&entry, err, &self.clock))
            .collect()
    }

    /// Refreshes the locks `due`, a pipeline of at most `REFRESH_CHUNK` of them at a time:
    /// one round trip each, and a tick's memory stays small however many locks are held.
    /// Each shard's locks go in rounds of their own, the shards' side by side: a round is
    /// filed when its answers are all in and times out at its own locks' earliest deadline,
    /// so a shard that does not answer costs only its own locks. (So on a cluster up to one
    /// chunk per slot is in flight at once: what the cluster sent per slot before, too.)
    async fn refresh(self: Arc<Self>, due: Vec<u64>) {
        let rounds = self.by_shard(due).into_iter().map(|ids| {
            let watchdog = &self;
            async move {
                for chunk in ids.chunks(REFRESH_CHUNK) {
                    watchdog.refresh_chunk(chunk).await;
                }
            }
        });
        futures_util::future::join_all(rounds).await;
    }

    /// `due` cut by the shard keeping each lock (`LockStore::refresh_shard`), each part in
    /// `due`'s order; one part where the store has one shard. Locks no longer watched are
    /// left out.
    fn by_shard(&self, due: Vec<u64>) -> Vec<Vec<u64>> {
        let backend = self.store.backend();
        let state = lock(&self.state);
        let shard = |id: u64| Some(backend.refresh_shard(state.entries.get(id)?.key()));
        // A store of one shard says so for any key: only its first lock still watched is
        // looked up.
        if !matches!(due.iter().find_map(|&id| shard(id)), Some(Some(_))) {
            return vec![due];
        }
        let mut parts: BTreeMap<u16, Vec<u64>> = BTreeMap::new();
        for id in due {
            if let Some(Some(at)) = shard(id) {
                parts.entry(at).or_default().push(id);
            }
        }
        parts.into_values().collect()
    }

    /// Sends one pipeline for `ids` and files the answers.
    async fn refresh_chunk(&self, ids: &[u64]) {
        let sent = self.clock.ms(Instant::now());
        let Some(batch) = self.batch(ids, sent) else {
            return;
        };
        let drops = lock(&self.state).drops;
        self.refreshes
            .fetch_add(batch.ids.len() as u64, Ordering::Relaxed);
        self.pipelines.fetch_add(1, Ordering::Relaxed);
        let refresh = (self.store.backend()).refresh(&batch.refresh, batch.timeout);
        let answers = match batch.doubt_after {
            Some(after) => self.doubting(refresh, &batch.ids, after).await,
            None => refresh.await,
        };
        let now = self.clock.ms(Instant::now());
        let sent_at = self.clock.at(sent).into_std();
        let mut refreshed = Vec::new();
        let mut resumed = Vec::new();
        let mut lost = Vec::new();
        {
            let mut state = lock(&self.state);
            let current = state.drops == drops;
            let mut next = u64::MAX;
            for (id, answer) in batch.ids.into_iter().zip(answers) {
                let Some(entry) = state.entries.get_mut(id) else {
                    continue; // released or given up while the refresh was in flight
                };
                entry.in_flight = false;
                match answer {
                    Some(true) => {
                        entry.refreshed(sent);
                        refreshed.push((entry.sink.clone(), entry.tag, entry.ttl_for_sink()));
                        if entry.in_doubt && current {
                            entry.in_doubt = false;
                            resumed.push((entry.sink.clone(), entry.tag));
                        } else if entry.in_doubt {
                            // Answered on the connection that dropped: ask again on the new one.
                            entry.retry_in(now, ms(10));
                        }
                    }
                    Some(false) => {
                        let err = LockError::Lost {
                            key: entry.name(),
                            // The refresh cannot tell these apart: it only finds the key not ours.
                            reason: "the key is gone or no longer ours (deleted, lost in a Redis restart or failover, or taken by another holder after it expired)".into(),
                        };
                        lost.push(Lost::of(entry, err, &self.clock));
                        state.entries.remove(id);
                    }
                    // Redis unreachable or slow: try again soon (so a lock is re-checked
                    // within 50 ms of Redis answering again); the deadline decides.
                    None => {
                        let after = (entry.every() / 4).clamp(ms(10), ms(50));
                        entry.retry_in(now, after);
                    }
                }
                if let Some(at) = state.entries.requeue(id, &self.clock) {
                    next = next.min(at);
                }
            }
            if state.entries.is_empty() {
                // Lets the scheduler exit now: its last lock was found gone.
                self.wake.notify_one();
            } else {
                self.wake_by(&mut state, next);
            }
        }
        for (sink, tag) in resumed {
            sink.resumed(tag);
        }
        for (sink, tag, ttl) in refreshed {
            sink.refreshed(tag, sent_at, ttl);
        }
        report_lost(lost);
    }

    /// `refresh`'s answers for the locks of `ids`, which are put in doubt (their holders
    /// told suspended) if the answers are not in `after` it was sent (`Batch::doubt_after`):
    /// the first round a quorum did not confirm in time tells, not the lock's deadline.
    async fn doubting(
        &self,
        refresh: impl Future<Output = Vec<Option<bool>>>,
        ids: &[u64],
        after: Duration,
    ) -> Vec<Option<bool>> {
        let mut refresh = std::pin::pin!(refresh);
        if let Ok(answers) = tokio::time::timeout(after, &mut refresh).await {
            return answers;
        }
        let told: Vec<(Arc<dyn Sink>, u32)> = {
            let mut state = lock(&self.state);
            (ids.iter())
                .filter_map(|&id| {
                    let entry = state.entries.get_mut(id)?;
                    let was = std::mem::replace(&mut entry.in_doubt, true);
                    (!was).then(|| (entry.sink.clone(), entry.tag))
                })
                .collect()
        };
        for (sink, tag) in told {
            sink.suspended(tag);
        }
        refresh.await
    }

    /// The batch refreshing the locks of `ids` still watched (see proto/refresh.rs), with
    /// their ids in the batch's order; `None` when none is.
    fn batch(&self, ids: &[u64], sent: u64) -> Option<Batch> {
        let state = lock(&self.state);
        let entries: Vec<(u64, &Watched)> = ids
            .iter()
            .filter_map(|&id| state.entries.get(id).map(|entry| (id, entry)))
            .collect();
        if entries.is_empty() {
            return None;
        }
        let (singles, pairs): (Vec<_>, Vec<_>) = entries.iter().partition(|(_, e)| e.is_single());
        let refresh = RefreshBatch::new(&refreshes(&singles), &refreshes(&pairs));
        // No answer is worth waiting for past the earliest deadline among them.
        let deadline = entries
            .iter()
            .map(|(_, e)| e.deadline_ms())
            .min()
            .unwrap_or(sent);
        let timeout = ms(deadline.saturating_sub(sent)).max(ms(1));
        // A round unconfirmed by the time the next was due is a failed one (see
        // `Caps::doubt_unconfirmed`).
        let every = entries.iter().map(|(_, e)| e.every()).min();
        let doubt_after =
            every.filter(|every| self.store.backend().caps().doubt_unconfirmed && *every < timeout);
        Some(Batch {
            refresh,
            doubt_after,
            ids: singles
                .iter()
                .chain(pairs.iter())
                .map(|(id, _)| *id)
                .collect(),
            timeout,
        })
    }
}

/// One round trip of refreshes, the ids of its locks in its order, and how long it may take.
struct Batch {
    refresh: RefreshBatch,
    ids: Vec<u64>,
    timeout: Duration,
    /// When its locks are put in doubt if it is still unanswered (`Watchdog::doubting`).
    doubt_after: Option<Duration>,
}

fn refreshes<'a>(of: &[&(u64, &'a Watched)]) -> Vec<Refresh<'a>> {
    of.iter().map(|(_, entry)| entry.refresh()).collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A loss to report once the state's lock is let go.
struct Lost {
    sink: Arc<dyn Sink>,
    tag: u32,
    error: LockError,
    last: Confirmed,
    token: Vec<u8>,
}

impl Lost {
    fn of(entry: &Watched, error: LockError, clock: &TickClock) -> Lost {
        Lost {
            sink: entry.sink.clone(),
            tag: entry.tag,
            error,
            last: entry.confirmed(clock),
            token: entry.token().to_vec(),
        }
    }
}

fn report_lost(lost: Vec<Lost>) {
    for loss in lost {
        loss.sink.lost(loss.tag, loss.error, loss.last, &loss.token);
    }
}

/// An ended owner's locks are released as its holder's release would have (see orphan.rs).
impl Keeper for Watchdog {
    fn forsake(&self, owner: &Owner) -> Vec<Freeing> {
        let store = self.store.clone();
        self.orphans_of(owner)
            .into_iter()
            .map(|orphan| Box::pin(orphan.release(store.clone())) as Freeing)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_watchdog_per_store_while_it_lives() {
        let store = crate::core::ops::test_support::locker(40411, "a:")
            .store()
            .clone();
        let other = crate::core::ops::test_support::locker(40412, "b:")
            .store()
            .clone();
        let first = Watchdog::of(&store);
        assert!(Arc::ptr_eq(&first, &Watchdog::of(&store)));
        assert!(!Arc::ptr_eq(&first, &Watchdog::of(&other)));
        let gone = Arc::downgrade(&first);
        drop(first);
        assert!(
            gone.upgrade().is_none(),
            "the registry holds no watchdog alive"
        );
        assert!(Arc::ptr_eq(&Watchdog::of(&store).store, &store));
    }
}
