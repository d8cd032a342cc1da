//! What each node of a Redlock keeps of the subscriptions: one shared listener and one shared
//! book of channels (the store's wake table) sit above N connections, and a channel
//! subscribed on one node is not subscribed on the others. Each node keeps its own set of
//! channels, emptied when its connection drops; what the wake table knows of waiters is
//! asked of the table itself.

use super::lock_store::{Listener, LostScope, Subscriptions};
use crate::core::basics::drops::Drops;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

/// The channels one node's connection is subscribed to.
#[derive(Default)]
pub struct NodeBook {
    subscribed: Mutex<HashSet<Vec<u8>>>,
}

impl NodeBook {
    fn channels(&self) -> std::sync::MutexGuard<'_, HashSet<Vec<u8>>> {
        // A panic elsewhere while holding it leaves a set that is still a set.
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The shared listener, told as well when this node's subscriptions went with its
/// connection; and the Redlock's `lost`, signalled then (the watchdog's re-check).
pub struct NodeListener {
    pub inner: Arc<dyn Listener>,
    /// Which node this is, for `Listener::message_on`.
    pub node: usize,
    pub book: Arc<NodeBook>,
    pub lost: Arc<Drops>,
}

impl Listener for NodeListener {
    fn message(&self, channel: &[u8], payload: &[u8]) {
        self.inner.message_on(Some(self.node), channel, payload)
    }

    fn connection_lost(&self, scope: LostScope) {
        self.book.channels().clear();
        self.lost.signal();
        self.inner.connection_lost(scope)
    }

    /// Gone from this node as from a lost connection, and the shared listener re-checks it
    /// as it does for one.
    fn unsubscribed(&self, channel: &[u8]) {
        self.book.channels().remove(channel);
        self.inner.unsubscribed(channel)
    }
}

/// One node's view of the shared book, for one call.
pub struct NodeSubscriptions<'a> {
    pub node: &'a NodeBook,
    pub shared: &'a dyn Subscriptions,
}

impl Subscriptions for NodeSubscriptions<'_> {
    fn is_subscribed(&self, channel: &[u8]) -> bool {
        self.node.channels().contains(channel)
    }

    fn is_wanted(&self, channel: &[u8]) -> bool {
        self.shared.is_wanted(channel)
    }

    /// This node's channels nobody waits on, once more than `keep` are subscribed here.
    fn take_idle(&self, keep: usize) -> Vec<Vec<u8>> {
        let mut channels = self.node.channels();
        if channels.len() <= keep {
            return Vec::new();
        }
        let idle: Vec<Vec<u8>> = channels
            .iter()
            .filter(|channel| !self.shared.is_wanted(channel))
            .cloned()
            .collect();
        for channel in &idle {
            channels.remove(channel);
        }
        idle
    }

    /// This node's only: the Redlock marks the wake table once any node listens.
    fn mark_subscribed(&self, channel: &[u8]) {
        self.node.channels().insert(channel.to_vec());
    }
}

#[cfg(test)]
#[path = "redlock_book_tests.rs"]
mod tests;
