//! An ExclusiveLock's two keys, as the watchdog refreshes and an ended owner's release frees
//! them: in a file of its own so both use it without using each other.

/// The lock key an owner key guards, what it must hold, and the lock's name.
pub struct Pair {
    pub data_key: Vec<u8>,
    pub expected: Vec<u8>,
    /// The lock key's absolute expiry (ms) as the transaction that took it set it: what
    /// proves it ours until a refresh makes the owner key ours too (see same_expiry.lua).
    pub set_at: Option<i64>,
    pub name: String,
}
