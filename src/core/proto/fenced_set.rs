//! The fenced write: a value kept only by the highest fence.

use super::{int, scripts, Op, Wire};
use crate::core::basics::error::LockError;
use redis::Value;

/// Writes `value` to the hash at `key` unless a higher `fence` (15 digits) wrote there
/// already; answers whether it wrote.
pub struct FencedSet<'a> {
    pub key: &'a [u8],
    pub value: &'a str,
    pub fence: &'a str,
}

impl Op for FencedSet<'_> {
    type Out = bool;

    fn encode<W: Wire>(&self, wire: &mut W) {
        wire.script(
            &scripts::FENCED_SET,
            &[self.key],
            &[self.value.as_bytes(), self.fence.as_bytes()],
        );
    }

    fn decode(&self, reply: Value) -> Result<bool, LockError> {
        Ok(int(reply)? == 1)
    }
}
