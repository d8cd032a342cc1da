//! Grants across processes: a release that gives the lock to the next connection of the
//! lock's ring, told on its own channel (release_grant.lua). A waiter's attempt that joins
//! the ring is `acquire::Layout::Ring` (join_ring.lua).

use super::acquire::WindowArg;
use super::{scripts, Op, Wire};
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::resp;
use redis::Value;
use std::time::Duration;

/// Releases our lock (`token`, fenced `fence`, with fences up to `last` kept for its chain),
/// granting it to the next connection of the ring that hears the grant, for `claim`, under
/// the fresh token `grant`. `id` is our connection; `leave` takes it out of the ring too.
/// Freed with nobody in the ring to take it, the lock's wake queue hears of it unless
/// `ours_wait` (a waiter of ours tries instead, as with release_wake.lua).
pub struct ReleaseGrant<'a> {
    pub lock_key: &'a [u8],
    pub token: &'a str,
    pub fence: u64,
    pub last: u64,
    pub grant: &'a str,
    pub claim: Duration,
    pub id: &'a str,
    pub leave: bool,
    pub ours_wait: bool,
    /// How long the fence counter outlives the lock, in ms; 0 forever (see fence.lua).
    pub fence_retention_ms: u64,
    /// Whether a block drawn for the grant leaves the counter's expiry alone, unread: the
    /// connection knows it kept `GRANT_BLOCK` claims past now and the window (see
    /// ops/kept_fences.rs; never for a window of 0).
    pub fences_known_kept: bool,
}

/// How many fences a grant draws at once (release_grant.lua's BLOCK): the counter is kept
/// that many claims past the grant, and the window.
pub const GRANT_BLOCK: u32 = 1024;

impl<'a> ReleaseGrant<'a> {
    /// A kick: grants the lock at `lock_key`, if it is free, to the next connection of its
    /// ring that listens, as our release would (see wait/tenure.rs). No fences are carried:
    /// others may have drawn some since the lock was ours.
    pub fn kick(
        lock_key: &'a [u8],
        grant: &'a str,
        claim: Duration,
        id: &'a str,
        fence_retention_ms: u64,
    ) -> Self {
        ReleaseGrant {
            lock_key,
            token: "",
            fence: 0,
            last: 0,
            grant,
            claim,
            id,
            leave: false,
            ours_wait: false,
            fence_retention_ms,
            fences_known_kept: false,
        }
    }
}

/// What a grant-giving release did.
#[derive(Debug, PartialEq, Eq)]
pub enum Released {
    /// The lock was not ours: nothing changed.
    NotOurs,
    /// Deleted: nobody in the ring heard a grant.
    Freed,
    /// Deleted and announced to the first connection of the lock's wake queue, which waits
    /// without grants: the ring has had the lock long enough (see release_grant.lua).
    Yielded,
    /// Granted to connection `to`, with `fence` and the fences up to `last` for its chain.
    Granted { to: String, fence: u64, last: u64 },
}

impl Op for ReleaseGrant<'_> {
    type Out = Released;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let key = self.lock_key;
        let (fence, last) = (resp::decimal(self.fence), resp::decimal(self.last));
        let claim = resp::decimal(self.claim.as_millis() as u64);
        let window = WindowArg::new(self.fence_retention_ms, self.fences_known_kept);
        let flag = |on: bool| -> &'static [u8] {
            if on {
                b"1"
            } else {
                b"0"
            }
        };
        let (before, after) = keys::grant_channel_parts(key);
        wire.script(
            &scripts::RELEASE_GRANT,
            &[
                key,
                &keys::fence_key(key),
                &keys::ring_key(key),
                &keys::queue_key(key),
            ],
            &[
                self.token.as_bytes(),
                fence.as_bytes(),
                last.as_bytes(),
                self.grant.as_bytes(),
                claim.as_bytes(),
                self.id.as_bytes(),
                flag(self.leave),
                &before,
                &after,
                window.as_bytes(),
                &keys::released_channel(key),
                flag(self.ours_wait),
            ],
        );
    }

    fn decode(&self, reply: Value) -> Result<Released, LockError> {
        if let Value::Array(_) = reply {
            let (_, to, fence, last) = resp::typed::<(i64, String, u64, u64)>(reply)?;
            return Ok(Released::Granted { to, fence, last });
        }
        Ok(match resp::typed::<i64>(reply)? {
            1 => Released::Freed,
            3 => Released::Yielded,
            _ => Released::NotOurs,
        })
    }
}

/// Takes connection `id` out of the lock's ring (its last waiter left).
pub struct LeaveRing<'a> {
    pub lock_key: &'a [u8],
    pub id: &'a str,
}

impl Op for LeaveRing<'_> {
    type Out = ();

    fn encode<W: Wire>(&self, wire: &mut W) {
        let ring = keys::ring_key(self.lock_key);
        wire.command(&[b"LREM", &ring, b"0", self.id.as_bytes()]);
    }

    fn decode(&self, reply: Value) -> Result<(), LockError> {
        resp::typed::<i64>(reply).map(drop)
    }
}

/// What a grant message (`<fence> <last> <claim ms> <token>`, see release_grant.lua) says.
#[derive(Debug, PartialEq, Eq)]
pub struct GrantMessage {
    pub fence: u64,
    pub last: u64,
    pub claim: Duration,
    pub token: String,
}

impl GrantMessage {
    /// Reads a grant message; `None` for anything else.
    pub fn parse(message: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(message).ok()?;
        let mut parts = text.split(' ');
        let mut number = || parts.next()?.parse::<u64>().ok();
        let (fence, last, claim) = (number()?, number()?, number()?);
        let token = parts.next().filter(|token| !token.is_empty())?;
        if parts.next().is_some() || fence == 0 || fence > last {
            return None;
        }
        Some(GrantMessage {
            fence,
            last,
            claim: Duration::from_millis(claim),
            token: token.to_owned(),
        })
    }
}
