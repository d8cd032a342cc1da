//! One refresh scheduler per connection for every lock kept alive through it. Each tick sends
//! a single pipeline with one refresh per lock that is due, so 10,000 held locks cost one
//! round trip per tick, not 10,000. A lock whose refresh fails, or whose TTL runs out before
//! Redis confirms one, is reported lost at once; the watchdog never waits past a deadline.

use super::clock::validity;
use super::error::LockError;
use super::scripts;
use super::store::Store;
use super::sync::lock;
use redis::{Cmd, ErrorKind, Pipeline, RedisResult, ServerErrorKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Where a watched lock's news goes. Called from the runtime thread, never under a lock.
pub trait Sink: Send + Sync {
    /// Redis confirmed the TTL `ttl` for a refresh sent at `sent`.
    fn refreshed(&self, sent: std::time::Instant, ttl: Duration);
    /// The lock is gone; `last` is what was last confirmed of it.
    fn lost(&self, error: LockError, last: Confirmed);
}

/// What to keep alive: the refresh script's keys and arguments.
pub struct Target {
    /// The lock's name as the user knows it, for messages.
    pub name: String,
    /// `[token key]` or `[token key, data key]` (see refresh.lua).
    pub keys: Vec<Vec<u8>>,
    pub token: String,
    /// What the data key must still hold, when there is one.
    pub expected: Option<Vec<u8>>,
    pub ttl: Duration,
    /// Refresh this often, counted from the last refresh sent.
    pub every: Duration,
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

    fn last(&self) -> Instant {
        Instant::from_std(self.origin + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// Bounds on how long a lock is kept alive without its holder's say.
#[derive(Default)]
pub struct Limits {
    /// Stop refreshing once the heartbeat is older than this.
    pub stall: Option<(Arc<Heartbeat>, Duration)>,
    /// Stop refreshing at this moment, whatever happens.
    pub hold_until: Option<Instant>,
}

struct Entry {
    name: String,
    ttl: Duration,
    every: Duration,
    command: Cmd,
    deadline: Instant,
    next_due: Instant,
    in_flight: bool,
    limits: Limits,
    sink: Arc<dyn Sink>,
}

impl Entry {
    fn confirmed(&self) -> Confirmed {
        let sent = self.deadline.into_std() - validity(self.ttl);
        Confirmed {
            deadline: self.deadline.into_std(),
            expires_at_ms: super::clock::Stamp::at(sent).wall_ms + self.ttl.as_millis() as u64,
        }
    }

    /// Why this lock must be given up now, if it must.
    fn verdict(&self, now: Instant) -> Option<LockError> {
        let lost = |reason: &str| {
            Some(LockError::Lost {
                key: self.name.clone(),
                reason: reason.into(),
            })
        };
        if now >= self.deadline {
            return lost("its TTL ran out before Redis confirmed a refresh");
        }
        if self.limits.hold_until.is_some_and(|until| now >= until) {
            return lost("it was held for max_hold_ms");
        }
        if let Some((heartbeat, max)) = &self.limits.stall {
            if now >= heartbeat.last() + *max {
                return lost("the JavaScript thread was blocked for longer than max_stall_ms");
            }
        }
        None
    }

    fn next_event(&self) -> Instant {
        let mut at = self.deadline;
        if !self.in_flight {
            at = at.min(self.next_due);
        }
        if let Some(until) = self.limits.hold_until {
            at = at.min(until);
        }
        if let Some((heartbeat, max)) = &self.limits.stall {
            at = at.min(heartbeat.last() + *max);
        }
        at
    }

    /// Refreshing up to half an interval early makes any two groups of locks whose phases
    /// are less than half an interval apart merge into one tick, so however the acquisitions
    /// were spread, a steady state has at most two pipelines per interval. Early is safe: the
    /// TTL only gets longer.
    fn is_due(&self, now: Instant) -> bool {
        !self.in_flight && self.next_due <= now + self.every / 2
    }
}

#[derive(Default)]
struct State {
    entries: HashMap<u64, Entry>,
    next_id: u64,
    running: bool,
}

pub struct Watchdog {
    store: Arc<Store>,
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

struct Due {
    id: u64,
    command: Cmd,
}

impl Watchdog {
    /// The watchdog of `store`'s connection, created on first use.
    pub fn of(store: &Arc<Store>) -> Arc<Watchdog> {
        let mut slot = store.watchdog_slot();
        if let Some(watchdog) = slot.upgrade() {
            return watchdog;
        }
        let watchdog = Arc::new(Watchdog {
            store: store.clone(),
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
        if lock(&self.state).entries.remove(&id).is_some() {
            // Lets the scheduler exit now when this was its last lock.
            self.wake.notify_one();
        }
    }

    /// What was last confirmed of lock `id`; `None` once it is lost or no longer watched.
    pub fn confirmed(&self, id: u64) -> Option<Confirmed> {
        lock(&self.state).entries.get(&id).map(Entry::confirmed)
    }

    /// Starts keeping `target` alive; the answer names it for `stop`. `sent` is when the
    /// request that last set its TTL was sent. Must be called on the runtime (it may start
    /// the scheduler task).
    pub fn watch_id(
        self: &Arc<Self>,
        target: &Target,
        sent: std::time::Instant,
        limits: Limits,
        sink: Arc<dyn Sink>,
    ) -> u64 {
        let sent = Instant::from_std(sent);
        let mut command = Cmd::new();
        command
            .arg("EVALSHA")
            .arg(scripts::REFRESH.get_hash())
            .arg(target.keys.len())
            .arg(&target.keys)
            .arg(&target.token)
            .arg(target.ttl.as_millis() as u64);
        if let Some(expected) = &target.expected {
            command.arg(expected);
        }
        let entry = Entry {
            name: target.name.clone(),
            ttl: target.ttl,
            every: target.every,
            command,
            deadline: sent + validity(target.ttl),
            next_due: sent + target.every,
            in_flight: false,
            limits,
            sink,
        };
        let mut state = lock(&self.state);
        // From 1: callers use 0 for "not watched".
        state.next_id += 1;
        let id = state.next_id;
        state.entries.insert(id, entry);
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
        target: &Target,
        sent: std::time::Instant,
        limits: Limits,
        sink: Arc<dyn Sink>,
    ) -> Watch {
        Watch::new(self.clone(), self.watch_id(target, sent, limits, sink))
    }

    async fn run(self: Arc<Self>) {
        loop {
            let now = Instant::now();
            let mut lost = Vec::new();
            let mut due = Vec::new();
            let mut wake_at = now + Duration::from_secs(3600);
            {
                let mut state = lock(&self.state);
                state.entries.retain(|_, entry| match entry.verdict(now) {
                    Some(err) => {
                        lost.push((entry.sink.clone(), err, entry.confirmed()));
                        false
                    }
                    None => true,
                });
                if state.entries.is_empty() {
                    state.running = false;
                }
                for (id, entry) in state.entries.iter_mut() {
                    if entry.is_due(now) {
                        entry.in_flight = true;
                        due.push(Due {
                            id: *id,
                            command: entry.command.clone(),
                        });
                    }
                    wake_at = wake_at.min(entry.next_event());
                }
                if !state.running {
                    drop(state);
                    report_lost(lost);
                    return;
                }
            }
            report_lost(lost);
            if !due.is_empty() {
                tokio::spawn(self.clone().refresh(due, now));
            }
            tokio::select! {
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = self.wake.notified() => {}
                _ = self.store.dropped().notified() => self.recheck_all(),
            }
        }
    }

    /// The connection dropped (Redis restarted, failed over, or a call timed out): every lock
    /// may be gone, so refresh them all now. The refresh waits for the reconnection and
    /// reports a lost lock the moment Redis answers.
    fn recheck_all(&self) {
        let now = Instant::now();
        for entry in lock(&self.state).entries.values_mut() {
            entry.next_due = entry.next_due.min(now);
        }
    }

    /// Sends one pipeline for `due` and files the answers.
    async fn refresh(self: Arc<Self>, due: Vec<Due>, sent: Instant) {
        let timeout = self.batch_timeout(&due, sent);
        let replies = self.send(&due, timeout).await;
        let now = Instant::now();
        let mut refreshed = Vec::new();
        let mut lost = Vec::new();
        {
            let mut state = lock(&self.state);
            for (item, reply) in due.iter().zip(replies) {
                let Some(entry) = state.entries.get_mut(&item.id) else {
                    continue; // released or given up while the refresh was in flight
                };
                entry.in_flight = false;
                match reply {
                    Ok(1) => {
                        entry.deadline = sent + validity(entry.ttl);
                        entry.next_due = sent + entry.every;
                        refreshed.push((entry.sink.clone(), entry.ttl));
                    }
                    Ok(_) => {
                        let err = LockError::Lost {
                            key: entry.name.clone(),
                            reason: "it was deleted or taken by another holder".into(),
                        };
                        lost.push((entry.sink.clone(), err, entry.confirmed()));
                        state.entries.remove(&item.id);
                    }
                    // Redis unreachable or slow: try again soon (so a lock is re-checked
                    // within 50 ms of Redis answering again); the deadline decides.
                    Err(_) => entry.next_due = now + (entry.every / 4).clamp(ms(10), ms(50)),
                }
            }
        }
        for (sink, ttl) in refreshed {
            sink.refreshed(sent.into_std(), ttl);
        }
        report_lost(lost);
        self.wake.notify_one();
    }

    /// No answer is worth waiting for past the earliest deadline in the batch.
    fn batch_timeout(&self, due: &[Due], now: Instant) -> Duration {
        let state = lock(&self.state);
        due.iter()
            .filter_map(|d| state.entries.get(&d.id))
            .map(|e| e.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or_default()
            .max(ms(1))
    }

    /// One result per command; after a NOSCRIPT (Redis restarted or flushed) the script is
    /// loaded and those commands are sent once more.
    async fn send(&self, due: &[Due], timeout: Duration) -> Vec<RedisResult<i64>> {
        let deadline = Instant::now() + timeout;
        let mut pipe = Pipeline::with_capacity(due.len());
        pipe.ignore_errors();
        for item in due {
            pipe.add_command(item.command.clone());
        }
        self.pipelines.fetch_add(1, Ordering::Relaxed);
        self.refreshes
            .fetch_add(due.len() as u64, Ordering::Relaxed);
        let mut replies = match self.store.pipeline(&pipe, timeout).await {
            Ok(replies) if replies.len() == due.len() => replies,
            _ => return unreachable_replies(due.len()),
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
            return unreachable_replies(due.len());
        }
        let mut retry = Pipeline::with_capacity(missing.len());
        retry.ignore_errors();
        for &i in &missing {
            retry.add_command(due[i].command.clone());
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
            _ => unreachable_replies(due.len()),
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

fn report_lost(lost: Vec<(Arc<dyn Sink>, LockError, Confirmed)>) {
    for (sink, err, last) in lost {
        sink.lost(err, last);
    }
}

/// Kept with the store so every user of one connection shares one scheduler.
pub type Slot = Mutex<Weak<Watchdog>>;
