//! Reading a lock without changing it.

use super::{int, Op, Wire};
use crate::core::basics::error::LockError;
use redis::Value;
use std::time::Duration;

/// Whether anyone holds `lock_key`.
pub struct Exists<'a> {
    pub lock_key: &'a [u8],
}

impl Op for Exists<'_> {
    type Out = bool;

    fn encode<W: Wire>(&self, wire: &mut W) {
        wire.command(&[b"EXISTS", self.lock_key]);
    }

    fn decode(&self, reply: Value) -> Result<bool, LockError> {
        Ok(int(reply)? > 0)
    }
}

/// How long the holder of `lock_key` still has: `None` when it is free or has no TTL.
pub struct Pttl<'a> {
    pub lock_key: &'a [u8],
}

impl Op for Pttl<'_> {
    type Out = Option<Duration>;

    fn encode<W: Wire>(&self, wire: &mut W) {
        wire.command(&[b"PTTL", self.lock_key]);
    }

    fn decode(&self, reply: Value) -> Result<Option<Duration>, LockError> {
        Ok(u64::try_from(int(reply)?).ok().map(Duration::from_millis))
    }
}

/// The holder's contents and remaining TTL of `lock_key`, read in one step (ExclusiveLock's
/// `inspect`, the original's `MULTI GET PTTL EXEC`).
pub struct Inspect<'a> {
    pub lock_key: &'a [u8],
}

impl Op for Inspect<'_> {
    /// The contents (none when free) and the PTTL as Redis answers it.
    type Out = (Option<Vec<u8>>, i64);

    fn encode<W: Wire>(&self, wire: &mut W) {
        wire.script(&super::scripts::INSPECT, &[self.lock_key], &[]);
    }

    fn decode(&self, reply: Value) -> Result<Self::Out, LockError> {
        crate::core::basics::resp::typed(reply)
    }
}
