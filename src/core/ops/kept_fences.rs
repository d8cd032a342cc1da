//! How long this connection knows each fence counter to live, from the replies of its own
//! transactions. A transaction that pushes a counter pushes it a quarter window beyond what
//! its lock needs, so the attempts at that key after it, until that quarter is used up, need
//! not push it at all: two commands fewer in each (see proto/acquire.rs).
//!
//! A handover of ours does the same (see `upkeep`): most need not touch the counter at all.
//! So does a script attempt on the caller's socket that won with its upkeep run (see
//! `won_by_script`): the next ones skip even reading the counter's TTL.
//! A Redlock's first attempt, a transaction on each node's socket, knows each node's counter
//! by its own replies only, under the fence key and the node (`AttemptTerms::node_push`).
//!
//! Beside it, when an attempt of ours last found the counter's lock held: for a while after,
//! the next first attempts at that lock are written as the script, which draws fences only
//! when it wins, not as the transaction, which draws two whatever it finds. Those are the
//! attempts likely to fail (a polled or contended lock), so the counter's growth stays two per
//! acquisition, as `watch` reads it (lib/cli/watch.js), and one command counts the two the
//! transaction drew in vain before (fast/mod.rs `count_missed`), not one per poll; a lock
//! nobody contends keeps the transaction, read in the same lookup.
//!
//! What is known stays true: nothing we send ever shortens a counter's life (the pushes are
//! `NX` and `GT`, the scripts push only a counter due, a window of 0 persists it). A counter
//! deleted by someone else comes back from its next draw without an expiry, which it gets
//! at the next push due (its fences restarted anyway, as with any counter deleted).

use crate::core::basics::sync::lock;
use crate::core::proto::acquire::pushed_for;
use crate::core::proto::release::FenceUpkeep;
use redis::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Counters known at most (about 100 KB); past that all is forgotten at once, which costs
/// the next attempt at each key its two commands, never a counter.
const KNOWN: usize = 1024;

/// How long after an attempt found a lock held its next attempts are the script's: long
/// enough for a poll every few seconds, or leader election's followers, to keep it.
const CONTENDED_FOR: Duration = Duration::from_secs(60);

/// Whether EXEC's answer shows the pushes ran: `[lock set?, counter, NX's, GT's, ...]`.
fn pushed(reply: &Value) -> bool {
    let Value::Array(items) = reply else {
        return false;
    };
    matches!(
        items.as_slice(),
        [
            Value::Okay | Value::SimpleString(_) | Value::Nil,
            Value::Int(_),
            Value::Int(_),
            Value::Int(_),
            ..
        ]
    )
}

/// What is known of one counter.
#[derive(Clone, Copy, Default)]
struct CounterNews {
    /// Until when a push of ours keeps it.
    kept: Option<Instant>,
    /// When an attempt of ours last found its lock held.
    held: Option<Instant>,
}

/// What a first attempt at a lock is to do, from what is known of its counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptNews {
    /// Whether a transaction must push the counter's expiry (see `due`).
    pub push: bool,
    /// Whether its lock was found held lately: the attempt is the script's.
    pub contended: bool,
}

#[derive(Default)]
pub struct KeptFences {
    known: Mutex<HashMap<Vec<u8>, CounterNews>>,
}

/// Whether a counter kept `until` must be pushed by an attempt needing it kept `needed`.
fn short_of(until: Option<Instant>, needed: Option<Instant>) -> bool {
    match (until, needed) {
        (Some(until), Some(needed)) => until < needed,
        _ => true,
    }
}

impl KeptFences {
    /// Whether an attempt sent now for a lock of `ttl` must push `fence_key`: unless a
    /// transaction of ours kept it `window_ms` past such a lock already. A window of 0 (kept
    /// forever) is persisted by every attempt.
    pub fn due(&self, fence_key: &[u8], ttl: Duration, window_ms: u64) -> bool {
        if window_ms == 0 {
            return true;
        }
        let until = lock(&self.known).get(fence_key).and_then(|news| news.kept);
        short_of(until, Self::needed(ttl, window_ms, Instant::now()))
    }

    /// `due`, and whether the lock was found held lately, in one look, for an attempt sent
    /// at `sent` (its stamp's instant, read once for both: a clock reading costs a pair on
    /// `memory://` some 20 ns).
    pub fn attempt(
        &self,
        fence_key: &[u8],
        ttl: Duration,
        window_ms: u64,
        sent: Instant,
    ) -> AttemptNews {
        let news = lock(&self.known)
            .get(fence_key)
            .copied()
            .unwrap_or_default();
        let push = window_ms == 0 || short_of(news.kept, Self::needed(ttl, window_ms, sent));
        let contended =
            (news.held).is_some_and(|at| sent.saturating_duration_since(at) < CONTENDED_FOR);
        AttemptNews { push, contended }
    }

    /// An attempt of ours found the lock of `fence_key` held.
    pub fn held(&self, fence_key: &[u8]) {
        self.note(fence_key, |news| news.held = Some(Instant::now()));
    }

    /// Until when a counter must be kept for a lock of `ttl` sent at `sent`, `None` past any
    /// clock.
    fn needed(ttl: Duration, window_ms: u64, sent: Instant) -> Option<Instant> {
        sent.checked_add(ttl)
            .and_then(|at| at.checked_add(Duration::from_millis(window_ms)))
    }

    /// `reply` answers a transaction sent at `sent` for a lock of `ttl`, which pushed
    /// `fence_key` (`pushed_for`) if the reply says so.
    pub fn answered(
        &self,
        reply: &Value,
        fence_key: &[u8],
        sent: Instant,
        ttl: Duration,
        window_ms: u64,
    ) {
        if window_ms == 0 || !pushed(reply) {
            return;
        }
        self.kept(fence_key, sent, ttl, window_ms);
    }

    /// What a handover sent now, for a waiter's lock of `ttl` and answered within `bound`,
    /// must do for the counter at `fence_key` to outlive that lock by `window_ms` (the
    /// releaser's; `None` when not known). Left alone only when known to live `bound` past
    /// that already: a reply within the bound means the script ran within it, so the
    /// waiter's lock ends by `bound + ttl` from now at the latest. A handover unanswered
    /// within the bound gives the waiter nothing it counts on past our own lease (see
    /// fast/handoff.rs), which the counter outlives by the window as it is.
    pub fn upkeep(
        &self,
        fence_key: &[u8],
        ttl: Duration,
        window_ms: Option<u64>,
        bound: Duration,
    ) -> FenceUpkeep {
        match window_ms {
            None | Some(0) => FenceUpkeep::Margin,
            Some(window) if self.due(fence_key, ttl.saturating_add(bound), window) => {
                FenceUpkeep::Window(window)
            }
            Some(_) => FenceUpkeep::Kept,
        }
    }

    /// A handover sent at `sent` for a lock of `ttl`, with `upkeep`, ran: a window's upkeep
    /// kept the counter a quarter window beyond what that lock needed (handoff.lua).
    pub fn handed(&self, upkeep: FenceUpkeep, fence_key: &[u8], sent: Instant, ttl: Duration) {
        if let FenceUpkeep::Window(window_ms) = upkeep {
            self.kept(fence_key, sent, ttl, window_ms);
        }
    }

    /// An attempt's script sent at `sent` for a lock of `ttl` won, its upkeep run: the
    /// counter lives at least an eighth of a window beyond what that lock needs (fence.lua
    /// `keep_fences` pushes it short of that), so the attempts after it, until that eighth is
    /// used up, skip the upkeep.
    pub fn won_by_script(&self, fence_key: &[u8], sent: Instant, ttl: Duration, window_ms: u64) {
        if window_ms == 0 {
            return;
        }
        let keep = (ttl.as_millis() as u64)
            .saturating_add(window_ms)
            .saturating_add(window_ms / 8);
        self.kept_past(fence_key, sent, keep);
    }

    /// A script or transaction sent at `sent` kept the counter `pushed_for` a lock of `ttl`.
    fn kept(&self, fence_key: &[u8], sent: Instant, ttl: Duration, window_ms: u64) {
        let keep = pushed_for(ttl.as_millis() as u64, window_ms);
        self.kept_past(fence_key, sent, keep);
    }

    /// Something sent at `sent` kept the counter at `fence_key` `keep_ms` past then. Only
    /// ever lengthens what is known: every push is `NX` or `GT`, so a reply read after a
    /// newer one (another socket's, a transaction answered late) tells of a life the counter
    /// has outgrown, never of a shorter one. Only a counter deleted by someone else lives
    /// less, and its fences restarted with it whatever is known here.
    fn kept_past(&self, fence_key: &[u8], sent: Instant, keep_ms: u64) {
        let Some(until) = sent.checked_add(Duration::from_millis(keep_ms)) else {
            return;
        };
        self.note(fence_key, |news| news.kept = news.kept.max(Some(until)));
    }

    fn note(&self, fence_key: &[u8], change: impl FnOnce(&mut CounterNews)) {
        let mut known = lock(&self.known);
        // A key already known is changed in place: every failed attempt at a polled lock
        // comes here, and should not copy its key each time.
        if let Some(news) = known.get_mut(fence_key) {
            change(news);
            return;
        }
        if known.len() >= KNOWN {
            known.clear();
        }
        let mut news = CounterNews::default();
        change(&mut news);
        known.insert(fence_key.to_vec(), news);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: u64 = 60_000;
    const TTL: Duration = Duration::from_secs(5);

    fn won() -> Value {
        Value::Array(vec![
            Value::Okay,
            Value::Int(8),
            Value::Int(0),
            Value::Int(1),
        ])
    }

    #[test]
    fn a_counter_is_due_until_a_push_is_known_then_for_a_quarter_window_it_is_not() {
        let kept = KeptFences::default();
        assert!(kept.due(b"f", TTL, WINDOW));
        let sent = Instant::now();
        kept.answered(&won(), b"f", sent, TTL, WINDOW);
        assert!(!kept.due(b"f", TTL, WINDOW));
        // Another key, a longer lock than the push allowed for, or a push long ago: due.
        assert!(kept.due(b"g", TTL, WINDOW));
        assert!(kept.due(b"f", TTL + Duration::from_millis(WINDOW / 4 + 1000), WINDOW));
        let long_ago = sent.checked_sub(Duration::from_millis(WINDOW / 4 + 1000));
        if let Some(long_ago) = long_ago {
            kept.answered(&won(), b"old", long_ago, TTL, WINDOW);
            assert!(kept.due(b"old", TTL, WINDOW));
            // That push answered after the newer one: the counter still lives as the newer
            // one kept it (GT never shortens it).
            kept.answered(&won(), b"f", long_ago, TTL, WINDOW);
            assert!(!kept.due(b"f", TTL, WINDOW));
        }
    }

    #[test]
    fn a_won_script_shows_its_counter_kept_an_eighth_window_past_its_lock() {
        let kept = KeptFences::default();
        let sent = Instant::now();
        kept.won_by_script(b"f", sent, TTL, WINDOW);
        assert!(!kept.due(b"f", TTL, WINDOW));
        assert!(kept.due(b"f", TTL + Duration::from_millis(WINDOW / 8 + 1000), WINDOW));
        // A counter kept forever is persisted by every attempt.
        kept.won_by_script(b"z", sent, TTL, 0);
        assert!(kept.due(b"z", TTL, 0));
        // An older win does not take back what a newer one showed.
        if let Some(long_ago) = sent.checked_sub(Duration::from_millis(WINDOW)) {
            kept.won_by_script(b"f", long_ago, TTL, WINDOW);
            assert!(!kept.due(b"f", TTL, WINDOW));
        }
    }

    #[test]
    fn a_handover_leaves_a_counter_alone_only_while_known_kept_past_its_bound() {
        let kept = KeptFences::default();
        let bound = Duration::from_secs(5);
        let upkeep = |ttl| kept.upkeep(b"f", ttl, Some(WINDOW), bound);
        // Nothing known, a window unknown or kept forever.
        assert_eq!(upkeep(TTL), FenceUpkeep::Window(WINDOW));
        assert_eq!(kept.upkeep(b"f", TTL, None, bound), FenceUpkeep::Margin);
        assert_eq!(kept.upkeep(b"f", TTL, Some(0), bound), FenceUpkeep::Margin);
        // A handover that kept it by the window: a quarter window, less the bound, of rest.
        kept.handed(FenceUpkeep::Window(WINDOW), b"f", Instant::now(), TTL);
        assert_eq!(upkeep(TTL), FenceUpkeep::Kept);
        let quarter = Duration::from_millis(WINDOW / 4);
        assert_eq!(upkeep(TTL + quarter - bound), FenceUpkeep::Window(WINDOW));
        assert_eq!(kept.upkeep(b"f", TTL, None, bound), FenceUpkeep::Margin);
        // One left alone, or only keeping its margin, tells nothing new.
        let other = KeptFences::default();
        other.handed(FenceUpkeep::Kept, b"f", Instant::now(), TTL);
        other.handed(FenceUpkeep::Margin, b"f", Instant::now(), TTL);
        assert_eq!(
            other.upkeep(b"f", TTL, Some(WINDOW), bound),
            FenceUpkeep::Window(WINDOW)
        );
    }

    #[test]
    fn a_lock_found_held_is_contended_for_a_while_and_its_push_still_known() {
        let kept = KeptFences::default();
        let fresh = kept.attempt(b"f", TTL, WINDOW, Instant::now());
        assert_eq!(
            fresh,
            AttemptNews {
                push: true,
                contended: false
            }
        );
        kept.answered(&won(), b"f", Instant::now(), TTL, WINDOW);
        kept.held(b"f");
        let news = kept.attempt(b"f", TTL, WINDOW, Instant::now());
        assert_eq!(
            news,
            AttemptNews {
                push: false,
                contended: true
            }
        );
        assert_eq!(news.push, kept.due(b"f", TTL, WINDOW));
        // Another lock, or a window of 0 (always pushed), each as it is.
        assert!(!kept.attempt(b"g", TTL, WINDOW, Instant::now()).contended);
        assert_eq!(
            kept.attempt(b"f", TTL, 0, Instant::now()),
            AttemptNews {
                push: true,
                contended: true
            }
        );
        // Long ago is no longer lately.
        if let Some(long_ago) = Instant::now().checked_sub(CONTENDED_FOR + Duration::from_secs(1)) {
            kept.note(b"f", |news| news.held = Some(long_ago));
            assert!(!kept.attempt(b"f", TTL, WINDOW, Instant::now()).contended);
        }
    }

    #[test]
    fn a_counter_kept_forever_is_always_persisted() {
        let kept = KeptFences::default();
        kept.answered(&won(), b"f", Instant::now(), TTL, 0);
        assert!(kept.due(b"f", TTL, 0));
    }

    #[test]
    fn past_the_bound_everything_is_forgotten() {
        let kept = KeptFences::default();
        let now = Instant::now();
        for i in 0..KNOWN {
            kept.answered(&won(), format!("f{i}").as_bytes(), now, TTL, WINDOW);
        }
        assert!(!kept.due(b"f0", TTL, WINDOW));
        kept.answered(&won(), b"one more", now, TTL, WINDOW);
        assert!(kept.due(b"f0", TTL, WINDOW));
        assert!(!kept.due(b"one more", TTL, WINDOW));
    }

    #[test]
    fn only_an_answer_whose_pushes_ran_counts() {
        let ints = |n: i64| Value::Int(n);
        assert!(pushed(&Value::Array(vec![
            Value::Okay,
            ints(8),
            ints(0),
            ints(1)
        ])));
        assert!(pushed(&Value::Array(vec![
            Value::Nil,
            ints(8),
            ints(0),
            ints(0),
            ints(5000)
        ])));
        // No pushes written, the script's answer, an error among them.
        assert!(!pushed(&Value::Array(vec![Value::Okay, ints(8)])));
        assert!(!pushed(&Value::Array(vec![
            Value::Okay,
            ints(8),
            ints(5000)
        ])));
        assert!(!pushed(&Value::Array(vec![ints(1), ints(7)])));
        let refused = match crate::core::basics::resp::parse(b"-ERR refused\r\n") {
            Ok(Some((reply, _))) => reply,
            other => panic!("{other:?}"),
        };
        assert!(!pushed(&Value::Array(vec![
            Value::Okay,
            ints(8),
            refused,
            ints(1)
        ])));
    }
}
