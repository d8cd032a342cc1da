//! The atomic operations, one Lua file each. A `Script` knows its SHA-1, so every call is an
//! EVALSHA. On one server (a Sentinel set's master, a Redlock's node) every script is loaded
//! once per connection, ahead of the first call after each (re)connect (`Link::preload`; a
//! caller that needs them known loaded asks `Store::ensure_scripts`), so that an acquire is one round trip and
//! its TTL is counted from the EVALSHA that ran; a NOSCRIPT that slips through (a SCRIPT FLUSH
//! without a reconnect) loads that script and sends the call again. A cluster loads nothing
//! ahead: a call answered NOSCRIPT goes again whole (EVAL, `source_of`) to its key's node. Lua scripts cannot share functions, so the
//! ones that check an ExclusiveLock's two keys get `same_expiry.lua` prepended, the ones that
//! wake a waiter `announce.lua` (release_wake.lua only past its hot path), the ones that draw fences or keep a lock's counter
//! `fence.lua`, a waiter's attempts `queued_attempt.lua`; syncguard's layout (`sg_*.lua`) gets `sg_common.lua`.

use redis::Script;
use std::sync::LazyLock;

/// How far apart (ms) an ExclusiveLock's two keys' expiries may be and still count as set
/// together: same_expiry.lua's `EXPIRY_SLACK`, where it says why.
pub(crate) const EXPIRY_SLACK_MS: i64 = 50;

pub(crate) const ACQUIRE_SOURCE: &str = concat!(
    include_str!("fence.lua"),
    include_str!("same_expiry.lua"),
    include_str!("acquire.lua")
);
pub(crate) const RELEASE_SOURCE: &str =
    concat!(include_str!("same_expiry.lua"), include_str!("release.lua"));
pub(crate) const EXTEND_SOURCE: &str =
    concat!(include_str!("fence.lua"), include_str!("extend.lua"));
const REFRESH_SOURCE: &str = concat!(
    include_str!("fence.lua"),
    include_str!("same_expiry.lua"),
    include_str!("refresh.lua")
);
const INSPECT_SOURCE: &str = include_str!("inspect.lua");
const FENCED_SET_SOURCE: &str = include_str!("fenced_set.lua");
// announce.lua in the middle: see release_wake.lua.
pub(crate) const RELEASE_WAKE_SOURCE: &str = concat!(
    include_str!("release_wake.lua"),
    include_str!("announce.lua"),
    include_str!("release_wake_tail.lua")
);
const WAKE_NEXT_SOURCE: &str = concat!(include_str!("announce.lua"), include_str!("wake_next.lua"));
const ENQUEUE_SOURCE: &str = include_str!("enqueue.lua");
const ACQUIRE_QUEUED_SOURCE: &str = concat!(
    include_str!("fence.lua"),
    include_str!("queued_attempt.lua"),
    include_str!("acquire_queued.lua")
);
const JOIN_RING_SOURCE: &str = concat!(
    include_str!("fence.lua"),
    include_str!("queued_attempt.lua"),
    include_str!("join_ring.lua")
);
const RELEASE_GRANT_SOURCE: &str = concat!(
    include_str!("fence.lua"),
    include_str!("announce.lua"),
    include_str!("release_grant.lua")
);
pub(crate) const HANDOFF_SOURCE: &str =
    concat!(include_str!("fence.lua"), include_str!("handoff.lua"));
const REFRESH_MANY_SOURCE: &str =
    concat!(include_str!("fence.lua"), include_str!("refresh_many.lua"));
const ACQUIRE_FAIR_SOURCE: &str =
    concat!(include_str!("fence.lua"), include_str!("acquire_fair.lua"));
const RELEASE_FAIR_SOURCE: &str = concat!(
    include_str!("announce.lua"),
    include_str!("release_fair.lua")
);
const LEAVE_FAIR_SOURCE: &str =
    concat!(include_str!("announce.lua"), include_str!("leave_fair.lua"));
const FENCE_RAISE_SOURCE: &str =
    concat!(include_str!("fence.lua"), include_str!("fence_raise.lua"));
pub(crate) const SG_ACQUIRE_SOURCE: &str = concat!(
    include_str!("sg_common.lua"),
    include_str!("sg_acquire.lua")
);
pub(crate) const SG_RELEASE_SOURCE: &str = concat!(
    include_str!("sg_common.lua"),
    include_str!("announce.lua"),
    include_str!("sg_release.lua")
);
const SG_EXTEND_SOURCE: &str =
    concat!(include_str!("sg_common.lua"), include_str!("sg_extend.lua"));
const SG_IS_LOCKED_SOURCE: &str = concat!(
    include_str!("sg_common.lua"),
    include_str!("sg_is_locked.lua")
);
const SG_LOOKUP_SOURCE: &str =
    concat!(include_str!("sg_common.lua"), include_str!("sg_lookup.lua"));
const SG_FENCE_RAISE_SOURCE: &str = concat!(
    include_str!("fence.lua"),
    include_str!("sg_common.lua"),
    include_str!("sg_fence_raise.lua")
);
pub(crate) const COUNT_MISSED_SOURCE: &str = include_str!("count_missed.lua");

/// Every script, by the name `DEBUG` lines give it (basics/trace.rs), beside its source.
const NAMED: [(&str, &str); 25] = [
    ("acquire", ACQUIRE_SOURCE),
    ("release", RELEASE_SOURCE),
    ("extend", EXTEND_SOURCE),
    ("refresh", REFRESH_SOURCE),
    ("inspect", INSPECT_SOURCE),
    ("fenced_set", FENCED_SET_SOURCE),
    ("release_wake", RELEASE_WAKE_SOURCE),
    ("wake_next", WAKE_NEXT_SOURCE),
    ("enqueue", ENQUEUE_SOURCE),
    ("acquire_queued", ACQUIRE_QUEUED_SOURCE),
    ("handoff", HANDOFF_SOURCE),
    ("refresh_many", REFRESH_MANY_SOURCE),
    ("acquire_fair", ACQUIRE_FAIR_SOURCE),
    ("release_fair", RELEASE_FAIR_SOURCE),
    ("leave_fair", LEAVE_FAIR_SOURCE),
    ("sg_acquire", SG_ACQUIRE_SOURCE),
    ("sg_release", SG_RELEASE_SOURCE),
    ("sg_extend", SG_EXTEND_SOURCE),
    ("sg_is_locked", SG_IS_LOCKED_SOURCE),
    ("sg_lookup", SG_LOOKUP_SOURCE),
    ("fence_raise", FENCE_RAISE_SOURCE),
    ("sg_fence_raise", SG_FENCE_RAISE_SOURCE),
    ("join_ring", JOIN_RING_SOURCE),
    ("release_grant", RELEASE_GRANT_SOURCE),
    ("count_missed", COUNT_MISSED_SOURCE),
];

/// Every script's source, for loading them all at once.
pub const ALL_SOURCES: [&str; 25] = {
    let mut all = [""; 25];
    let mut i = 0;
    while i < NAMED.len() {
        all[i] = NAMED[i].1;
        i += 1;
    }
    all
};

pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_SOURCE));
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SOURCE));
pub static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_SOURCE));
pub static REFRESH: LazyLock<Script> = LazyLock::new(|| Script::new(REFRESH_SOURCE));
pub static INSPECT: LazyLock<Script> = LazyLock::new(|| Script::new(INSPECT_SOURCE));
pub static FENCED_SET: LazyLock<Script> = LazyLock::new(|| Script::new(FENCED_SET_SOURCE));
pub static RELEASE_WAKE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_WAKE_SOURCE));
pub static WAKE_NEXT: LazyLock<Script> = LazyLock::new(|| Script::new(WAKE_NEXT_SOURCE));
pub static ENQUEUE: LazyLock<Script> = LazyLock::new(|| Script::new(ENQUEUE_SOURCE));
pub static ACQUIRE_QUEUED: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_QUEUED_SOURCE));
pub static HANDOFF: LazyLock<Script> = LazyLock::new(|| Script::new(HANDOFF_SOURCE));
pub static REFRESH_MANY: LazyLock<Script> = LazyLock::new(|| Script::new(REFRESH_MANY_SOURCE));
pub static ACQUIRE_FAIR: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_FAIR_SOURCE));
pub static RELEASE_FAIR: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_FAIR_SOURCE));
pub static LEAVE_FAIR: LazyLock<Script> = LazyLock::new(|| Script::new(LEAVE_FAIR_SOURCE));
pub static JOIN_RING: LazyLock<Script> = LazyLock::new(|| Script::new(JOIN_RING_SOURCE));
pub static RELEASE_GRANT: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_GRANT_SOURCE));
pub static FENCE_RAISE: LazyLock<Script> = LazyLock::new(|| Script::new(FENCE_RAISE_SOURCE));
pub static SG_ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(SG_ACQUIRE_SOURCE));
pub static SG_RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(SG_RELEASE_SOURCE));
pub static SG_EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(SG_EXTEND_SOURCE));
pub static SG_IS_LOCKED: LazyLock<Script> = LazyLock::new(|| Script::new(SG_IS_LOCKED_SOURCE));
pub static SG_LOOKUP: LazyLock<Script> = LazyLock::new(|| Script::new(SG_LOOKUP_SOURCE));
pub static COUNT_MISSED: LazyLock<Script> = LazyLock::new(|| Script::new(COUNT_MISSED_SOURCE));
pub static SG_FENCE_RAISE: LazyLock<Script> = LazyLock::new(|| Script::new(SG_FENCE_RAISE_SOURCE));

/// The text of a syncguard script, for a caller's own `eval` (a test double that can only
/// run a script given whole); `None` for the others, which only our connections send.
pub fn sg_source(script: &Script) -> Option<&'static str> {
    let ours: [(&Script, &'static str); 5] = [
        (&SG_ACQUIRE, SG_ACQUIRE_SOURCE),
        (&SG_RELEASE, SG_RELEASE_SOURCE),
        (&SG_EXTEND, SG_EXTEND_SOURCE),
        (&SG_IS_LOCKED, SG_IS_LOCKED_SOURCE),
        (&SG_LOOKUP, SG_LOOKUP_SOURCE),
    ];
    ours.into_iter()
        .find(|(known, _)| std::ptr::eq(*known, script))
        .map(|(_, source)| source)
}

/// Every script's SHA-1 beside its name and text.
static BY_HASH: LazyLock<Vec<(String, &'static str, &'static str)>> = LazyLock::new(|| {
    (NAMED.iter())
        .map(|&(name, source)| (Script::new(source).get_hash().to_owned(), name, source))
        .collect()
});

fn by_hash(sha: &[u8]) -> Option<&'static (String, &'static str, &'static str)> {
    BY_HASH.iter().find(|(hash, ..)| hash.as_bytes() == sha)
}

/// The text of the script whose SHA-1 is `sha`, to send a call whole (EVAL) where its EVALSHA
/// came back NOSCRIPT.
pub fn source_of(sha: &[u8]) -> Option<&'static str> {
    by_hash(sha).map(|&(_, _, source)| source)
}

/// A script's name by its SHA1, for `DEBUG` lines (basics/trace.rs).
pub fn name_of(sha: &[u8]) -> Option<&'static str> {
    by_hash(sha).map(|&(_, name, _)| name)
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
