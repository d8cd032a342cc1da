//! Wake-up on release. A release that deletes a lock publishes on the lock's channel; every
//! process waiting for that lock is subscribed (on its ordinary connection: RESP3 carries
//! pushes beside replies) and wakes exactly one of its waiters, the one that asked first.
//! The others sleep on, so a release never sets off a herd. Polling stays as the safety net
//! for what sends no message: a lock that expires, or a message lost with a connection.

use super::keys;
use super::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The channel a lock's release is announced on: in the lock key's hash slot, so sharded
/// pub/sub can carry it on a cluster.
pub fn channel(lock_key: &[u8]) -> Vec<u8> {
    keys::sibling_key(lock_key, "released")
}

#[derive(Default)]
struct Waiter {
    notify: Notify,
    /// Told of a release it has not acted on yet; the next message goes to the next waiter.
    woken: AtomicBool,
}

#[derive(Default)]
struct Channel {
    /// In request order.
    waiters: VecDeque<Arc<Waiter>>,
    subscribed: bool,
}

/// Every waiter of one connection, by channel.
#[derive(Default)]
pub struct Wakes {
    channels: Mutex<HashMap<Vec<u8>, Channel>>,
    /// Serialises SUBSCRIBE and UNSUBSCRIBE, so the server sees them in the order our state
    /// changed in.
    pub(crate) switching: tokio::sync::Mutex<()>,
}

impl Wakes {
    /// Queues a waiter for `channel`, behind those already waiting.
    pub fn join(self: &Arc<Self>, channel: Vec<u8>) -> Ticket {
        let waiter = Arc::new(Waiter::default());
        let mut channels = lock(&self.channels);
        channels
            .entry(channel.clone())
            .or_default()
            .waiters
            .push_back(waiter.clone());
        Ticket {
            wakes: self.clone(),
            channel,
            waiter,
        }
    }

    fn is_subscribed(&self, channel: &[u8]) -> bool {
        lock(&self.channels)
            .get(channel)
            .is_some_and(|entry| entry.subscribed)
    }

    pub(crate) fn mark_subscribed(&self, channel: &[u8]) {
        if let Some(entry) = lock(&self.channels).get_mut(channel) {
            entry.subscribed = true;
        }
    }

    /// A release was announced: wake the first waiter not already woken.
    pub fn released(&self, channel: &[u8]) {
        if let Some(entry) = lock(&self.channels).get(channel) {
            wake_first(entry);
        }
    }

    /// The connection dropped or was abandoned: subscriptions and any message in flight may
    /// be gone. Each channel's first waiter tries again at once and subscribes anew.
    pub fn connection_lost(&self) {
        for entry in lock(&self.channels).values_mut() {
            entry.subscribed = false;
            wake_first(entry);
        }
    }

    /// Once more than `keep` channels nobody waits on are still subscribed, forgets them all
    /// and returns them for one UNSUBSCRIBE (call with `switching` held).
    pub(crate) fn take_idle(&self, keep: usize) -> Vec<Vec<u8>> {
        let mut channels = lock(&self.channels);
        let idle = channels
            .values()
            .filter(|entry| entry.waiters.is_empty())
            .count();
        if idle <= keep {
            return Vec::new();
        }
        let mut names = Vec::with_capacity(idle);
        channels.retain(|name, entry| {
            let keep = !entry.waiters.is_empty();
            if !keep && entry.subscribed {
                names.push(name.clone());
            }
            keep
        });
        names
    }
}

fn wake_first(entry: &Channel) {
    let next = entry
        .waiters
        .iter()
        .find(|waiter| !waiter.woken.swap(true, Ordering::AcqRel));
    if let Some(waiter) = next {
        waiter.notify.notify_one();
    }
}

/// One waiter's place in its channel's queue; leaving (drop) passes on a wake it did not use.
pub struct Ticket {
    wakes: Arc<Wakes>,
    channel: Vec<u8>,
    waiter: Arc<Waiter>,
}

impl Ticket {
    /// Resolves when a release was announced for this waiter.
    pub async fn woken(&self) {
        self.waiter.notify.notified().await;
    }

    /// Whether others of this process were already waiting for the lock when this waiter
    /// joined: a newcomer that tries at once would jump the queue (and usually lose to the
    /// waiter the release woke, at the cost of a failed attempt).
    pub fn is_behind_others(&self) -> bool {
        lock(&self.wakes.channels)
            .get(&self.channel)
            .and_then(|entry| entry.waiters.front())
            .is_some_and(|first| !Arc::ptr_eq(first, &self.waiter))
    }

    /// About to try: a message from now on is news for this waiter.
    pub fn rearm(&self) {
        self.waiter.woken.store(false, Ordering::Release);
    }

    pub fn is_subscribed(&self) -> bool {
        self.wakes.is_subscribed(&self.channel)
    }

    pub fn channel(&self) -> &[u8] {
        &self.channel
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut channels = lock(&self.wakes.channels);
        let Some(entry) = channels.get_mut(&self.channel) else {
            return;
        };
        entry.waiters.retain(|w| !Arc::ptr_eq(w, &self.waiter));
        // A wake meant for us that we will never act on belongs to the next in line.
        if self.waiter.woken.load(Ordering::Acquire) {
            wake_first(entry);
        }
    }
}
