//! The watchdog's table with the two queues that say when each lock needs looking at, so
//! that watching or stopping a lock costs the same whatever the number held, and a tick
//! visits only the locks it has to. A full pass over the table, under the mutex the
//! JavaScript thread needs for every start and stop, made releasing n locks cost n^2.
//!
//! Queues are binary heaps of `(when, id)` with lazy deletion: stopping a lock only frees its
//! slot, and a pair whose id or time no longer matches its entry is dropped when it comes up.
//! The pairs left behind are bounded by rebuilding the queues from the table once they
//! outnumber the live entries by far, an O(n) pass after at least n stops.

use super::signals::Sink;
use super::watched::{TickClock, WatchSlots, Watched};
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// `(when, id)` pairs, earliest first.
#[derive(Default)]
struct DueQueue(BinaryHeap<Reverse<(u64, u64)>>);

impl DueQueue {
    fn push(&mut self, at: u64, id: u64) {
        self.0.push(Reverse((at, id)));
    }

    /// The earliest pair if it is due at `now`.
    fn pop_due(&mut self, now: u64) -> Option<(u64, u64)> {
        match self.0.peek() {
            Some(Reverse((at, _))) if *at <= now => self.0.pop().map(|Reverse(pair)| pair),
            _ => None,
        }
    }

    fn first(&self) -> Option<(u64, u64)> {
        self.0.peek().map(|Reverse(pair)| *pair)
    }

    fn pop(&mut self) {
        self.0.pop();
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn rebuilt(pairs: Vec<Reverse<(u64, u64)>>) -> DueQueue {
        DueQueue(BinaryHeap::from(pairs))
    }
}

/// Queued pairs allowed beyond two per live entry before the queues are rebuilt: enough that
/// small tables never rebuild, few enough to stay a small share of a lock's memory.
const SLACK: usize = 4096;

#[derive(Default)]
pub struct Schedule {
    entries: WatchSlots,
    /// Per entry, when to look at it next (`Watched::next_event`): the loss checks, and when
    /// the scheduler wakes. The pair that counts is the one the entry is `armed` with.
    events: DueQueue,
    /// Per entry not in flight, from when it may be refreshed (`Watched::ripe_at`), so a tick
    /// takes along every lock it may refresh early.
    ripe: DueQueue,
    /// Entries looked at so far, by any operation: the work the table costs.
    visited: u64,
}

/// What a tick found: locks given up (out of the table) and locks to refresh (now in flight).
#[derive(Default)]
pub struct Tick {
    pub lost: Vec<(Watched, LockError)>,
    pub due: Vec<u64>,
}

impl Schedule {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn visited(&self) -> u64 {
        self.visited
    }

    pub fn get(&self, id: u64) -> Option<&Watched> {
        self.entries.get(id)
    }

    /// An entry to read or to mark; one whose times change must be `requeue`d after.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Watched> {
        self.entries.get_mut(id)
    }

    /// Adds `entry`; the answer is its id and when the scheduler must look at it first.
    pub fn insert(&mut self, entry: Watched, clock: &TickClock) -> (u64, u64) {
        self.visited += 1;
        let id = self.entries.insert(entry);
        let at = self.requeue(id, clock).unwrap_or(0);
        (id, at)
    }

    /// Every entry, for a pass over the whole table (rare: an owner's end).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut Watched)> {
        self.visited += self.entries.len() as u64;
        self.entries.iter_mut()
    }

    /// Takes entry `id` out: its queued pairs are left to be dropped when they come up.
    pub fn remove(&mut self, id: u64) -> Option<Watched> {
        self.visited += 1;
        let entry = self.entries.remove(id)?;
        if self.entries.is_empty() {
            self.events = DueQueue::default();
            self.ripe = DueQueue::default();
        }
        Some(entry)
    }

    /// Queues entry `id` after it came out of flight (or in): its refresh was answered, or
    /// it is new. The answer is when the scheduler must look at it next, `None` when it is
    /// not in the table.
    pub fn requeue(&mut self, id: u64, clock: &TickClock) -> Option<u64> {
        let entry = self.entries.get_mut(id)?;
        let at = entry.next_event(clock);
        // A later time needs no pair: the one queued comes up first and queues it again.
        if at < entry.armed {
            entry.armed = at;
            self.events.push(at, id);
        }
        if !entry.in_flight {
            self.ripe.push(entry.ripe_at(), id);
        }
        Some(entry.armed)
    }

    /// When the scheduler must wake next: the earliest `Watched::next_event`, as a full pass
    /// would find it. Pairs of stopped locks, and those queued before their lock went in
    /// flight (its due time no longer counts), are settled on the way, each once.
    pub fn next_wake(&mut self, clock: &TickClock) -> Option<u64> {
        while let Some((at, id)) = self.events.first() {
            self.visited += 1;
            let Some(entry) = self.entries.get_mut(id).filter(|e| e.armed == at) else {
                self.events.pop();
                continue;
            };
            let next = entry.next_event(clock);
            if next <= at {
                return Some(at);
            }
            entry.armed = next;
            self.events.pop();
            self.events.push(next, id);
        }
        None
    }

    /// Whether the queues hold so many pairs of stopped locks that the next tick should
    /// rebuild them.
    pub fn needs_rebuild(&self) -> bool {
        self.events.len() + self.ripe.len() > 4 * self.entries.len() + SLACK
    }

    /// The scheduler's pass at `now`: every lock whose event came up is checked for a loss,
    /// and every lock that may be refreshed now is marked in flight.
    pub fn tick(&mut self, now: u64, clock: &TickClock) -> Tick {
        if self.needs_rebuild() {
            self.rebuild(clock);
        }
        let mut tick = Tick::default();
        let mut checked = Vec::new();
        while let Some((at, id)) = self.events.pop_due(now) {
            self.visited += 1;
            let Some(entry) = self.entries.get_mut(id).filter(|e| e.armed == at) else {
                continue;
            };
            entry.armed = u64::MAX;
            if let Some(err) = entry.verdict(now, clock) {
                self.give_up(id, err, &mut tick);
                continue;
            }
            checked.push(id);
        }
        while let Some((at, id)) = self.ripe.pop_due(now) {
            self.visited += 1;
            let Some(entry) = self.entries.get_mut(id) else {
                continue;
            };
            if entry.in_flight || entry.ripe_at() != at {
                continue;
            }
            if let Some(err) = entry.verdict(now, clock) {
                self.give_up(id, err, &mut tick);
                continue;
            }
            entry.in_flight = true;
            tick.due.push(id);
        }
        // After the refreshes were picked: a lock in flight is not waited for at its due time.
        for id in checked {
            if let Some(entry) = self.entries.get_mut(id) {
                // Past every event it had, or it would have been given up or refreshed.
                let at = entry.next_event(clock).max(now + 1);
                entry.armed = at;
                self.events.push(at, id);
            }
        }
        tick
    }

    fn give_up(&mut self, id: u64, err: LockError, tick: &mut Tick) {
        if let Some(entry) = self.remove(id) {
            tick.lost.push((entry, err));
        }
    }

    /// Every lock due at once (the connection dropped, so any of them may be gone), and in
    /// doubt until its refresh answers; answers the sinks and tags of those newly in doubt.
    pub fn all_due(
        &mut self,
        now: u64,
        dropped_at: u64,
        clock: &TickClock,
    ) -> Vec<(Arc<dyn Sink>, u32)> {
        self.due_where(now, dropped_at, clock, |_| true)
    }

    /// As `all_due`, for the locks whose keys hash to one of `slots` only: a cluster node
    /// left a call on them unanswered, and its silence says nothing of the other nodes'.
    pub fn slots_due(
        &mut self,
        now: u64,
        slots: &[u16],
        clock: &TickClock,
    ) -> Vec<(Arc<dyn Sink>, u32)> {
        self.due_where(now, now, clock, |key| slots.contains(&keys::slot(key)))
    }

    fn due_where(
        &mut self,
        now: u64,
        dropped_at: u64,
        clock: &TickClock,
        concerns: impl Fn(&[u8]) -> bool,
    ) -> Vec<(Arc<dyn Sink>, u32)> {
        let mut doubted = Vec::new();
        for (_, entry) in self.entries.iter_mut() {
            // Confirmed by a request sent after the drop: the drop says nothing of it.
            if entry.sent_ms() > dropped_at || !concerns(entry.key()) {
                continue;
            }
            entry.due_now(now);
            if !entry.in_doubt {
                entry.in_doubt = true;
                doubted.push((entry.sink.clone(), entry.tag));
            }
        }
        self.rebuild(clock);
        doubted
    }

    /// Entry `id` alone as `all_due` leaves each: due now and in doubt. Answers its sink and
    /// tag when it was not in doubt yet.
    pub fn doubt(&mut self, id: u64, now: u64, clock: &TickClock) -> Option<(Arc<dyn Sink>, u32)> {
        self.visited += 1;
        let entry = self.entries.get_mut(id)?;
        entry.due_now(now);
        let told = (!entry.in_doubt).then(|| (entry.sink.clone(), entry.tag));
        entry.in_doubt = true;
        self.requeue(id, clock);
        told
    }

    /// Queues every entry afresh from the table, without the pairs of stopped locks.
    fn rebuild(&mut self, clock: &TickClock) {
        let mut events = Vec::with_capacity(self.entries.len());
        let mut ripe = Vec::with_capacity(self.entries.len());
        for (id, entry) in self.entries.iter_mut() {
            entry.armed = entry.next_event(clock);
            events.push(Reverse((entry.armed, id)));
            if !entry.in_flight {
                ripe.push(Reverse((entry.ripe_at(), id)));
            }
        }
        self.visited += events.len() as u64;
        self.events = DueQueue::rebuilt(events);
        self.ripe = DueQueue::rebuilt(ripe);
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
