//! Hand-overs and wakes per lock key, kept only while a `watch` asks for them (issue 27,
//! docs/plans/watch-handovers.md): until the first request, and again once none came for
//! `IDLE`, a count costs one relaxed load and nothing else. While on, the map is bounded: keys
//! past `MAX_KEYS` are counted together, so a watch cannot grow a process's memory.
//!
//! Counts are totals since the map was made (its `session`): a watcher takes the difference
//! between two answers itself, so several watchers need no state here each.
//!
//! Each `Store` keeps its own (`ops/store.rs`): an answer holds the counts of the server whose
//! connection heard the request, never those of `memory://` or of another server or db.

use super::error::LockError;
use super::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// Where `watch` asks for these counts (plain pub/sub: a cluster broadcasts PUBLISH to every
/// node); `proto/watch.rs` says what is sent there.
pub const CHANNEL: &[u8] = b"native-redis-lock:watch";

/// `NATIVE_REDIS_LOCK_WATCH=off` keeps a process out of `watch` altogether: its connections
/// never subscribe to `CHANNEL`, so no answer tells anyone its lock keys. `on` (or unset) is
/// the default; any other value fails every connection made, naming the variable.
pub const WATCH_ENV: &str = "NATIVE_REDIS_LOCK_WATCH";

/// What `WATCH_ENV` says, read once: on, off, or the value that is neither.
static WATCHABLE: LazyLock<Result<bool, String>> =
    LazyLock::new(|| match std::env::var_os(WATCH_ENV) {
        None => Ok(true),
        Some(value) => match value.to_str() {
            Some("on") => Ok(true),
            Some("off") => Ok(false),
            _ => Err(value.to_string_lossy().into_owned()),
        },
    });

/// Whether this process answers `watch` (`WATCH_ENV`).
pub fn watchable() -> bool {
    matches!(*WATCHABLE, Ok(true))
}

/// `WATCH_ENV`'s value, checked as a connection is made.
pub fn check_watch_env() -> Result<(), LockError> {
    match &*WATCHABLE {
        Ok(_) => Ok(()),
        Err(value) => Err(LockError::invalid_range(
            WATCH_ENV,
            format!("{WATCH_ENV} must be \"on\" or \"off\", got {value:?}"),
        )),
    }
}

/// The most keys counted one by one; the rest go to `KeyTally::others`.
pub const MAX_KEYS: usize = 10_000;
/// The most keys one answer names, the busiest; the rest go to its `others`, so an answer
/// stays a small message.
pub const MAX_ANSWERED: usize = 1000;
/// How long the map is kept after the last request: a few of `watch`'s frames.
pub const IDLE: Duration = Duration::from_secs(5);
/// Request ids remembered, so that a store whose nodes all hear a request (a Redlock's) answers
/// it once.
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

/// What a request is answered with: a copy of the map, taken under its lock and read (filtered,
/// cut, written out) after, away from the thread that counts.
#[derive(Debug, PartialEq, Eq)]
pub struct KeyTally {
    /// Which map the totals are of: a new one starts from zero.
    pub session: u64,
    /// Every key counted one by one, with its totals.
    pub keys: Vec<(Vec<u8>, PerKey)>,
    /// The totals of the keys past `MAX_KEYS`.
    pub others: PerKey,
}

impl KeyTally {
    /// Only the keys `keep` accepts, at most `MAX_ANSWERED` of them (the most hand-overs and
    /// wakes), the others kept added into `others`.
    pub fn narrowed(mut self, keep: impl Fn(&[u8]) -> bool) -> KeyTally {
        self.keys.retain(|(key, _)| keep(key));
        if self.keys.len() > MAX_ANSWERED {
            let busy = |(_, counts): &(Vec<u8>, PerKey)| {
                std::cmp::Reverse(counts.handed_over.saturating_add(counts.woken))
            };
            self.keys.select_nth_unstable_by_key(MAX_ANSWERED - 1, busy);
            for (_, counts) in self.keys.drain(MAX_ANSWERED..) {
                self.others.handed_over += counts.handed_over;
                self.others.woken += counts.woken;
            }
        }
        self
    }
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

/// The per-key counts of one store (one connection's server), or of a test.
pub struct KeyWatch {
    on: AtomicBool,
    book: Mutex<Option<Book>>,
    sessions: AtomicU64,
}

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
    /// asked for only then: it may allocate). An empty key names no lock and is not counted.
    #[inline]
    pub fn count<K: AsRef<[u8]>>(&self, event: KeyEvent, key: impl FnOnce() -> K) {
        if self.on.load(Relaxed) {
            self.count_watched(event, key().as_ref(), Instant::now());
        }
    }

    #[cold]
    pub fn count_watched(&self, event: KeyEvent, key: &[u8], now: Instant) {
        if key.is_empty() {
            return;
        }
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

    /// Drops the map once no request came for `IDLE`, when no count came to do it: asked a
    /// little after the last answer, so an idle process does not keep a watch's map.
    pub fn expire(&self, now: Instant) {
        let mut book = lock(&self.book);
        if (book.as_ref()).is_some_and(|b| now.saturating_duration_since(b.asked) > IDLE) {
            *book = None;
            self.on.store(false, Relaxed);
        }
    }

    /// A watch's request `id`: counting goes on (or starts) for `IDLE` more, and a copy of
    /// the totals is the answer. `None` for a request answered already, or past
    /// `ANSWERS_PER_SECOND` (which still keeps counting on).
    pub fn asked(&self, id: &[u8], now: Instant) -> Option<KeyTally> {
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
