//! syncguard's layout on a Redis Cluster whose key prefix holds no hash tag. syncguard's own
//! keys of one lock (`<prefix>:<key>`, `<prefix>:id:<lockId>`, `<prefix>:fence:<lock key>`)
//! then fall in three slots, and its scripts touch all three: Redis refuses them (CROSSSLOT),
//! so syncguard itself cannot run there and no process of it shares these keys. We keep the
//! lock key and put the index and fence keys in its slot with a tag of that slot in front
//! (`{<tag>}<prefix>:id:<lockId>`). The lockId carries the slot in its last 14 bits, so a
//! release, extend or lookup by lockId alone finds its index key with no extra round trip.
//! Everywhere else (one Redis, Sentinel, memory://, a cluster and a tagged prefix) syncguard's
//! exact layout is kept, for a fleet that still runs syncguard.

use crate::core::basics::slots::{self, SLOTS};

/// How many characters a lockId has: 16 bytes in base64url, unpadded.
const LOCK_ID_CHARS: usize = 22;

/// Whether a backend with `key_prefix` (the client's prefix and syncguard's, as sent) on a
/// cluster (`cluster`) must use the slot-safe layout: its keys share no slot otherwise.
pub fn slot_safe(cluster: bool, key_prefix: &[u8]) -> bool {
    cluster && slots::hash_tag(key_prefix) == key_prefix
}

/// `name` (a key as syncguard names it, before the client's prefix) in `slot`: the client's
/// prefix, then a tag of the slot, then `name`; the tag goes first when the client's prefix
/// holds a `{` (it would open the key's tag before ours).
pub fn in_slot(client_prefix: &[u8], slot: u16, name: &[u8]) -> Vec<u8> {
    let tag = slots::tag_for_slot(slot);
    let braced = [b"{", tag, b"}"].concat();
    if client_prefix.contains(&b'{') {
        [&braced[..], client_prefix, name].concat()
    } else {
        [client_prefix, &braced[..], name].concat()
    }
}

/// `name` (a key as syncguard names it, before the client's prefix) of the lock at `lock_key`
/// (as sent) on a cluster, as a backend with the client's prefix `client_prefix` and
/// syncguard's prefix `prefix` sends it: in the lock key's slot when that layout applies,
/// else behind the client's prefix alone. For readers of the layout (the command line) that
/// hold no backend.
pub fn on_cluster(client_prefix: &[u8], prefix: &[u8], lock_key: &[u8], name: &[u8]) -> Vec<u8> {
    if slot_safe(true, &[client_prefix, prefix].concat()) {
        in_slot(client_prefix, slots::slot(lock_key), name)
    } else {
        [client_prefix, name].concat()
    }
}

/// The value of a base64url character, or `None`.
fn sextet(c: u8) -> Option<u16> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => return None,
    } as u16)
}

fn base64url(value: u16) -> u8 {
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[usize::from(value & 63)]
}

/// The slot a lockId names: bits 114 to 127 of the 16 bytes it encodes (its characters 19
/// and 20, and the top two bits of 21). Any 22 base64url characters name one, so a lockId
/// not made here names a slot whose index does not hold it: "not found". `None` for what is
/// no lockId.
pub fn slot_of_lock_id(lock_id: &str) -> Option<u16> {
    let id = lock_id.as_bytes();
    if id.len() != LOCK_ID_CHARS {
        return None;
    }
    let mut values = [0u16; LOCK_ID_CHARS];
    for (value, &c) in values.iter_mut().zip(id) {
        *value = sextet(c)?;
    }
    Some((values[19] << 8 | values[20] << 2 | values[21] >> 4) % SLOTS)
}

/// `lock_id` naming `slot`: its slot bits replaced, its first 19 characters (114 random
/// bits) and the low bits of its last kept. `None` for what is no lockId.
pub fn lock_id_in(lock_id: &str, slot: u16) -> Option<String> {
    slot_of_lock_id(lock_id)?;
    let slot = slot % SLOTS;
    let mut id = lock_id.as_bytes().to_vec();
    let low = sextet(id[21])? & 0xF;
    id[19] = base64url(slot >> 8);
    id[20] = base64url(slot >> 2);
    id[21] = base64url((slot & 3) << 4 | low);
    String::from_utf8(id).ok()
}

#[cfg(test)]
#[path = "syncguard_slots_tests.rs"]
mod tests;
