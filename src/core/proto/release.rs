//! Giving up a lock we hold, and handing it to a waiter's token.

use super::{int, scripts, Op, Wire};
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::resp;
use redis::Value;
use std::time::Duration;

/// Deletes `lock_key` if it still holds `token`; answers whether it did. Also what frees a
/// lock an attempt won after its caller stopped waiting: a release like any other, so the
/// next queued connection is woken either way.
pub struct Release<'a> {
    /// KEYS[1]: the lock key, or an ExclusiveLock's owner key.
    pub lock_key: &'a [u8],
    pub token: &'a str,
    pub kind: ReleaseKind<'a>,
}

pub enum ReleaseKind<'a> {
    /// release_wake.lua: wakes the first connection queued for the lock, unless
    /// `ours_wait` (the releaser wakes its own waiters, who are trying already).
    Wake { ours_wait: bool },
    /// release_fair.lua: wakes the first in the fair lock's line.
    Fair,
    /// release.lua with an ExclusiveLock's two keys: the owner key (`lock_key`) and the
    /// lock key, which must hold `contents` (and, for a transaction's lock, expire at
    /// `set_at`; see same_expiry.lua).
    Pair {
        data_key: &'a [u8],
        contents: &'a [u8],
        set_at: Option<i64>,
    },
}

impl<'a> Release<'a> {
    /// Frees a lock an attempt (or a handover) of `token` may have won after its caller
    /// stopped waiting: released as any release is, so a queued waiter is woken.
    pub fn late_win(lock_key: &'a [u8], token: &'a str, fair: bool) -> Self {
        let kind = match fair {
            true => ReleaseKind::Fair,
            false => ReleaseKind::Wake { ours_wait: false },
        };
        Release {
            lock_key,
            token,
            kind,
        }
    }
}

impl Op for Release<'_> {
    type Out = bool;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let (key, token) = (self.lock_key, self.token.as_bytes());
        match &self.kind {
            ReleaseKind::Wake { ours_wait } => {
                let ours: &[u8] = if *ours_wait { b"1" } else { b"0" };
                wire.script(
                    &scripts::RELEASE_WAKE,
                    &[key, &keys::queue_key(key)],
                    &[token, &keys::released_channel(key), ours],
                );
            }
            ReleaseKind::Fair => wire.script(
                &scripts::RELEASE_FAIR,
                &[key, &keys::line_key(key), &keys::alive_key(key)],
                &[token, &keys::released_channel(key)],
            ),
            ReleaseKind::Pair {
                data_key,
                contents,
                set_at,
            } => {
                let set_at = set_at.map(|at| at.to_string()).unwrap_or_default();
                wire.script(
                    &scripts::RELEASE,
                    &[key, data_key],
                    &[token, contents, set_at.as_bytes()],
                );
            }
        }
    }

    fn decode(&self, reply: Value) -> Result<bool, LockError> {
        Ok(int(reply)? == 1)
    }
}

/// Hands our lock (`token`, fenced `fence`) to a waiter's fresh token `to` for `ttl`, the
/// fence counted on by one; safe to run twice (see handoff.lua). Answers the waiter's fence,
/// or `None` when the lock was not ours.
pub struct HandOver<'a> {
    pub lock_key: &'a [u8],
    pub token: &'a str,
    pub fence: u64,
    pub to: &'a str,
    pub ttl: Duration,
    pub upkeep: FenceUpkeep,
}

/// What a handover does for the fence counter's expiry (see handoff.lua).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceUpkeep {
    /// Keeps its margin over the lock: the window is not known, or 0 (kept forever).
    Margin,
    /// Known to outlive the waiter's lock by the window already: left alone.
    Kept,
    /// Kept this window (ms) past the waiter's lock, and a quarter of it further.
    Window(u64),
}

impl Op for HandOver<'_> {
    type Out = Option<u64>;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let ttl = resp::decimal(self.ttl.as_millis() as u64);
        let fence = resp::decimal(self.fence);
        let window = match self.upkeep {
            FenceUpkeep::Window(ms) => resp::decimal(ms),
            _ => resp::decimal(0),
        };
        let upkeep: &[u8] = match self.upkeep {
            FenceUpkeep::Kept => b"kept",
            _ => window.as_bytes(),
        };
        let args = [
            self.token.as_bytes(),
            self.to.as_bytes(),
            ttl.as_bytes(),
            fence.as_bytes(),
            upkeep,
        ];
        let count = if self.upkeep == FenceUpkeep::Margin {
            4
        } else {
            5
        };
        wire.script(
            &scripts::HANDOFF,
            &[self.lock_key, &keys::fence_key(self.lock_key)],
            &args[..count],
        );
    }

    fn decode(&self, reply: Value) -> Result<Option<u64>, LockError> {
        Ok(u64::try_from(int(reply)?).ok().filter(|&fence| fence > 0))
    }
}
