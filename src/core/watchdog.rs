//! One refresh scheduler per connection for every lock kept alive through it. Each tick sends
//! a single pipeline with one refresh per lock that is due, so 10,000 held locks cost one
//! round trip per tick, not 10,000. A lock whose refresh fails, or whose TTL runs out before
//! Redis confirms one, is reported lost at once; the watchdog never waits past a deadline.

use super::error::LockError;
use super::store::Store;
use super::sync::lock;
use super::watched::{Clock, Entry, Table};
pub use super::watched::{Limits, Pair, Target};
use redis::{Cmd, ErrorKind, Pipeline, RedisResult, ServerErrorKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Where watched locks' news goes; one sink may serve many locks, told apart by the tag
/// each was watched with. Called from the runtime thread, never under a lock.
pub trait Sink: Send + Sync {
    /// Redis confirmed the TTL `ttl` for a refresh sent at `sent`.
    fn refreshed(&self, tag: u32, sent: std::time::Instant, ttl: Duration);
    /// The lock is gone; `last` is what was last confirmed of it.
    fn lost(&self, tag: u32, error: LockError, last: Confirmed);
}

/// Proof that the JavaScript thread is still running, updated by the binding.
pub struct Heartbeat {
    origin: std::time::Instant,
    last_ms: AtomicU64,
}

impl Default for Heartbeat {
    fn default() -> Self {
        Heartbeat {
            origin: std::time::Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }
}

impl Heartbeat {
    pub fn beat(&self) {
        let ms = self.origin.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    pub(crate) fn last(&self) -> Instant {
        Instant::from_std(self.origin + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

#[derive(Default)]
struct State {
    entries: Table,
    running: bool,
}

pub struct Watchdog {
    store: Arc<Store>,
    clock: Clock,
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
}

/// What the watchdog last confirmed of a lock it keeps alive.
#[derive(Debug, Clone, Copy)]
pub struct Confirmed {
    /// Until when the lock counts as ours by our clock.
    pub deadline: std::time::Instant,
    /// When Redis expires it, as far as we know: the TTL from the last confirmed request.
    pub expires_at_ms: u64,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Refreshes sent in one pipeline at most.
const REFRESH_CHUNK: usize = 1024;

impl Watchdog {
    /// The watchdog of `store`'s connection, created on first use.
    pub fn of(store: &Arc<Store>) -> Arc<Watchdog> {
        let mut slot = store.watchdog_slot();
        if let Some(watchdog) = slot.upgrade() {
            return watchdog;
        }
        let watchdog = Arc::new(Watchdog {
            store: store.clone(),
            clock: Clock::default(),
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            pipelines: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
        });
        *slot = Arc::downgrade(&watchdog);
        watchdog
    }

    pub fn stats(&self) -> Stats {
        Stats {
            pipelines: self.pipelines.load(Ordering::Relaxed),
            refreshes: self.refreshes.load(Ordering::Relaxed),
            watched: lock(&self.state).entries.len() as u64,
        }
    }

    /// Loads the scripts ahead of the first tick, so every refresh is one round trip.
    pub async fn prepare(&self, timeout: Duration) -> Result<(), LockError> {
        self.store.ensure_scripts(timeout).await
    }

    /// Stops keeping lock `id` alive (a no-op when it is not watched any more).
    pub fn stop(&self, id: u64) {
        if lock(&self.state).entries.remove(id).is_some() {
            // Lets the scheduler exit now when this was its last lock.
            self.wake.notify_one();
        }
    }

    /// What was last confirmed of lock `id`; `None` once it is lost or no longer watched.
    pub fn confirmed(&self, id: u64) -> Option<Confirmed> {
        lock(&self.state)
            .entries
            .get(id)
            .map(|entry| entry.confirmed(&self.clock))
    }

    /// Starts keeping `target` alive; the answer names it for `stop` (never 0). `sent` is
    /// when the request that last set its TTL was sent; news goes to `sink` with `tag`.
    /// Must be called on the runtime (it may start the scheduler task).
    pub fn watch_id(
        self: &Arc<Self>,
        target: Target,
        sent: std::time::Instant,
        limits: Limits,
        sink: Arc<dyn Sink>,
        tag: u32,
    ) -> u64 {
        let sent = Instant::from_std(sent);
        let entry = Entry::new(target, &self.clock, sent, limits, sink, tag);
        let mut state = lock(&self.state);
        let id = state.entries.insert(entry);
        if !state.running {
            state.running = true;
            tokio::spawn(self.clone().run());
        } else {
            self.wake.notify_one();
        }
        id
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

    async fn run(self: Arc<Self>) {
        loop {
            let now = self.clock.ms(Instant::now());
            let mut lost = Vec::new();
            let mut due = Vec::new();
            let mut wake_at = now + 3_600_000;
            {
                let mut state = lock(&self.state);
                let mut gone = Vec::new();
                for (id, entry) in state.entries.iter_mut() {
                    if let Some(err) = entry.verdict(now, &self.clock) {
                        lost.push(Lost::of(entry, err, &self.clock));
                        gone.push(id);
                        continue;
                    }
                    if entry.is_due(now) {
                        entry.in_flight = true;
                        due.push(id);
                    }
                    wake_at = wake_at.min(entry.next_event(&self.clock));
                }
                for id in gone {
                    state.entries.remove(id);
                }
                if state.entries.is_empty() {
                    state.running = false;
                    drop(state);
                    report_lost(lost);
                    return;
                }
            }
            report_lost(lost);
            if !due.is_empty() {
                tokio::spawn(self.clone().refresh(due));
            }
            tokio::select! {
                _ = tokio::time::sleep_until(self.clock.at(wake_at)) => {}
                _ = self.wake.notified() => {}
                _ = self.store.dropped().notified() => self.recheck_all(),
            }
        }
    }

    /// The connection dropped (Redis restarted, failed over, or a call timed out): every lock
    /// may be gone, so refresh them all now. The refresh waits for the reconnection and
    /// reports a lost lock the moment Redis answers.
    fn recheck_all(&self) {
        let now = self.clock.ms(Instant::now());
        for (_, entry) in lock(&self.state).entries.iter_mut() {
            entry.due_now(now);
        }
    }

    /// Refreshes the locks `due`, a pipeline of at most `REFRESH_CHUNK` of them at a time:
    /// one round trip each, and a tick's memory stays small however many locks are held.
    async fn refresh(self: Arc<Self>, due: Vec<u64>) {
        for chunk in due.chunks(REFRESH_CHUNK) {
            self.refresh_chunk(chunk).await;
        }
        self.wake.notify_one();
    }

    /// Sends one pipeline for `ids` and files the answers.
    async fn refresh_chunk(&self, ids: &[u64]) {
        let sent = self.clock.ms(Instant::now());
        let (present, commands, deadline) = {
            let state = lock(&self.state);
            let mut present = Vec::with_capacity(ids.len());
            let mut commands = Vec::with_capacity(ids.len());
            let mut deadline = u64::MAX;
            for &id in ids {
                // Released or given up since it was found due.
                let Some(entry) = state.entries.get(id) else {
                    continue;
                };
                present.push(id);
                commands.push(entry.command());
                deadline = deadline.min(entry.deadline_ms());
            }
            (present, commands, deadline)
        };
        if present.is_empty() {
            return;
        }
        // No answer is worth waiting for past the earliest deadline in the chunk.
        let timeout = ms(deadline.saturating_sub(sent)).max(ms(1));
        let replies = self.send(commands, timeout).await;
        let now = self.clock.ms(Instant::now());
        let sent_at = self.clock.at(sent).into_std();
        let mut refreshed = Vec::new();
        let mut lost = Vec::new();
        {
            let mut state = lock(&self.state);
            for (id, reply) in present.into_iter().zip(replies) {
                let Some(entry) = state.entries.get_mut(id) else {
                    continue; // released or given up while the refresh was in flight
                };
                entry.in_flight = false;
                match reply {
                    Ok(1) => {
                        entry.refreshed(sent);
                        refreshed.push((entry.sink.clone(), entry.tag, entry.ttl_for_sink()));
                    }
                    Ok(_) => {
                        let err = LockError::Lost {
                            key: entry.name(),
                            reason: "it was deleted or taken by another holder".into(),
                        };
                        lost.push(Lost::of(entry, err, &self.clock));
                        state.entries.remove(id);
                    }
                    // Redis unreachable or slow: try again soon (so a lock is re-checked
                    // within 50 ms of Redis answering again); the deadline decides.
                    Err(_) => {
                        let after = (entry.every() / 4).clamp(ms(10), ms(50));
                        entry.retry_in(now, after);
                    }
                }
            }
        }
        for (sink, tag, ttl) in refreshed {
            sink.refreshed(tag, sent_at, ttl);
        }
        report_lost(lost);
    }

    /// One result per command; after a NOSCRIPT (Redis restarted or flushed) the script is
    /// loaded and those commands are sent once more.
    async fn send(&self, commands: Vec<Cmd>, timeout: Duration) -> Vec<RedisResult<i64>> {
        let deadline = Instant::now() + timeout;
        let count = commands.len();
        let mut pipe = Pipeline::with_capacity(count);
        pipe.ignore_errors();
        for command in commands {
            pipe.add_command(command);
        }
        self.pipelines.fetch_add(1, Ordering::Relaxed);
        self.refreshes.fetch_add(count as u64, Ordering::Relaxed);
        let mut replies = match self.store.pipeline(&pipe, timeout).await {
            Ok(replies) if replies.len() == count => replies,
            _ => return unreachable_replies(count),
        };
        let missing: Vec<usize> = (0..replies.len())
            .filter(|&i| is_noscript(&replies[i]))
            .collect();
        if missing.is_empty() {
            return replies;
        }
        self.store.scripts_lost();
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(ms(1));
        if self.prepare(left).await.is_err() {
            return unreachable_replies(count);
        }
        let commands = pipe.cmd_iter().cloned().collect::<Vec<Cmd>>();
        let mut retry = Pipeline::with_capacity(missing.len());
        retry.ignore_errors();
        for &i in &missing {
            if let Some(cmd) = commands.get(i) {
                retry.add_command(cmd.clone());
            }
        }
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(ms(1));
        match self.store.pipeline(&retry, left).await {
            Ok(again) if again.len() == missing.len() => {
                for (i, reply) in missing.into_iter().zip(again) {
                    replies[i] = reply;
                }
                replies
            }
            _ => unreachable_replies(count),
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn is_noscript(reply: &RedisResult<i64>) -> bool {
    matches!(reply, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
}

fn unreachable_replies(n: usize) -> Vec<RedisResult<i64>> {
    (0..n)
        .map(|_| Err((ErrorKind::Io, "no reply from Redis").into()))
        .collect()
}

/// A loss to report once the state's lock is let go.
struct Lost {
    sink: Arc<dyn Sink>,
    tag: u32,
    error: LockError,
    last: Confirmed,
}

impl Lost {
    fn of(entry: &Entry, error: LockError, clock: &Clock) -> Lost {
        Lost {
            sink: entry.sink.clone(),
            tag: entry.tag,
            error,
            last: entry.confirmed(clock),
        }
    }
}

fn report_lost(lost: Vec<Lost>) {
    for loss in lost {
        loss.sink.lost(loss.tag, loss.error, loss.last);
    }
}

/// Kept with the store so every user of one connection shares one scheduler.
pub type Slot = Mutex<Weak<Watchdog>>;
