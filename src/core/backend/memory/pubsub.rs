//! Who listens on which channel, and the messages published while the keyspace was locked,
//! delivered only once it is unlocked: a subscriber's callback may well call back into the
//! keyspace (the store passes a wake on with a script).

use redis::{PushInfo, PushKind, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Where a connection's pushes go (the store's push sender).
pub type Pushes = Arc<dyn Fn(PushInfo) + Send + Sync>;

/// Plain pub/sub and sharded pub/sub are apart, as in Redis: SPUBLISH reaches only
/// SSUBSCRIBE subscribers, PUBLISH only SUBSCRIBE ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChannelKind {
    Plain,
    Sharded,
}

#[derive(Default)]
pub struct PubSub {
    channels: HashMap<(ChannelKind, Vec<u8>), HashMap<u64, Option<Pushes>>>,
    by_connection: HashMap<u64, BTreeSet<(ChannelKind, Vec<u8>)>>,
    outbox: Vec<(Pushes, PushInfo)>,
}

impl PubSub {
    /// Subscribes connection `id`; the number of channels of that kind it is now on.
    pub fn subscribe(
        &mut self,
        id: u64,
        kind: ChannelKind,
        channel: &[u8],
        pushes: Option<Pushes>,
    ) -> i64 {
        self.channels
            .entry((kind, channel.to_vec()))
            .or_default()
            .insert(id, pushes);
        self.by_connection
            .entry(id)
            .or_default()
            .insert((kind, channel.to_vec()));
        self.count(id, kind)
    }

    /// Unsubscribes connection `id`; the number of channels of that kind it is still on.
    pub fn unsubscribe(&mut self, id: u64, kind: ChannelKind, channel: &[u8]) -> i64 {
        let key = (kind, channel.to_vec());
        if let Some(listeners) = self.channels.get_mut(&key) {
            listeners.remove(&id);
            if listeners.is_empty() {
                self.channels.remove(&key);
            }
        }
        if let Some(mine) = self.by_connection.get_mut(&id) {
            mine.remove(&key);
            if mine.is_empty() {
                self.by_connection.remove(&id);
            }
        }
        self.count(id, kind)
    }

    /// Forgets a connection that is gone.
    pub fn drop_connection(&mut self, id: u64) {
        for key in self.by_connection.remove(&id).unwrap_or_default() {
            if let Some(listeners) = self.channels.get_mut(&key) {
                listeners.remove(&id);
                if listeners.is_empty() {
                    self.channels.remove(&key);
                }
            }
        }
    }

    fn count(&self, id: u64, kind: ChannelKind) -> i64 {
        self.by_connection.get(&id).map_or(0, |mine| {
            mine.iter().filter(|(k, _)| *k == kind).count() as i64
        })
    }

    /// Queues the message for every subscriber; how many there are.
    pub fn publish(&mut self, kind: ChannelKind, channel: &[u8], message: &[u8]) -> i64 {
        let Some(listeners) = self.channels.get(&(kind, channel.to_vec())) else {
            return 0;
        };
        let push_kind = match kind {
            ChannelKind::Plain => PushKind::Message,
            ChannelKind::Sharded => PushKind::SMessage,
        };
        for pushes in listeners.values().flatten() {
            self.outbox.push((
                pushes.clone(),
                PushInfo {
                    kind: push_kind.clone(),
                    data: vec![
                        Value::BulkString(channel.to_vec()),
                        Value::BulkString(message.to_vec()),
                    ],
                },
            ));
        }
        listeners.len() as i64
    }

    /// The messages to deliver, taken while the keyspace is still locked so each goes out
    /// once.
    pub fn take_outbox(&mut self) -> Vec<(Pushes, PushInfo)> {
        std::mem::take(&mut self.outbox)
    }
}

/// Calls the subscribers' callbacks, outside every lock. A callback that panics loses its
/// message, as a dropped socket would; the panic goes no further than here, so it neither
/// reaches the publisher nor keeps the other subscribers from theirs.
pub fn deliver(outbox: Vec<(Pushes, PushInfo)>) {
    for (pushes, push) in outbox {
        let _lost = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pushes(push)));
    }
}
