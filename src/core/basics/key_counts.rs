//! Hand-overs and wakes per lock key, kept only while a `watch` asks for them (issue 27,
//! docs/plans/watch-handovers.md): until the first request, and again once none came for
//! `IDLE`, a count costs one relaxed load and nothing else. While on, the map is bounded: keys
//! past `MAX_KEYS` are counted together, so a watch cannot grow a process's memory.
//!
//! Counts are totals since the map was made (its `session`): a watcher takes the difference
//! between two answers itself, so several watchers need no state here each.

use super::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where `watch` asks for these counts (plain pub/sub: a cluster broadcasts PUBLISH to every
/// node); `proto/watch.rs` says what is sent there.
pub const CHANNEL: &[u8] = b"native-redis-lock:watch";

/// The most keys counted one by one; the rest go to `KeyTally::others`.
pub const MAX_KEYS: usize = 10_000;
/// How long the map is kept after the last request: a few of `watch`'s frames.
pub const IDLE: Duration = Duration::from_secs(5);
/// Request ids remembered, so that a process with several connections to a server (or a
/// Redlock's nodes) answers each request once.
const REMEMBERED: usize = 64;
/// The most requests answered within one second: a flood of requests (anyone who may PUBLISH
/// on the server can send them) must not make every process publish its map at its rate.
/// Watches at their default interval stay far below it.
pub const ANSWERS_PER_SECOND: u32 = 20;

/// What happened to a waiter of a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEvent {
    /// Handed the lock by a release: one of its own process, or another's grant.
    HandedOver,
    /// Woken by a release, to try again.
    Woken,
}

/// The counts of one key (or of the keys past the bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerKey {
    pub handed_over: u64,
    pub woken: u64,
}

impl PerKey {
    fn add(&mut self, event: KeyEvent) {
        match event {
            KeyEvent::HandedOver => self.handed_over += 1,
            KeyEvent::Woken => self.woken += 1,
        }
    }
}

/// What a request is answered with.
#[derive(Debug, PartialEq, Eq)]
pub struct KeyTally {
    /// Which map the totals are of: a new one starts from zero.
    pub session: u64,
    /// The keys the request's filter kept, with their totals.
    pub keys: Vec<(Vec<u8>, PerKey)>,
    /// The totals of the keys past `MAX_KEYS`.
    pub others: PerKey,
}

struct Book {
    keys: HashMap<Vec<u8>, PerKey>,
    others: PerKey,
    asked: Instant,
    session: u64,
    answered: VecDeque<Vec<u8>>,
    /// When the current second of answers began, and how many were given in it.
    second: Instant,
    in_second: u32,
}

/// The per-key counts of one process (`WATCH`), or of a test.
pub struct KeyWatch {
    on: AtomicBool,
    book: Mutex<Option<Book>>,
    sessions: AtomicU64,
}

/// The process's counts, which every lock operation counts into and every connection answers
/// requests from.
pub static WATCH: KeyWatch = KeyWatch::new();

impl Default for KeyWatch {
    fn default() -> Self {
        KeyWatch::new()
    }
}

impl KeyWatch {
    pub const fn new() -> Self {
        KeyWatch {
            on: AtomicBool::new(false),
            book: Mutex::new(None),
            sessions: AtomicU64::new(0),
        }
    }

    /// Whether counts are kept now.
    pub fn is_on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// Counts `event` for the Redis lock key `key` names, if a watch asked lately (`key` is
    /// asked for only then: it may allocate).
    #[inline]
    pub fn count<K: AsRef<[u8]>>(&self, event: KeyEvent, key: impl FnOnce() -> K) {
        if self.on.load(Relaxed) {
            self.count_watched(event, key().as_ref(), Instant::now());
        }
    }

    #[cold]
    pub fn count_watched(&self, event: KeyEvent, key: &[u8], now: Instant) {
        let mut book = lock(&self.book);
        let Some(kept) = book.as_mut() else {
            return;
        };
        if now.saturating_duration_since(kept.asked) > IDLE {
            *book = None;
            self.on.store(false, Relaxed);
            return;
        }
        let room = kept.keys.len() < MAX_KEYS;
        match kept.keys.get_mut(key) {
            Some(counts) => counts.add(event),
            None if room => kept.keys.entry(key.to_vec()).or_default().add(event),
            None => kept.others.add(event),
        }
    }

    /// A watch's request `id`: counting goes on (or starts) for `IDLE` more, and the totals of
    /// the keys `keep` accepts are the answer. `None` for a request answered already, or past
    /// `ANSWERS_PER_SECOND` (which still keeps counting on).
    pub fn asked(&self, id: &[u8], keep: impl Fn(&[u8]) -> bool, now: Instant) -> Option<KeyTally> {
        let mut book = lock(&self.book);
        let stale = (book.as_ref()).is_none_or(|b| now.saturating_duration_since(b.asked) > IDLE);
        if stale {
            *book = Some(Book {
                keys: HashMap::new(),
                others: PerKey::default(),
                asked: now,
                session: self.sessions.fetch_add(1, Relaxed) + 1,
                answered: VecDeque::new(),
                second: now,
                in_second: 0,
            });
        }
        let kept = book.as_mut()?;
        if kept.answered.iter().any(|seen| seen == id) {
            return None;
        }
        if now.saturating_duration_since(kept.second) >= Duration::from_secs(1) {
            kept.second = now;
            kept.in_second = 0;
        }
        if kept.in_second == ANSWERS_PER_SECOND {
            return None;
        }
        kept.in_second += 1;
        if kept.answered.len() == REMEMBERED {
            kept.answered.pop_front();
        }
        kept.answered.push_back(id.to_vec());
        kept.asked = now;
        self.on.store(true, Relaxed);
        let keys = (kept.keys.iter())
            .filter(|(key, _)| keep(key))
            .map(|(key, counts)| (key.clone(), *counts))
            .collect();
        Some(KeyTally {
            session: kept.session,
            keys,
            others: kept.others,
        })
    }
}

#[cfg(test)]
#[path = "key_counts_tests.rs"]
mod tests;
