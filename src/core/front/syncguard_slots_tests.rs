//! Unit tests of `syncguard_slots.rs`, kept apart so the library file holds no test-only unwraps.
use super::*;
use crate::core::basics::slots::slot;

const ID: &str = "AAAAAAAAAAAAAAAAAAAAAA";

#[test]
fn a_lock_id_carries_any_slot_and_keeps_its_random_part() {
    let random = "q3Zx_-09aZbYc8Lm2kP4Tw";
    for target in [0, 1, 2, 3, 4, 255, 256, 8191, 12182, SLOTS - 1] {
        let id = lock_id_in(random, target).expect("a lockId");
        assert_eq!(slot_of_lock_id(&id), Some(target), "{id}");
        assert_eq!(id.len(), 22);
        assert!(id.bytes().all(|c| sextet(c).is_some()), "{id}");
        assert_eq!(&id[..19], &random[..19], "114 random bits kept");
    }
    // Every slot, through every value of the characters that carry it.
    for target in 0..SLOTS {
        let id = lock_id_in(ID, target).expect("a lockId");
        assert_eq!(slot_of_lock_id(&id), Some(target));
    }
}

#[test]
fn a_canonical_lock_id_stays_canonical() {
    // 16 bytes in base64url: the last character's low 4 bits are zero, so it is one of
    // A, Q, g, w; so it stays, and Node decodes it to 16 bytes and back to the same text.
    for target in 0..4 {
        let id = lock_id_in(ID, target).expect("a lockId");
        assert!(b"AQgw".contains(&id.as_bytes()[21]), "{id}");
    }
}

#[test]
fn the_slot_bits_are_the_last_14_of_the_16_bytes() {
    // 0x3FFF in the last 14 bits: bytes 14 and 15 are 0x3F, 0xFF.
    let id = lock_id_in(ID, SLOTS - 1).expect("a lockId");
    assert_eq!(id, "AAAAAAAAAAAAAAAAAAA__w");
    assert_eq!(lock_id_in(ID, 0).as_deref(), Some(ID));
}

#[test]
fn what_is_no_lock_id_names_no_slot() {
    for bad in [
        "",
        "short",
        "AAAAAAAAAAAAAAAAAAAAA=",
        "AAAAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAA.A",
    ] {
        assert_eq!(slot_of_lock_id(bad), None, "{bad}");
        assert_eq!(lock_id_in(bad, 1), None, "{bad}");
    }
}

#[test]
fn a_key_in_a_slot_lands_there_whatever_the_client_prefix() {
    for client_prefix in [&b""[..], b"app:", b"a{b", b"x{}y", b"}{"] {
        for target in [0, 277, 5061, SLOTS - 1] {
            let key = in_slot(
                client_prefix,
                target,
                b"syncguard:id:AAAAAAAAAAAAAAAAAAAAAA",
            );
            assert_eq!(slot(&key), target, "{}", String::from_utf8_lossy(&key));
        }
    }
    let tag = slots::tag_for_slot(12182);
    assert_eq!(
        in_slot(b"app:", 12182, b"sg:fence:sg:k"),
        [b"app:{", tag, b"}sg:fence:sg:k"].concat()
    );
    assert_eq!(
        in_slot(b"a{", 12182, b"sg:id:x"),
        [b"{", tag, b"}a{sg:id:x"].concat()
    );
}

#[test]
fn a_key_on_a_cluster_is_in_the_lock_key_slot_only_under_an_untagged_prefix() {
    let lock_key = b"app:syncguard:job";
    let slot = slot(lock_key);
    assert_eq!(
        on_cluster(b"app:", b"syncguard", lock_key, b"syncguard:id:x"),
        in_slot(b"app:", slot, b"syncguard:id:x")
    );
    assert_eq!(
        on_cluster(b"", b"app:syncguard", lock_key, b"app:syncguard:id:x"),
        in_slot(b"", slot, b"app:syncguard:id:x")
    );
    // A tag in either prefix: syncguard's names, behind the client's prefix.
    assert_eq!(
        on_cluster(
            b"{app}:",
            b"syncguard",
            b"{app}:syncguard:job",
            b"syncguard:id:x"
        ),
        b"{app}:syncguard:id:x"
    );
    assert_eq!(
        on_cluster(b"app:", b"{sg}", b"app:{sg}:job", b"{sg}:id:x"),
        b"app:{sg}:id:x"
    );
}

#[test]
fn only_a_cluster_with_an_untagged_prefix_is_slot_safe() {
    assert!(slot_safe(true, b"syncguard"));
    assert!(slot_safe(true, b"app:{}syncguard"));
    assert!(slot_safe(true, b""));
    assert!(!slot_safe(true, b"{locks}"));
    assert!(!slot_safe(true, b"app:{x}:sg"));
    assert!(!slot_safe(false, b"syncguard"));
}
