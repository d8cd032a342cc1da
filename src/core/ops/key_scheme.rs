//! Where an acquisition's keys come from: ours derive every key from the locker's prefix and
//! the user's key, with a fresh token per attempt; syncguard's are computed by its caller
//! (hashed, prefixed as its client would), with one lockId for every attempt of a call.

/// The keys an acquisition takes.
#[derive(Clone, Copy)]
pub enum KeyScheme<'a> {
    /// The locker's prefix + `key`.
    Ours(&'a str),
    /// syncguard's layout.
    Syncguard(&'a SyncguardKeys),
}

/// One syncguard lock's keys, as its storage scheme names them, and the lockId of the call.
#[derive(Clone, Debug)]
pub struct SyncguardKeys {
    /// The normalised user key (written into the record, and named by errors).
    pub user_key: String,
    /// The lock key as sent (the client's own prefix included).
    pub lock_key: Vec<u8>,
    pub index_key: Vec<u8>,
    pub fence_key: Vec<u8>,
    /// The lock key as the index stores it: the key really written, so the index finds it.
    pub stored_key: Vec<u8>,
    pub lock_id: String,
}

impl KeyScheme<'_> {
    /// The key as the user named it.
    pub fn name(&self) -> &str {
        match self {
            KeyScheme::Ours(key) => key,
            KeyScheme::Syncguard(keys) => &keys.user_key,
        }
    }
}
