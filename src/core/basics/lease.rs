//! A lock we acquired: its identity and what we locally know of its validity.

use super::clock::Stamp;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The state a handle reads and a release or extend updates. `deadline` is when the lock
/// expires at the latest as far as we can tell: the TTL counted from when the request was
/// *sent*, so network delay can only make us think it expires earlier, never later.
#[derive(Debug, Clone, Copy)]
struct Validity {
    released: bool,
    deadline: Instant,
    expires_at_ms: u64,
    /// When the request that last confirmed the lock (its acquisition or an extend) was
    /// sent: a drop of the connection at or after it puts the lock in doubt.
    confirmed: Instant,
    /// A grant from another process's release, valid for its claim only until a refresh
    /// with our own TTL confirms it (see release_grant.lua).
    claim_only: bool,
}

#[derive(Debug)]
pub struct Lease {
    /// The key as the user gave it, without prefixes.
    pub key: String,
    /// The full Redis key.
    pub redis_key: Vec<u8>,
    pub token: String,
    pub fence: u64,
    /// The TTL it was acquired with.
    ttl: Duration,
    /// When the acquiring request was sent.
    sent: Stamp,
    validity: Mutex<Validity>,
}

impl Lease {
    pub fn new(
        key: String,
        redis_key: Vec<u8>,
        token: String,
        fence: u64,
        sent: Stamp,
        ttl: Duration,
    ) -> Self {
        Lease {
            key,
            redis_key,
            token,
            fence,
            ttl,
            sent,
            validity: Mutex::new(Validity {
                released: false,
                deadline: until(sent, ttl),
                expires_at_ms: wall_until(sent, ttl),
                confirmed: sent.at,
                claim_only: false,
            }),
        }
    }

    /// A grant another process's release made to a waiter wanting `ttl`: fenced `fence`, set
    /// by Redis for `claim` after `anchor` (a request
    /// sent before the grant ran, see `LockStore::answered_sent`; `None`: unknown, and the
    /// grant counts as run out). Its key as the user named it is the waiter's to fill in.
    pub fn granted(
        redis_key: Vec<u8>,
        token: String,
        fence: u64,
        (anchor, claim): (Option<Stamp>, Duration),
        ttl: Duration,
    ) -> Self {
        let (sent, valid) = match anchor {
            Some(anchor) => (anchor, claim.min(ttl)),
            None => (Stamp::now(), Duration::ZERO),
        };
        let lease = Lease::new(String::new(), redis_key, token, fence, sent, ttl);
        {
            let mut v = lease.validity();
            v.deadline = until(sent, valid);
            v.expires_at_ms = wall_until(sent, valid);
            v.claim_only = true;
        }
        lease
    }

    /// Whether it is a grant still valid for its claim only (see `granted`).
    pub fn is_claim_only(&self) -> bool {
        self.validity().claim_only
    }

    /// A lease a caller kept the parts of (a JS handle): valid until `deadline` by our clock.
    pub fn resumed(
        key: String,
        redis_key: Vec<u8>,
        token: String,
        fence: u64,
        deadline: Instant,
    ) -> Self {
        let sent = super::clock::Stamp::now();
        let left = deadline.saturating_duration_since(sent.at);
        Lease {
            key,
            redis_key,
            token,
            fence,
            ttl: left,
            sent,
            validity: Mutex::new(Validity {
                released: false,
                deadline,
                expires_at_ms: sent.wall_ms + left.as_millis() as u64,
                // Not known for the parts a caller kept; an extend sets it.
                confirmed: sent.at,
                claim_only: false,
            }),
        }
    }

    /// Until when the lock counts as ours by our clock.
    pub fn deadline(&self) -> Instant {
        self.validity().deadline
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn sent(&self) -> Stamp {
        self.sent
    }

    fn validity(&self) -> std::sync::MutexGuard<'_, Validity> {
        // Plain copyable data: a poisoned lock still holds a consistent value.
        super::sync::lock(&self.validity)
    }

    /// Held means: not released, and its TTL has not run out by our conservative clock.
    pub fn is_held(&self) -> bool {
        let v = *self.validity();
        !v.released && Instant::now() < v.deadline
    }

    /// How long the lock stays valid by our clock (zero once it has run out).
    pub fn remaining(&self) -> Duration {
        self.validity()
            .deadline
            .saturating_duration_since(Instant::now())
    }

    pub fn is_released(&self) -> bool {
        self.validity().released
    }

    pub fn expires_at_ms(&self) -> u64 {
        self.validity().expires_at_ms
    }

    /// When the request that last confirmed the lock was sent.
    pub fn confirmed(&self) -> Instant {
        self.validity().confirmed
    }

    /// Redis confirmed a new TTL for a request sent at `sent_at`. A release that landed while
    /// the extend was in flight wins: the lock stays released.
    pub fn extended(&self, sent: Stamp, ttl: Duration) {
        let mut v = self.validity();
        if !v.released {
            v.deadline = until(sent, ttl);
            v.expires_at_ms = wall_until(sent, ttl);
            v.confirmed = sent.at;
            v.claim_only = false;
        }
    }

    /// The same lease, its expiry as the lock's record states it (syncguard's, by the
    /// server's clock): that is the expiry its caller reports.
    pub fn stated_expiry(self, expiry_ms: i64) -> Self {
        self.validity().expires_at_ms = u64::try_from(expiry_ms).unwrap_or(0);
        self
    }

    pub fn mark_released(&self) {
        self.validity().released = true;
    }
}

/// The deadline of a lock sent at `sent` for `ttl`; a TTL of centuries (syncguard takes any
/// whole number) saturates instead of overflowing the clock.
fn until(sent: Stamp, ttl: Duration) -> Instant {
    let validity = super::clock::validity(ttl);
    (sent.at.checked_add(validity))
        .or_else(|| sent.at.checked_add(Duration::from_secs(1 << 40)))
        .unwrap_or(sent.at)
}

fn wall_until(sent: Stamp, ttl: Duration) -> u64 {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    sent.wall_ms.saturating_add(ttl_ms)
}
