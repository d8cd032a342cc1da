//! The slots of a cluster whose calls go unanswered, and since when. A node that stalls for
//! a moment costs only its own calls (the connection is kept, see `Conduit::KEPT_ON_TIMEOUT`);
//! one that stays silent may have been replaced by a replica the crate's slot map does not
//! know yet (a paused or black-holed node answers no MOVED, and its socket may stay open for
//! minutes), or may hold the crate's slot refresh, and with it every request, on its socket.
//! Past `STUCK` of silence the connection is opened afresh, as on one server, which reads the
//! slot map again.
//!
//! And what a call left unanswered says at all (`SilenceBar`): a bound cut short by its
//! caller's own deadline passes while Redis is merely busy for a moment.

use crate::core::basics::sync::lock;
use crate::core::basics::validate::DEFAULT_COMMAND_TIMEOUT;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longer than a stall worth riding out (a fork, a slow command, a short pause), shorter
/// than a failover (the node timeout, 15 s by default, plus the election).
pub const STUCK: Duration = Duration::from_secs(5);

/// How long a connection's calls may go unanswered before the server counts as silent: the
/// shortest command timeout of those who call on it (`commandTimeoutMs`, per API object, while
/// the connection is shared by settings), the default until one says. A call bounded by less
/// (an attempt's own deadline plus its grace, a lease's remaining time) that gets no reply says
/// nothing of the connection: its replies keep their order, the late one is read and dropped.
/// Calls that each give up sooner still add up: a connection that answers none of them for
/// the bar (a dead peer whose socket never closes, met only by refreshes cut short by their
/// locks' deadlines) is as silent.
pub struct SilenceBar {
    /// In nanoseconds; `u64::MAX` until a caller tells its command timeout.
    shortest: AtomicU64,
    /// When the oldest call unanswered since the last answer went out.
    since: Mutex<Option<Instant>>,
    /// Whether `since` holds anything: an answered call looks no further when it does not.
    any: AtomicBool,
}

impl Default for SilenceBar {
    fn default() -> Self {
        SilenceBar {
            shortest: AtomicU64::new(u64::MAX),
            since: Mutex::new(None),
            any: AtomicBool::new(false),
        }
    }
}

impl SilenceBar {
    /// A caller of this connection gives up on a call after `command_timeout`.
    pub fn heed(&self, command_timeout: Duration) {
        let nanos = u64::try_from(command_timeout.as_nanos()).unwrap_or(u64::MAX);
        self.shortest.fetch_min(nanos, Ordering::Relaxed);
    }

    /// Whether no reply within `bound` shows the server silent, rather than busy a moment.
    pub fn shown_by(&self, bound: Duration) -> bool {
        bound >= self.bar()
    }

    /// A call sent at `sent` got no reply by `now`. Whether nothing has been answered for the
    /// bar since the oldest call still unanswered went out (the silence is then forgotten:
    /// the caller starts afresh).
    pub fn unanswered(&self, sent: Instant, now: Instant) -> bool {
        let mut since = lock(&self.since);
        let first = since.map_or(sent, |first| first.min(sent));
        if now.saturating_duration_since(first) < self.bar() {
            *since = Some(first);
            self.any.store(true, Ordering::Relaxed);
            return false;
        }
        *since = None;
        self.any.store(false, Ordering::Relaxed);
        true
    }

    /// A call was answered, or the connection was given up: no silence runs.
    pub fn heard(&self) {
        // A load first: this runs for every reply, and a store would bounce the cache line.
        if self.any.load(Ordering::Relaxed) && self.any.swap(false, Ordering::Relaxed) {
            *lock(&self.since) = None;
        }
    }

    fn bar(&self) -> Duration {
        match self.shortest.load(Ordering::Relaxed) {
            u64::MAX => DEFAULT_COMMAND_TIMEOUT,
            nanos => Duration::from_nanos(nanos),
        }
    }
}

#[derive(Default)]
pub struct Silences {
    /// Slot → when its first call still unanswered timed out.
    since: Mutex<HashMap<u16, Instant>>,
    /// Whether `since` holds anything: an answered call looks no further when it does not.
    any: AtomicBool,
}

impl Silences {
    /// A call on `slot` got no answer in time, `now`. Whether the slot has been silent for
    /// `STUCK` (the silences are then forgotten: the caller starts afresh).
    pub fn unanswered(&self, slot: u16, now: Instant) -> bool {
        let mut since = lock(&self.since);
        let first = *since.entry(slot).or_insert(now);
        self.any.store(true, Ordering::Relaxed);
        if now.saturating_duration_since(first) < STUCK {
            return false;
        }
        since.clear();
        self.any.store(false, Ordering::Relaxed);
        true
    }

    /// A call on the slot `slot_of` names was answered: the slot's node speaks.
    pub fn answered(&self, slot_of: impl FnOnce() -> Option<u16>) {
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        if let Some(slot) = slot_of() {
            let mut since = lock(&self.since);
            since.remove(&slot);
            self.any.store(!since.is_empty(), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_silent_past_stuck_starts_afresh_once() {
        let silences = Silences::default();
        let t0 = Instant::now();
        assert!(!silences.unanswered(7, t0));
        assert!(!silences.unanswered(8, t0 + STUCK / 2));
        assert!(!silences.unanswered(7, t0 + STUCK / 2));
        assert!(silences.unanswered(7, t0 + STUCK));
        // Forgotten: slot 8's silence counts afresh.
        assert!(!silences.unanswered(8, t0 + STUCK * 2));
    }

    #[test]
    fn only_a_bound_as_long_as_the_shortest_command_timeout_shows_silence() {
        let bar = SilenceBar::default();
        assert!(!bar.shown_by(Duration::from_millis(30)));
        assert!(bar.shown_by(DEFAULT_COMMAND_TIMEOUT));
        bar.heed(Duration::from_millis(800));
        bar.heed(Duration::from_millis(300));
        bar.heed(Duration::from_millis(900));
        // An attempt's 5 ms deadline plus its 25 ms grace, on a busy server.
        assert!(!bar.shown_by(Duration::from_millis(30)));
        assert!(!bar.shown_by(Duration::from_millis(299)));
        assert!(bar.shown_by(Duration::from_millis(300)));
        assert!(bar.shown_by(Duration::from_millis(800)));
    }

    #[test]
    fn calls_cut_short_add_up_to_a_silence_until_one_is_answered() {
        let bar = SilenceBar::default();
        bar.heed(Duration::from_millis(300));
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Attempts of 30 ms, one after another, none answered: silent once 300 ms have passed
        // since the first went out.
        assert!(!bar.unanswered(t0, t0 + ms(30)));
        assert!(!bar.unanswered(t0 + ms(100), t0 + ms(130)));
        assert!(bar.unanswered(t0 + ms(280), t0 + ms(310)));
        // Forgotten: a new silence counts from its own first call.
        assert!(!bar.unanswered(t0 + ms(320), t0 + ms(350)));
        // An answer in between ends it.
        bar.heard();
        assert!(!bar.unanswered(t0 + ms(600), t0 + ms(630)));
        // One call unanswered for the whole bar is silence by itself.
        assert!(bar.unanswered(t0 + ms(640), t0 + ms(940)));
    }

    #[test]
    fn an_answer_ends_its_slot_silence_only() {
        let silences = Silences::default();
        let t0 = Instant::now();
        assert!(!silences.unanswered(7, t0));
        assert!(!silences.unanswered(8, t0));
        silences.answered(|| Some(7));
        assert!(!silences.unanswered(7, t0 + STUCK));
        assert!(silences.unanswered(8, t0 + STUCK));
    }
}
