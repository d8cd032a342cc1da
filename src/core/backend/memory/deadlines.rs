//! When each key with a TTL expires, in order of time, so that a sweep finds the keys that
//! expired without walking the ones that have not, or never will (fence counters).
//! The keyspace keeps it exact: every change of a key's expiry replaces its one entry here,
//! so nothing stale piles up behind keys refreshed again and again.

use std::collections::BTreeSet;

#[derive(Default)]
pub struct Deadlines {
    order: BTreeSet<(i64, Vec<u8>)>,
}

impl Deadlines {
    /// Records that `key`'s expiry moved from `old` to `new` (either may be none).
    pub fn moved(&mut self, key: &[u8], old: Option<i64>, new: Option<i64>) {
        if old == new {
            return;
        }
        if let Some(at) = old {
            self.order.remove(&(at, key.to_vec()));
        }
        if let Some(at) = new {
            self.order.insert((at, key.to_vec()));
        }
    }

    /// The earliest key whose expiry is before `now_ms` (Redis keeps a key through its very
    /// millisecond), taken out of the index.
    pub fn pop_expired(&mut self, now_ms: i64) -> Option<(i64, Vec<u8>)> {
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
        self.order.contains(&(at, key.to_vec()))
    }
}
