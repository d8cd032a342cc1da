//! The restart quarantine (`restartQuarantineMs`, docs/plans/cross-process.md §4.3): what a
//! connection asks of a server before its first attempt, and what the answer allows. A lock
//! key that is absent after a restart looks exactly like one never used, so the quarantine
//! is per server incarnation, not per lock: `epoch.lua` reads the server's `run_id` (INFO
//! server, inside the script: one server answers all of it) and answers when our clients
//! first met that incarnation (`born`) and the server's `now`. No attempt goes before `born + Q` by the server's clock, counted on our monotonic
//! clock from the answer's receipt (later than the server's instant: conservative).

use crate::core::basics::error::LockError;
use redis::{Cmd, Value};
use std::time::{Duration, Instant};

/// The hash that keeps the incarnation: `\xff` keeps it apart from every lock key.
pub const EPOCH_KEY: &[u8] = b"\xffepoch";

const EPOCH_SOURCE: &str = include_str!("scripts/epoch.lua");

/// `epoch.lua`, sent whole (EVAL): it runs once per connection (on a cluster, once per slot
/// attempted on it), and a SCRIPT LOAD ahead would be a second command for it.
pub fn stamp(slot: Option<u16>) -> Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(EPOCH_SOURCE).arg(1).arg(epoch_key(slot));
    cmd
}

/// Where the incarnation is kept: `\xffepoch` on one server; on a cluster one hash per slot,
/// `{<tag of the slot>}\xffepoch`, so that the script runs on the master of the slot an
/// attempt goes to (each master restarts or fails over on its own) and reads its `run_id`.
pub fn epoch_key(slot: Option<u16>) -> Vec<u8> {
    match slot {
        None => EPOCH_KEY.to_vec(),
        Some(slot) => {
            let tag = crate::core::basics::slots::tag_for_slot(slot);
            [b"{", tag, b"}", EPOCH_KEY].concat()
        }
    }
}

/// `epoch.lua`'s name by its SHA1, else any other script's, for `DEBUG` lines
/// (basics/trace.rs): it is sent whole, and no other script list holds it.
pub fn name_of(sha: &[u8]) -> Option<&'static str> {
    static SHA: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| redis::Script::new(EPOCH_SOURCE).get_hash().to_owned());
    match sha == SHA.as_bytes() {
        true => Some("epoch"),
        false => super::scripts::name_of(sha),
    }
}

/// `epoch.lua`'s answer: `{ born, now }`, ms of the server's clock.
pub fn read_stamp(reply: &Value) -> Option<(u64, u64)> {
    let Value::Array(items) = reply else {
        return None;
    };
    let int = |value: &Value| match value {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    };
    match items.as_slice() {
        [born, now] => Some((int(born)?, int(now)?)),
        _ => None,
    }
}

/// When a connection may attempt, learned from one answer.
#[derive(Clone, Copy, Debug)]
pub struct Gate {
    /// Before this, no attempt goes out.
    pub opens: Instant,
    /// When the incarnation was born, on our clock.
    born: Instant,
    quarantine: Duration,
}

/// What an attempt does at the gate.
#[derive(Debug, PartialEq)]
pub enum Admit {
    Open,
    /// The gate opens within the attempt's bound: wait for it, then go.
    WaitUntil(Instant),
    /// It does not: fail now, saying why.
    Refuse(LockError),
}

impl Gate {
    /// The gate an answer `(born, now)` received at `receipt` sets for `quarantine`.
    pub fn new(receipt: Instant, (born, now): (u64, u64), quarantine: Duration) -> Gate {
        let age = Duration::from_millis(now.saturating_sub(born));
        let opens = receipt + quarantine.saturating_sub(age);
        Gate {
            opens,
            born: receipt.checked_sub(age).unwrap_or(receipt),
            quarantine,
        }
    }

    pub fn is_open(&self, now: Instant) -> bool {
        now >= self.opens
    }

    /// What an attempt made at `now`, bounded by `deadline`, does.
    pub fn admit(&self, now: Instant, deadline: Instant) -> Admit {
        if self.is_open(now) {
            return Admit::Open;
        }
        if self.opens <= deadline {
            return Admit::WaitUntil(self.opens);
        }
        Admit::Refuse(LockError::Quarantined {
            restarted_ms_ago: now.saturating_duration_since(self.born).as_millis(),
            quarantine_ms: self.quarantine.as_millis(),
        })
    }
}

#[cfg(test)]
#[path = "epoch_tests.rs"]
mod tests;
