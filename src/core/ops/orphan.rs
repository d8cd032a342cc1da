//! A lock the watchdog kept alive for an owner that went away (see owner.rs): nobody will
//! release it, so it is released here, as its holder's release would have, rather than left
//! to its TTL (or, refreshed, to its stall budget) while others wait for it.

use super::pair::Pair;
use super::release;
use super::store::Store;
use crate::core::backend::lock_store::LockStore;
use crate::core::basics::lease::Lease;
use crate::core::basics::validate::DEFAULT_COMMAND_TIMEOUT;
use crate::core::proto::release::{Release, ReleaseKind};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Slack past the lock's own validity: Redis keeps it a little longer than we count on it.
const GRACE: Duration = Duration::from_millis(25);

pub struct Orphan {
    /// The key that holds the token.
    pub key: Vec<u8>,
    /// The lock's name as its user knows it.
    pub name: String,
    pub token: String,
    /// An ExclusiveLock's lock key beside its owner key.
    pub pair: Option<Box<Pair>>,
    /// Until when it is ours by our clock.
    pub deadline: Instant,
}

impl Orphan {
    /// Deletes it if it is still ours; a plain lock goes to a waiter of this process first,
    /// as any release of ours does. Bounded by the default command timeout, and by how long
    /// the lock could still live: past that there is nothing left to free.
    pub async fn release(self, store: Arc<Store>) {
        let left = self.deadline.saturating_duration_since(Instant::now()) + GRACE;
        let bound = DEFAULT_COMMAND_TIMEOUT.min(left);
        match self.pair {
            None => {
                let lease = Lease::resumed(self.name, self.key, self.token, 0, self.deadline);
                let _ignored = release::release(&store, &lease, bound, None).await;
            }
            Some(pair) => {
                let release = Release {
                    lock_key: &self.key,
                    token: &self.token,
                    kind: ReleaseKind::Pair {
                        data_key: &pair.data_key,
                        contents: &pair.expected,
                        set_at: pair.set_at,
                    },
                };
                let _ignored = store.backend().release(&release, bound).await;
            }
        }
    }
}
