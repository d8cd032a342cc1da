use super::*;

/// Every script a call may send, so that a NOSCRIPT can always be answered with its text.
fn every() -> [&'static Script; 25] {
    [
        &ACQUIRE,
        &RELEASE,
        &EXTEND,
        &REFRESH,
        &INSPECT,
        &FENCED_SET,
        &RELEASE_WAKE,
        &WAKE_NEXT,
        &ENQUEUE,
        &ACQUIRE_QUEUED,
        &HANDOFF,
        &REFRESH_MANY,
        &ACQUIRE_FAIR,
        &RELEASE_FAIR,
        &LEAVE_FAIR,
        &SG_ACQUIRE,
        &SG_RELEASE,
        &SG_EXTEND,
        &SG_IS_LOCKED,
        &SG_LOOKUP,
        &FENCE_RAISE,
        &SG_FENCE_RAISE,
        &JOIN_RING,
        &RELEASE_GRANT,
        &COUNT_MISSED,
    ]
}

#[test]
fn each_script_is_found_by_its_hash_as_its_own_text() {
    for script in every() {
        let hash = script.get_hash();
        let source = source_of(hash.as_bytes()).unwrap_or_else(|| panic!("{hash} not found"));
        assert_eq!(Script::new(source).get_hash(), hash);
    }
}

#[test]
fn an_unknown_hash_has_no_text() {
    assert_eq!(
        source_of(Script::new("return 1").get_hash().as_bytes()),
        None
    );
    assert_eq!(source_of(b""), None);
}

#[test]
fn each_script_has_a_name_for_debug_lines() {
    for script in every() {
        let hash = script.get_hash();
        assert!(name_of(hash.as_bytes()).is_some(), "{hash} has no name");
    }
    assert_eq!(name_of(JOIN_RING.get_hash().as_bytes()), Some("join_ring"));
    assert_eq!(
        name_of(RELEASE_GRANT.get_hash().as_bytes()),
        Some("release_grant")
    );
}

#[test]
fn the_expiry_slack_the_tests_use_is_the_scripts() {
    let line = format!("local EXPIRY_SLACK = {EXPIRY_SLACK_MS}\n");
    assert!(include_str!("same_expiry.lua").contains(&line));
}
