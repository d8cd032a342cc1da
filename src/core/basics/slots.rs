//! Redis Cluster hash slots: the part of a key Redis hashes, the slot it gives, and for every
//! slot a short tag of that slot, so that a key can be put in any slot chosen (`{<tag>}...`).

use std::sync::OnceLock;

/// The number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

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
    crc16(hash_tag(key)) % SLOTS
}

/// The longest tag `tag_for_slot` gives.
const TAG_MAX: usize = 4;

/// The shortest base-36 text whose slot is `target` (the first in counting order among those
/// of its length): these name keys already written (`keys::sibling_key`), so they never
/// change. Every slot has one of at most four characters (all but 85 of three or fewer; the
/// tests check each): the table is made once, on first use, from some 60,000 candidates.
pub fn tag_for_slot(target: u16) -> &'static [u8] {
    static TAGS: OnceLock<Vec<([u8; TAG_MAX], u8)>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut tags = vec![([0u8; TAG_MAX], 0u8); usize::from(SLOTS)];
        let mut found = 0;
        for len in 1..=TAG_MAX {
            for n in 0..36usize.pow(len as u32) {
                if found == tags.len() {
                    return tags;
                }
                let mut tag = [0u8; TAG_MAX];
                let mut rest = n;
                for byte in tag[..len].iter_mut().rev() {
                    *byte = DIGITS[rest % 36];
                    rest /= 36;
                }
                let entry = &mut tags[usize::from(crc16(&tag[..len]) % SLOTS)];
                if entry.1 == 0 {
                    // `len` is at most TAG_MAX.
                    *entry = (tag, len as u8);
                    found += 1;
                }
            }
        }
        tags
    });
    match tags.get(usize::from(target % SLOTS)) {
        Some((tag, len)) => &tag[..usize::from(*len)],
        None => b"0",
    }
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
    fn every_slot_has_a_short_tag_of_that_slot() {
        let mut seen = std::collections::HashSet::new();
        for target in 0..SLOTS {
            let tag = tag_for_slot(target);
            assert!((1..=TAG_MAX).contains(&tag.len()), "slot {target}: {tag:?}");
            assert!(tag.iter().all(u8::is_ascii_alphanumeric), "{tag:?}");
            assert_eq!(slot(tag), target, "{}", String::from_utf8_lossy(tag));
            // Put in a key as its tag, it decides the key's slot whatever follows.
            let key = [b"{", tag, b"}syncguard:id:x{y}"].concat();
            assert_eq!(slot(&key), target);
            assert!(seen.insert(tag), "{tag:?} twice");
        }
    }

    #[test]
    fn a_tag_is_the_shortest_of_its_slot() {
        // "0" and "z" are the first candidates of their slots.
        assert_eq!(tag_for_slot(slot(b"0")), b"0");
        assert_eq!(tag_for_slot(slot(b"z")), b"z");
        let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut within_three = std::collections::HashSet::new();
        for &a in digits {
            within_three.insert(slot(&[a]));
            for &b in digits {
                within_three.insert(slot(&[a, b]));
                for &c in digits {
                    within_three.insert(slot(&[a, b, c]));
                }
            }
        }
        assert_eq!(within_three.len(), usize::from(SLOTS) - 85);
        for target in 0..SLOTS {
            let long = tag_for_slot(target).len() == TAG_MAX;
            assert_eq!(long, !within_three.contains(&target), "slot {target}");
        }
    }

    #[test]
    fn the_table_gives_what_a_search_in_counting_order_gives() {
        // The search the table replaced, which named keys already written.
        fn search(target: u16) -> Vec<u8> {
            let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
            for len in 1..=TAG_MAX {
                for n in 0..36usize.pow(len as u32) {
                    let mut tag = vec![0u8; len];
                    let mut rest = n;
                    for byte in tag.iter_mut().rev() {
                        *byte = digits[rest % 36];
                        rest /= 36;
                    }
                    if slot(&tag) == target {
                        return tag;
                    }
                }
            }
            Vec::new()
        }
        for target in (0..SLOTS).step_by(331).chain([277, SLOTS - 1]) {
            assert_eq!(tag_for_slot(target), search(target), "slot {target}");
        }
    }
}
