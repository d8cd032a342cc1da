//! Lengthening a lock we hold.

use super::{int, scripts, Op, Wire};
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::resp;
use redis::Value;
use std::time::Duration;

/// Adds `extra` to the remaining TTL of `lock_key` if it still holds `token` (its fence
/// counter kept as long, see fence.lua). Answers the new TTL, `None` when not ours. Not to
/// be sent twice: it adds.
pub struct Extend<'a> {
    pub lock_key: &'a [u8],
    pub token: &'a str,
    pub extra: Duration,
}

impl Op for Extend<'_> {
    type Out = Option<Duration>;
    const REPEATABLE: bool = false;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let extra = resp::decimal(self.extra.as_millis() as u64);
        wire.script(
            &scripts::EXTEND,
            &[self.lock_key, &keys::fence_key(self.lock_key)],
            &[self.token.as_bytes(), extra.as_bytes()],
        );
    }

    fn decode(&self, reply: Value) -> Result<Option<Duration>, LockError> {
        let ttl = int(reply)?;
        Ok(u64::try_from(ttl)
            .ok()
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis))
    }
}
