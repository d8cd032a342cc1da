//! The key layout as the command-line tool (bin/, lib/cli/) reads it: the names of a lock's
//! sibling keys and channel, computed by `basics::keys`, so the layout lives in one place and
//! the tool only sends commands.

use crate::core::basics::key_counts;
use crate::core::basics::keys;
use crate::core::front::syncguard_slots;
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;

/// Every key and channel that belongs to one lock key (`docs/INTERNALS.md`, "Keys").
#[napi(object)]
pub struct LockSiblings {
    pub fence: Buffer,
    /// ExclusiveLock's owner token.
    pub owner: Buffer,
    /// Connections queued for a wake-up (sorted set).
    pub waiting: Buffer,
    /// A fair lock's line (sorted set) and its waiters' liveness (hash).
    pub line: Buffer,
    pub alive: Buffer,
    /// Where a release announces a wake-up.
    pub channel: Buffer,
    /// The ring of connections taking the lock by grant (a list; see release_grant.lua).
    pub ring: Buffer,
    /// Fences drawn for no acquisition (count_missed.lua): `watch` reads acquisitions from
    /// the counter's growth less this count's.
    pub missed: Buffer,
}

#[napi]
pub fn lock_siblings(lock_key: Buffer) -> LockSiblings {
    LockSiblings {
        fence: keys::fence_key(&lock_key).into(),
        owner: keys::owner_key(&lock_key).into(),
        waiting: keys::queue_key(&lock_key).into(),
        line: keys::line_key(&lock_key).into(),
        alive: keys::alive_key(&lock_key).into(),
        channel: keys::released_channel(&lock_key).into(),
        ring: keys::ring_key(&lock_key).into(),
        missed: keys::missed_key(&lock_key).into(),
    }
}

/// The channel `watch` asks our processes for their counts per key on (proto/watch.rs).
#[napi]
pub fn watch_channel() -> Buffer {
    key_counts::CHANNEL.into()
}

/// Whether `key` is a sibling (fence, owner, queue, line) rather than a possible lock key.
#[napi]
pub fn is_sibling_key(key: Buffer) -> bool {
    key.contains(&keys::SEPARATOR)
}

/// The lock key whose wake-up channel is `channel`, or null for any other channel.
#[napi]
pub fn lock_key_of_channel(channel: Buffer) -> Option<Buffer> {
    keys::lock_key_of_channel(&channel, keys::RELEASED).map(Buffer::from)
}

/// The name syncguard's index or fence key `name` (as syncguard names it) of the lock at
/// `lock_key` (as sent) has on a Redis Cluster, under the client's prefix `client_prefix` and
/// syncguard's prefix `key_prefix` (README, "Differences").
#[napi]
pub fn syncguard_cluster_key(
    client_prefix: Buffer,
    key_prefix: Buffer,
    lock_key: Buffer,
    name: Buffer,
) -> Buffer {
    syncguard_slots::on_cluster(&client_prefix, &key_prefix, &lock_key, &name).into()
}
