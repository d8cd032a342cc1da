//! Where a lock's data lives in Redis. Every key belonging to one lock shares the lock key's
//! hash slot, so each script touches a single slot and Redis Cluster accepts it.

use super::slots::tag_for_slot;
pub use super::slots::{hash_tag, slot};

/// Separates the parts of a sibling key. No UTF-8 text contains the byte 0xFF, and every lock
/// key is UTF-8 (the prefixes and the key are JavaScript strings), so no sibling key can be
/// the lock key of anything, whatever the prefix: not even with `keyPrefix: ''`, where any
/// text at all is a possible lock key.
pub const SEPARATOR: u8 = 0xFF;

/// A key beside `lock_key` in the same hash slot: `{<lock_key>}\xff<suffix>` for a key
/// without a hash tag (`{lock:user:1}\xfffence`); `{T}\xff<suffix>\xff<lock_key>` for a key
/// whose tag is `T` (wrapping it would end the tag early); and the same with a short tag
/// chosen to hash to the key's slot for a key that contains `}` but no valid tag. Distinct
/// lock keys or suffixes never give the same sibling: the untagged form has one separator,
/// the others two, and the whole lock key is recoverable from each.
pub fn sibling_key(lock_key: &[u8], suffix: &str) -> Vec<u8> {
    beside(lock_key, suffix, [SEPARATOR; 2])
}

/// The pub/sub channel of a lock, in the lock key's slot (sharded pub/sub routes by it). Its
/// name is text: channels live apart from keys, so it cannot collide with a lock key, and
/// servers quote a channel in some error replies (an unknown SSUBSCRIBE on Redis 6), which a
/// client reading them as text must be able to read. `{<lock_key>}:<suffix>`, or for a key
/// with a tag (or a `}` but no tag) `{T}\0<suffix>\0<lock_key>`.
pub fn channel_key(lock_key: &[u8], suffix: &str) -> Vec<u8> {
    beside(lock_key, suffix, [b':', 0])
}

/// The lock key whose channel (`channel_key`) is `channel`, when it is one: a wake can come
/// for a lock this connection no longer remembers, and is passed on by the lock key.
pub fn lock_key_of_channel(channel: &[u8], suffix: &str) -> Option<Vec<u8>> {
    let rest = channel.strip_prefix(b"{")?;
    let close = rest.iter().position(|&b| b == b'}')?;
    let (inner, after) = (&rest[..close], &rest[close + 1..]);
    let lock_key = match after.split_first()? {
        (b':', tail) if tail == suffix.as_bytes() => inner.to_vec(),
        (0, tail) => tail
            .strip_prefix(suffix.as_bytes())?
            .strip_prefix(&[0u8][..])?
            .to_vec(),
        _ => return None,
    };
    // Read back only what the same lock key would be announced on.
    (channel_key(&lock_key, suffix) == channel).then_some(lock_key)
}

/// `{<lock_key>}<untagged><suffix>`, or `{T}<tagged><suffix><tagged><lock_key>`.
fn beside(lock_key: &[u8], suffix: &str, [untagged, tagged]: [u8; 2]) -> Vec<u8> {
    let tag = hash_tag(lock_key);
    let mut out = Vec::with_capacity(lock_key.len() + suffix.len() + 16);
    if tag.len() == lock_key.len() && !lock_key.contains(&b'}') {
        out.push(b'{');
        out.extend_from_slice(lock_key);
        out.push(b'}');
        out.push(untagged);
        out.extend_from_slice(suffix.as_bytes());
        return out;
    }
    let tag = if tag.len() == lock_key.len() {
        tag_for_slot(slot(lock_key)).to_vec()
    } else {
        tag.to_vec()
    };
    out.push(b'{');
    out.extend_from_slice(&tag);
    out.push(b'}');
    out.push(tagged);
    out.extend_from_slice(suffix.as_bytes());
    out.push(tagged);
    out.extend_from_slice(lock_key);
    out
}

/// The line of waiters of a fair lock, in arrival order.
pub fn line_key(lock_key: &[u8]) -> Vec<u8> {
    sibling_key(lock_key, "line")
}

/// Until when each waiter in a fair lock's line counts as alive.
pub fn alive_key(lock_key: &[u8]) -> Vec<u8> {
    sibling_key(lock_key, "alive")
}

/// The queue of connections waiting for a lock.
pub fn queue_key(lock_key: &[u8]) -> Vec<u8> {
    sibling_key(lock_key, "waiting")
}

/// The channel a lock's release is announced on: in the lock key's hash slot, so sharded
/// pub/sub can carry it on a cluster.
pub fn released_channel(lock_key: &[u8]) -> Vec<u8> {
    channel_key(lock_key, RELEASED)
}

/// The suffix of `released_channel`.
pub const RELEASED: &str = "released";

/// The ring of connections that wait for a lock and take it by grant: a list of connection
/// ids whose tail is the head of the line (see release_grant.lua).
pub fn ring_key(lock_key: &[u8]) -> Vec<u8> {
    sibling_key(lock_key, "ring")
}

/// The channel a grant of `lock_key` to connection `id` is published on: only that
/// connection listens, so the publish's receiver count says whether it is still there.
pub fn grant_channel(lock_key: &[u8], id: &str) -> Vec<u8> {
    own_channel(lock_key, GRANT, id)
}

/// `grant_channel` around its connection id, as the release script builds it for whichever
/// connection is next: `{L}:grant:` and nothing, or `{T}\0grant:` and `\0<lock_key>`.
pub fn grant_channel_parts(lock_key: &[u8]) -> (Vec<u8>, Vec<u8>) {
    own_channel_parts(lock_key, GRANT)
}

/// The lock key and connection id of a grant channel (`grant_channel`), when it is one.
pub fn grant_of_channel(channel: &[u8]) -> Option<(Vec<u8>, String)> {
    own_of_channel(channel, GRANT)
}

/// The channel a wake of connection `id`, queued for `lock_key` (see announce.lua's
/// `wake_first`), is published on: only that connection listens, so the publish's receiver
/// count says whether it is still there. The scripts build it from the lock's released
/// channel, `released` replaced by `wake:<id>`: `{L}:wake:<id>` or `{T}\0wake:<id>\0<lock_key>`.
pub fn wake_channel(lock_key: &[u8], id: &str) -> Vec<u8> {
    own_channel(lock_key, WAKE, id)
}

/// The lock key and connection id of a wake channel (`wake_channel`), when it is one.
pub fn wake_of_channel(channel: &[u8]) -> Option<(Vec<u8>, String)> {
    own_of_channel(channel, WAKE)
}

/// A channel of one connection's for one lock: `kind` and the id where `channel_key` puts
/// its suffix.
fn own_channel(lock_key: &[u8], kind: &str, id: &str) -> Vec<u8> {
    let (mut channel, suffix) = own_channel_parts(lock_key, kind);
    channel.extend_from_slice(id.as_bytes());
    channel.extend_from_slice(&suffix);
    channel
}

fn own_channel_parts(lock_key: &[u8], kind: &str) -> (Vec<u8>, Vec<u8>) {
    let mut channel = channel_key(lock_key, kind);
    // The tag holds no `}`, and one separator byte follows it.
    let end = channel.iter().position(|&b| b == b'}').unwrap_or(0) + 2 + kind.len();
    let suffix = channel.split_off(end.min(channel.len()));
    (channel, suffix)
}

fn own_of_channel(channel: &[u8], kind: &str) -> Option<(Vec<u8>, String)> {
    let rest = channel.strip_prefix(b"{")?;
    let close = rest.iter().position(|&b| b == b'}')?;
    let (inner, after) = (&rest[..close], &rest[close + 1..]);
    let (lock_key, id) = match after.split_first()? {
        (b':', tail) => (inner.to_vec(), tail.strip_prefix(kind.as_bytes())?),
        (0, tail) => {
            let tail = tail.strip_prefix(kind.as_bytes())?;
            let cut = tail.iter().position(|&b| b == 0)?;
            (tail[cut + 1..].to_vec(), &tail[..cut])
        }
        _ => return None,
    };
    let id = String::from_utf8(id.to_vec()).ok()?;
    // Read back only what the same lock and id would be published on.
    (own_channel(&lock_key, kind, &id) == channel).then_some((lock_key, id))
}

/// The start of a grant channel's suffix, before the connection id.
const GRANT: &str = "grant:";

/// The start of a wake channel's suffix, before the connection id.
const WAKE: &str = "wake:";

/// Ends a wake queue's member for a connection that listens on its own wake channel
/// (`wake_channel`): the scripts tell it there, and skip it when nobody hears. Connection ids
/// are UUIDs, which never end so; a member without it (a connection of an earlier version,
/// or one without its own channel) is told on the lock's released channel, as before.
pub const WAKE_MARK: &str = "!";

/// The fencing counter of a lock.
pub fn fence_key(lock_key: &[u8]) -> Vec<u8> {
    sibling_key(lock_key, "fence")
}

/// How many fences were drawn beside the lock's counter for no acquisition: a transaction
/// that found the lock held drew two all the same (proto/acquire.rs), and says so here, so
/// that `watch` reads acquisitions from the counter's growth less this one's.
pub fn missed_key(lock_key: &[u8]) -> Vec<u8> {
    sibling_key(lock_key, "missed")
}

/// Where ExclusiveLock keeps its owner token, beside a lock key whose value belongs to the
/// original package's format.
pub fn owner_key(lock_key: &[u8]) -> Vec<u8> {
    sibling_key(lock_key, "owner")
}

/// `@logdna/exclusive-lock`'s slug: every run of characters outside `[A-Za-z0-9_]` becomes
/// one `-` (JavaScript's `/[\s\W]+/g` without the `u` flag, so any non-ASCII character counts
/// as a non-word character too).
pub fn slug(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            out.push(ch);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_gives_back_its_lock_key_and_nothing_else_does() {
        for lock_key in [
            &b"lock:job"[..],
            b"lock:{app}:job",
            b"{app}:job",
            b"lock:}odd",
            b"lock:{}:empty-tag",
            b"",
        ] {
            let channel = channel_key(lock_key, "released");
            assert_eq!(
                lock_key_of_channel(&channel, "released").as_deref(),
                Some(lock_key),
                "{}",
                String::from_utf8_lossy(&channel)
            );
            assert_eq!(lock_key_of_channel(&channel, "other"), None);
        }
        for stranger in [
            &b"lock:job"[..],
            b"{lock:job}:releasedx",
            b"{lock:job}",
            b"{a}\0released\0x",
        ] {
            assert_eq!(lock_key_of_channel(stranger, "released"), None);
        }
    }

    #[test]
    fn a_grant_channel_gives_back_its_lock_key_and_id_and_nothing_else_does() {
        for lock_key in [
            &b"lock:job"[..],
            b"lock:{app}:job",
            b"{app}:job",
            b"lock:}odd",
        ] {
            let channel = grant_channel(lock_key, "c0ffee");
            let (head, tail) = grant_channel_parts(lock_key);
            assert_eq!([&head[..], b"c0ffee", &tail[..]].concat(), channel);
            assert_eq!(slot(&channel), slot(lock_key));
            assert_eq!(
                grant_of_channel(&channel),
                Some((lock_key.to_vec(), "c0ffee".to_owned()))
            );
            assert_eq!(lock_key_of_channel(&channel, RELEASED), None);
            let released = released_channel(lock_key);
            assert_eq!(grant_of_channel(&released), None);
        }
        assert_eq!(grant_channel(b"lock:job", "c1"), b"{lock:job}:grant:c1");
        for stranger in [&b"{lock:job}:grant"[..], b"{a}\0grant:c1", b"lock:job"] {
            assert_eq!(grant_of_channel(stranger), None);
        }
    }

    #[test]
    fn a_sibling_is_never_a_lock_key_whatever_the_prefix() {
        for lock_key in [
            &b"lock:{app}:job"[..],
            b"{app}:job",
            b"lock:job",
            b"{foo}:fence",
        ] {
            for suffix in [
                "fence", "owner", "waiting", "line", "alive", "released", "ring", "missed",
            ] {
                let sibling = sibling_key(lock_key, suffix);
                assert!(
                    std::str::from_utf8(&sibling).is_err(),
                    "{sibling:?} is text"
                );
            }
        }
        // With an empty prefix, the user key "{foo}:fence" is a lock key of its own.
        assert_ne!(fence_key(b"foo"), b"{foo}:fence");
    }

    #[test]
    fn slug_matches_the_original() {
        assert_eq!(slug("my distributed app"), "my-distributed-app");
        assert_eq!(slug("exclusive-lock"), "exclusive-lock");
        assert_eq!(slug("a  b\t\nc"), "a-b-c");
        assert_eq!(slug("café:{x}"), "caf-x-");
        assert_eq!(slug("🔒lock"), "-lock");
    }

    #[test]
    fn owner_key_sits_beside_the_lock() {
        assert_eq!(
            owner_key(b"exclusive-lock:app"),
            b"{exclusive-lock:app}\xffowner"
        );
        assert_eq!(slot(&owner_key(b"a}b")), slot(b"a}b"));
    }

    #[test]
    fn fence_key_wraps_an_untagged_key() {
        assert_eq!(fence_key(b"lock:user:1"), b"{lock:user:1}\xfffence");
        assert_eq!(
            fence_key(b"lock:{user}:1"),
            b"{user}\xfffence\xfflock:{user}:1"
        );
    }

    #[test]
    fn fence_key_always_shares_the_slot_of_the_lock_key() {
        for key in [
            &b"lock:user:1"[..],
            b"lock:{user}:1",
            b"a{}b",
            b"a}b",
            b"}{",
            b"{}",
            b"lock:\xff\x00 \n*?[",
        ] {
            let fence = fence_key(key);
            assert_eq!(
                slot(&fence),
                slot(key),
                "{:?}",
                String::from_utf8_lossy(key)
            );
        }
    }
}
