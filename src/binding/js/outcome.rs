//! How a call of a JS thread ended, as its promise settles, and the queue where what the
//! runtime finished waits for that thread. The bottom of the JS-thread runtime: every other
//! file of this folder uses it, and it uses none of them.

use crate::binding::runtime::{Claimed, Unstarted};
use crate::binding::sys::waker::Waker;
use crate::core::api::{ClaimedTask, Parking, Unclaimed};
use crate::core::basics::background;
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::front::exclusive_lock::Inspection;
use crate::core::front::granted::Granted;
use crate::core::front::reply::Settled;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// How a call ended, as its promise settles.
pub enum Outcome {
    Lease(Granted),
    NoHandle,
    Bool(bool),
    Text(String),
    Done,
    /// A lock's new local deadline, its expiry in Redis (epoch ms), and when the extend was
    /// sent (`extend`).
    Extended {
        deadline: Instant,
        expires_at_ms: u64,
        confirmed: Instant,
    },
    Inspected(Option<Inspection>),
    /// A plain number (syncguard's release code, or an expiry in server ms).
    Number(f64),
    /// A syncguard lock won: `[fence, expiresAtMs]`, freed should it never reach its caller.
    SyncguardWon {
        fence: u64,
        expires_at_ms: u64,
        unclaimed: Option<Unclaimed>,
    },
    Failed(LockError),
}

/// What happened, in order: a call that ended (`id`), or news for a listener.
pub enum Settlement {
    Settled(u32, Outcome),
    Event {
        listener: u32,
        event: &'static str,
        /// For `lost`: why, the last confirmed expiry in Redis (epoch ms), and the token.
        lost: Option<Box<Loss>>,
    },
    /// What a waiter went through (`contended`, `woken`, `handed-over`), for an `onEvent`
    /// hook: the lock's name rides where a loss has its message.
    Seen {
        listener: u32,
        event: &'static str,
        key: Box<str>,
    },
}

/// What a holder is told of its lost lock.
pub struct Loss {
    pub error: LockError,
    pub expires_at_ms: u64,
    pub token: String,
}

/// What the runtime finished for one JS thread, waiting for that thread to take it.
pub struct Queue {
    pub(super) done: Mutex<Done>,
    pub(super) waker: OnceLock<Arc<Waker>>,
    /// Calls whose task still waits outside the runtime (runtime::start_here): one the JS
    /// thread answers itself is dropped there, never to run.
    unstarted: Mutex<HashMap<u32, Unstarted>>,
}

/// What waits for the JS thread, and the calls it answered itself: under one lock, so
/// that a call's end is either dropped as it is queued or found queued when its call is
/// answered, never kept as answered for good (ids wrap, and a later call would never hear).
pub(super) struct Done {
    /// `None` once the JS environment ended: nothing will take what joins it.
    pub(super) entries: Option<Vec<Settlement>>,
    /// Calls the JS thread answered itself while their runtime task still ran (a waiter
    /// handed the lock by a release on that thread): what the task ends with is dropped
    /// as it comes, without waking the thread for nothing.
    answered: HashSet<u32>,
    /// Calls whose runtime task has not ended yet: only theirs is an end to come. One
    /// answered with none (its attempt ended on the thread's socket) is not kept answered.
    running: HashSet<u32>,
}

impl Default for Queue {
    fn default() -> Queue {
        Queue {
            done: Mutex::new(Done {
                entries: Some(Vec::new()),
                answered: HashSet::new(),
                running: HashSet::new(),
            }),
            waker: OnceLock::new(),
            unstarted: Mutex::new(HashMap::new()),
        }
    }
}

impl Queue {
    pub fn take(&self) -> Vec<Settlement> {
        (lock(&self.done).entries.as_mut())
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Queues `entry`; `true` when it starts a batch (the thread is to be woken). The end of
    /// a call the thread answered itself is dropped instead, as is anything once the
    /// environment ended.
    pub(super) fn put(&self, entry: Settlement) -> bool {
        let mut done = lock(&self.done);
        let answered = match &entry {
            Settlement::Settled(id, _) => {
                done.running.remove(id);
                done.answered.remove(id)
            }
            _ => false,
        };
        let queued = match done.entries.as_mut() {
            Some(entries) if !answered => {
                entries.push(entry);
                return entries.len() == 1;
            }
            _ => entry,
        };
        drop(done);
        // Nobody hears it: a lock it hands out is freed, not left to its TTL.
        queued.forsake();
        false
    }

    /// Call `id` was answered on the JS thread: what its runtime task ends with, if it has
    /// one, is dropped, queued already (the task saw its waiter settled before the thread got
    /// here) or yet to come.
    pub(super) fn answered(&self, id: u32) {
        let mut done = lock(&self.done);
        let ended = |entry: &Settlement| matches!(entry, Settlement::Settled(at, _) if *at == id);
        let at = (done.entries.as_ref()).and_then(|entries| entries.iter().position(ended));
        let stale = match (at, done.entries.as_mut()) {
            (Some(at), Some(entries)) => entries.remove(at),
            _ => {
                if done.running.contains(&id) {
                    done.answered.insert(id);
                }
                return;
            }
        };
        drop(done);
        stale.forsake();
    }

    /// A runtime task for call `id` starts: its end is to come through `put`.
    pub(super) fn started(&self, id: u32) {
        lock(&self.done).running.insert(id);
    }

    /// Call `id`'s task was dropped before it ran: no end of it is to come.
    pub(super) fn never_ends(&self, id: u32) {
        lock(&self.done).running.remove(&id);
    }

    /// Call `id`'s task waits outside the runtime until something wakes it (start_here).
    pub(super) fn park(&self, id: u32, task: Unstarted) {
        lock(&self.unstarted).insert(id, task);
    }

    /// Call `id`'s task, if it still waits outside the runtime.
    pub(super) fn unpark(&self, id: u32) -> Option<Unstarted> {
        lock(&self.unstarted).remove(&id)
    }

    /// What the runtime queued up to and including its last news of a waiter (`Seen`), in
    /// the order it was queued: the JS thread tells it before the promises it settles itself
    /// (`settling`, in a call or from its socket), as the queue tells it before a promise the
    /// runtime settles after it. Otherwise a waiter answered by a release on its own thread
    /// would be told `acquired` before the `handed-over` its release counted. Taking the news
    /// alone would tell it ahead of what was queued before it (a call's end, a listener's
    /// news), out of the order it happened. Nothing when no news waits; what follows the
    /// last news stays queued. So does an end queued for a promise in `settling`, should one
    /// be there (`answered` drops a runtime task's end found queued): it comes after, and
    /// finds it settled.
    pub fn take_news(&self, settling: &[u32]) -> Vec<Settlement> {
        let mut done = lock(&self.done);
        let Some(done) = done.entries.as_mut() else {
            return Vec::new();
        };
        let is_news = |entry: &Settlement| matches!(entry, Settlement::Seen { .. });
        let Some(last) = done.iter().rposition(is_news) else {
            return Vec::new();
        };
        let stale = |entry: &Settlement| matches!(entry, Settlement::Settled(id, _) if settling.contains(id));
        let (kept, news): (Vec<_>, Vec<_>) = done.drain(..=last).partition(stale);
        done.splice(0..0, kept);
        news
    }

    /// Whether nothing waits to be delivered (and the environment has not ended).
    pub fn is_idle(&self) -> bool {
        lock(&self.done).entries.as_ref().is_some_and(Vec::is_empty)
    }

    /// The JS environment ended (see teardown.rs): what waits here, and what joins later,
    /// is never delivered, and is forsaken instead.
    pub fn close(&self) {
        // A parked task holds what settles it, this queue included: its entry here is let go,
        // and the task ends as its wait does (the owner's end wakes it), answering nobody.
        lock(&self.unstarted).clear();
        let left = lock(&self.done).entries.take().unwrap_or_default();
        for entry in left {
            entry.forsake();
        }
    }
}

impl Settlement {
    /// Nobody will hear this entry: a lock it hands out is freed (see ops/delivery.rs).
    pub fn forsake(self) {
        if let Settlement::Settled(_, outcome) = self {
            outcome.forsake();
        }
    }
}

impl Outcome {
    /// Takes out what frees the lock this outcome hands out, should it never reach its caller.
    pub fn unclaimed(&mut self) -> Option<Unclaimed> {
        match self {
            Outcome::Lease(granted) => granted.unclaimed.take(),
            Outcome::SyncguardWon { unclaimed, .. } => unclaimed.take(),
            _ => None,
        }
    }

    /// Nobody will hear this outcome: a lock it hands out is freed.
    pub fn forsake(mut self) {
        if let Some(unclaimed) = self.unclaimed() {
            background::within(|| unclaimed.free());
        }
    }
}

/// Outcomes of calls that answer nothing but success.
pub fn done(result: Settled<impl Sized>) -> Outcome {
    match result {
        Ok(_) => Outcome::Done,
        Err(err) => Outcome::Failed(err),
    }
}

/// Outcomes of calls that answer a yes or no.
pub fn boolean(result: Settled<bool>) -> Outcome {
    match result {
        Ok(answer) => Outcome::Bool(answer),
        Err(err) => Outcome::Failed(err),
    }
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;

/// A release on this thread that answers a parked call in place drops its task unrun
/// (`Completer::answered`).
impl Parking for Queue {
    fn claim(&self, id: u32) -> Option<Box<dyn ClaimedTask>> {
        let claimed = lock(&self.unstarted).get(&id)?.claim()?;
        Some(Box::new(claimed))
    }
}

impl ClaimedTask for Claimed {
    fn drop_unrun(self: Box<Self>) {
        Claimed::drop_unrun(*self);
    }
}
