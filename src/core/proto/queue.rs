//! The queues waiters wait in: the connections queued for a lock (one woken per release)
//! and a fair lock's line of waiters.

use super::{int, scripts, Op, Wire};
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::resp;
use redis::Value;
use std::time::Duration;

/// Queues connection `id` for `lock_key` behind those queued before it (a connection
/// already queued keeps its place), renewing the queue for `lifetime`. Answers whether the
/// lock is free right now: the release it would wait for already happened.
pub struct Enqueue<'a> {
    pub lock_key: &'a [u8],
    /// The connection's id, ending in `keys::WAKE_MARK` when it listens on its own wake
    /// channel of the lock (see announce.lua's `wake_first`).
    pub id: &'a str,
    /// Microseconds of the wall clock, as every way into the queue scores its places.
    pub score: u64,
    pub lifetime: Duration,
}

impl Op for Enqueue<'_> {
    type Out = bool;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let score = resp::decimal(self.score);
        let lifetime = resp::decimal(self.lifetime.as_millis() as u64);
        wire.script(
            &scripts::ENQUEUE,
            &[&keys::queue_key(self.lock_key), self.lock_key],
            &[self.id.as_bytes(), score.as_bytes(), lifetime.as_bytes()],
        );
    }

    fn decode(&self, reply: Value) -> Result<bool, LockError> {
        Ok(int(reply)? == 1)
    }
}

/// Passes a wake on: pops the next connection queued for `lock_key` that is still there and
/// tells it. Answers whether one was told.
pub struct WakeNext<'a> {
    pub lock_key: &'a [u8],
}

impl Op for WakeNext<'_> {
    type Out = bool;

    fn encode<W: Wire>(&self, wire: &mut W) {
        wire.script(
            &scripts::WAKE_NEXT,
            &[&keys::queue_key(self.lock_key)],
            &[&keys::released_channel(self.lock_key)],
        );
    }

    fn decode(&self, reply: Value) -> Result<bool, LockError> {
        Ok(int(reply)? == 1)
    }
}

/// Takes waiter `member` (`<connection id>:<seq>`) out of a fair lock's line; if it was
/// first and the lock is free, the next in line is told, as a release would have.
pub struct LeaveLine<'a> {
    pub lock_key: &'a [u8],
    pub member: &'a str,
}

impl Op for LeaveLine<'_> {
    type Out = ();

    fn encode<W: Wire>(&self, wire: &mut W) {
        let key = self.lock_key;
        wire.script(
            &scripts::LEAVE_FAIR,
            &[key, &keys::line_key(key), &keys::alive_key(key)],
            &[self.member.as_bytes(), &keys::released_channel(key)],
        );
    }

    fn decode(&self, reply: Value) -> Result<(), LockError> {
        int(reply).map(drop)
    }
}

/// Takes connection `id` off the queue of `lock_key`, under either of its names there (with
/// and without `keys::WAKE_MARK`): nobody waits there any more.
pub struct LeaveQueue<'a> {
    pub lock_key: &'a [u8],
    pub id: &'a str,
}

impl Op for LeaveQueue<'_> {
    type Out = ();

    fn encode<W: Wire>(&self, wire: &mut W) {
        let marked = format!("{}{}", self.id, keys::WAKE_MARK);
        wire.command(&[
            b"ZREM",
            &keys::queue_key(self.lock_key),
            self.id.as_bytes(),
            marked.as_bytes(),
        ]);
    }

    fn decode(&self, reply: Value) -> Result<(), LockError> {
        int(reply).map(drop)
    }
}
