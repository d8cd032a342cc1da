//! Fences drawn for no acquisition, counted beside the lock's counter (count_missed.lua), so
//! that `watch` (lib/cli/watch.js) reads acquisitions exactly from the counter's growth less
//! this count's. Only a transaction that found its lock held draws so
//! (`AcquireAttempt::drawn_in_vain`); the scripts draw only when they win.

use super::{int, scripts, Op, Wire};
use crate::core::basics::error::LockError;
use crate::core::basics::resp;
use redis::Value;
use std::time::Duration;

/// How long a count lives past its last change: far beyond any `watch` interval, so that a
/// count read at one frame is still there at the next, and gone from a lock nobody contends.
pub const MISSED_LIFE: Duration = Duration::from_secs(600);

/// `fences` more drawn in vain at the lock whose count is `missed_key` (keys.rs).
pub struct CountMissed<'a> {
    pub missed_key: &'a [u8],
    pub fences: u64,
}

impl Op for CountMissed<'_> {
    /// The count after.
    type Out = i64;

    /// Counted twice, it would hide an acquisition.
    const REPEATABLE: bool = false;

    /// The lane sends it whole (`wire::write_whole`, ops/fast `count_missed`), never by its
    /// hash: its reply is for nobody, so a NOSCRIPT (after a SCRIPT FLUSH, or a failover to
    /// a server that never loaded it) would be dropped unseen, and every attempt after it
    /// read as an acquisition until the connection was opened again. Rare enough for the
    /// text's bytes not to matter: only a transaction that found its lock held draws in
    /// vain, and a lock found held is attempted by the script after.
    fn encode<W: Wire>(&self, wire: &mut W) {
        let fences = resp::decimal(self.fences);
        let life = resp::decimal(MISSED_LIFE.as_millis() as u64);
        wire.script(
            &scripts::COUNT_MISSED,
            &[self.missed_key],
            &[fences.as_bytes(), life.as_bytes()],
        );
    }

    fn decode(&self, reply: Value) -> Result<i64, LockError> {
        int(reply)
    }
}
