//! Where a lock's data lives in Redis. Every key belonging to one lock shares the lock key's
//! hash slot, so each script touches a single slot and Redis Cluster accepts it.

/// The part of a key Redis Cluster hashes: the text between the first `{` and the next `}`
/// when that text is non-empty, otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The cluster slot of a key (CRC16/XMODEM of its hash tag, mod 16384).
pub fn slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % 16384
}

/// A key beside `lock_key` in the same hash slot: `{<lock_key>}:<suffix>` for a key without
/// a hash tag (`{lock:user:1}:fence`). A key with a tag `T` gets `{T}\0<suffix>\0<lock_key>`:
/// appending to it instead would give the lock key of another user key (`<key>:fence` is what
/// locking `"<key>:fence"` under the same tagged prefix writes), while no lock key under a
/// tagged prefix such as `lock:{app}:` or `{app}:` starts with `{T}` and a NUL. A key that
/// contains `}` but no valid tag cannot be wrapped (the tag would end early), so it gets a
/// short tag chosen to hash to the same slot, in the tagged form.
pub fn sibling_key(lock_key: &[u8], suffix: &str) -> Vec<u8> {
    let tag = hash_tag(lock_key);
    let mut out = Vec::with_capacity(lock_key.len() + suffix.len() + 16);
    if tag.len() == lock_key.len() && !lock_key.contains(&b'}') {
        out.push(b'{');
        out.extend_from_slice(lock_key);
        out.extend_from_slice(b"}:");
        out.extend_from_slice(suffix.as_bytes());
        return out;
    }
    let tag = if tag.len() == lock_key.len() {
        tag_for_slot(slot(lock_key))
    } else {
        tag.to_vec()
    };
    out.push(b'{');
    out.extend_from_slice(&tag);
    out.extend_from_slice(b"}\0");
    out.extend_from_slice(suffix.as_bytes());
    out.push(0);
    out.extend_from_slice(lock_key);
    out
}

/// The fencing counter of a lock.
pub fn fence_key(lock_key: &[u8]) -> Vec<u8> {
    sibling_key(lock_key, "fence")
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

/// The shortest base-36 text whose slot is `target`. Every slot is reached within three
/// characters (46,656 candidates for 16,384 slots), found in well under a millisecond.
fn tag_for_slot(target: u16) -> Vec<u8> {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    for len in 1..=4usize {
        let total = 36usize.pow(len as u32);
        for n in 0..total {
            let mut tag = vec![0u8; len];
            let mut rest = n;
            for byte in tag.iter_mut().rev() {
                *byte = DIGITS[rest % 36];
                rest /= 36;
            }
            if crc16(&tag) % 16384 == target {
                return tag;
            }
        }
    }
    // Unreachable for a 14-bit slot; fall back to a tag that is at least well-formed.
    b"0".to_vec()
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_cluster_spec_example() {
        // The Redis Cluster specification gives 0x31C3 for "123456789".
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn hash_tags_follow_redis_rules() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"plain"), b"plain");
    }

    #[test]
    fn a_sibling_is_never_the_lock_key_of_another_user_key() {
        for prefix in [&b"lock:{app}:"[..], b"{app}:", b"lock:"] {
            let lock_key = [prefix, b"job"].concat();
            let fence = fence_key(&lock_key);
            assert!(
                !fence.starts_with(prefix),
                "{:?}",
                String::from_utf8_lossy(&fence)
            );
        }
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
            b"{exclusive-lock:app}:owner"
        );
        assert_eq!(slot(&owner_key(b"a}b")), slot(b"a}b"));
    }

    #[test]
    fn fence_key_wraps_an_untagged_key() {
        assert_eq!(fence_key(b"lock:user:1"), b"{lock:user:1}:fence");
        assert_eq!(fence_key(b"lock:{user}:1"), b"{user}\0fence\0lock:{user}:1");
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
