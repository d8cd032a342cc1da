//! Releases of one connection's locks, counted by lock key, for the waiters that join its wake
//! table only once their first attempt found the lock held (a free lock, the common case,
//! then costs its waiter nothing here). Such a waiter is not in the table while its attempt
//! is in flight, so a release of ours landing then finds nobody to hand the lock to or wake.
//! Every release that may find no waiter counts itself before it looks at the table for
//! them, and the waiter reads the count before its attempt and again once it has joined: a
//! change means a release may have missed it, and it tries again at once instead of sleeping
//! until its poll. A release that looked just before the waiter's reading, and lands after
//! its attempt, is left to what catches it for every waiter: the wake-up preparation finding
//! the lock free (ops/store.rs `prepare_wake`), else the poll.
//!
//! The counts are spread over a few counters by a hash of the lock key, so that releases of
//! other locks seldom cost a waiter an extra attempt; a collision only ever costs one.

use std::sync::atomic::{AtomicU64, Ordering};

/// Enough that unrelated locks rarely share a counter, few enough to live inline.
const COUNTERS: usize = 32;

#[derive(Default)]
pub struct Releases {
    counts: [AtomicU64; COUNTERS],
}

/// A waiter's reading of its lock's counter, before its first attempt.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    counter: usize,
    seen: u64,
}

impl Releases {
    /// A release of the lock whose key is the concatenation of `key_parts` is about to look
    /// for waiters.
    // SeqCst here and in `mark`/`since`, against the table's count of locks (wake.rs): a
    // release that skips the table because it looked empty is seen by the waiter that joined
    // it, or sees that waiter.
    pub fn count(&self, key_parts: &[&[u8]]) {
        self.counts[index(key_parts)].fetch_add(1, Ordering::SeqCst);
    }

    pub fn mark(&self, key_parts: &[&[u8]]) -> Mark {
        let counter = index(key_parts);
        let seen = self.counts[counter].load(Ordering::SeqCst);
        Mark { counter, seen }
    }

    /// Whether a release of the marked lock (or of one sharing its counter) counted itself
    /// since `mark` was taken.
    pub fn since(&self, mark: Mark) -> bool {
        self.counts[mark.counter].load(Ordering::SeqCst) != mark.seen
    }
}

/// FNV-1a of the concatenated parts, folded onto a counter: the same lock key gives the same
/// counter whether it comes whole (a lease's key) or as prefix and name (a call's).
fn index(key_parts: &[&[u8]]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key_parts.iter().flat_map(|part| part.iter()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % COUNTERS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_counts_alike_whole_or_in_parts_and_a_mark_sees_only_later_releases() {
        let releases = Releases::default();
        assert_eq!(index(&[b"lock:job"]), index(&[b"lock:", b"job"]));
        let mark = releases.mark(&[b"lock:", b"job"]);
        assert!(!releases.since(mark));
        releases.count(&[b"lock:job"]);
        assert!(releases.since(mark));
        assert!(!releases.since(releases.mark(&[b"lock:job"])));
    }

    #[test]
    fn keys_spread_over_the_counters() {
        let used: std::collections::HashSet<usize> = (0..1000)
            .map(|n| index(&[format!("lock:{n}").as_bytes()]))
            .collect();
        assert_eq!(used.len(), COUNTERS);
    }
}
