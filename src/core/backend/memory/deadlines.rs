//! When each key with a TTL expires, in order of time, so that a sweep finds the keys that
//! expired without walking the ones that have not, or never will (fence counters).
//! The keyspace keeps it exact: every change of a key's expiry replaces its one entry here,
//! so nothing stale piles up behind keys refreshed again and again.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Its keys are the very allocations the keyspace's map holds (`Arc`): an entry given an
/// expiry costs no copy of its key here.
#[derive(Default)]
pub struct Deadlines {
    order: BTreeSet<(i64, Arc<[u8]>)>,
}

/// A point of the index, owned or borrowed: what lets a look-up name its key by reference
/// (`&dyn Point`) instead of copying it into a tuple first. Ordered as the tuples are.
trait Point {
    fn point(&self) -> (i64, &[u8]);
}

impl Point for (i64, Arc<[u8]>) {
    fn point(&self) -> (i64, &[u8]) {
        (self.0, &self.1)
    }
}

impl Point for (i64, &[u8]) {
    fn point(&self) -> (i64, &[u8]) {
        *self
    }
}

impl<'a> Borrow<dyn Point + 'a> for (i64, Arc<[u8]>) {
    fn borrow(&self) -> &(dyn Point + 'a) {
        self
    }
}

impl PartialEq for dyn Point + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.point() == other.point()
    }
}

impl Eq for dyn Point + '_ {}

impl PartialOrd for dyn Point + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Point + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.point().cmp(&other.point())
    }
}

impl Deadlines {
    /// Records that `key`'s expiry moved from `old` to `new` (either may be none).
    pub fn moved(&mut self, key: &Arc<[u8]>, old: Option<i64>, new: Option<i64>) {
        if old == new {
            return;
        }
        if let Some(at) = old {
            self.order.remove(&(at, &key[..]) as &dyn Point);
        }
        if let Some(at) = new {
            self.order.insert((at, key.clone()));
        }
    }

    /// The earliest key whose expiry is before `now_ms` (Redis keeps a key through its very
    /// millisecond), taken out of the index.
    pub fn pop_expired(&mut self, now_ms: i64) -> Option<(i64, Arc<[u8]>)> {
        match self.order.first() {
            Some((at, _)) if now_ms > *at => self.order.pop_first(),
            _ => None,
        }
    }

    pub fn clear(&mut self) {
        self.order.clear();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.order.len()
    }

    #[cfg(test)]
    pub fn contains(&self, key: &[u8], at: i64) -> bool {
        self.order.contains(&(at, key) as &dyn Point)
    }
}
