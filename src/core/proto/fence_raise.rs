//! Redlock's fence write-back: a node's counter raised past the fence a quorum's
//! acquisition took (see fence_raise.lua and docs/plans/redlock.md).

use super::{int, scripts, Op, Wire};
use crate::core::basics::error::LockError;
use crate::core::basics::resp;
use redis::Value;
use std::time::Duration;

/// Raises `fence_key` to `fence + 1` at least, keeping it as an acquisition of `ttl` with
/// the retention window `window_ms` would (`None`: its expiry left as it is, for a
/// handover, which knows no window). Answers the counter after it.
pub struct FenceRaise<'a> {
    pub fence_key: &'a [u8],
    pub fence: u64,
    pub ttl: Duration,
    pub window_ms: Option<u64>,
}

impl Op for FenceRaise<'_> {
    type Out = u64;

    fn encode<W: Wire>(&self, wire: &mut W) {
        let fence = resp::decimal(self.fence);
        let ttl = resp::decimal(self.ttl.as_millis() as u64);
        let window = self.window_ms.map(resp::decimal);
        let window: &[u8] = window.as_ref().map_or(b"", |w| w.as_bytes());
        wire.script(
            &scripts::FENCE_RAISE,
            &[self.fence_key],
            &[fence.as_bytes(), ttl.as_bytes(), window],
        );
    }

    fn decode(&self, reply: Value) -> Result<u64, LockError> {
        u64::try_from(int(reply)?).map_err(|_| LockError::no_fence())
    }
}
