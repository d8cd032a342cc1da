//! What each lock operation sends and what its reply means, with no I/O: one definition per
//! operation, which the runtime's connection (`Request`) and the JS-thread socket (RESP
//! bytes) both send as written here. What a reply leads to (a retry, a wake, a resend after
//! a timeout) is the operations' business, above (`ops`). The backends may use these too:
//! a quorum must know what each node's reply means.

pub mod acquire;
pub mod epoch;
pub mod extend;
pub mod fence_raise;
pub mod fenced_set;
pub mod missed;
pub mod queue;
pub mod read;
pub mod refresh;
pub mod release;
pub mod ring;
pub mod scripts;
pub mod syncguard;
pub mod syncguard_eval;
pub mod watch;
pub mod wire;

pub use wire::{Request, Wire};

use crate::core::basics::error::LockError;
use redis::Value;

/// One operation: its command, written once, and the meaning of its reply.
pub trait Op {
    type Out;

    /// Whether running it twice leaves Redis as running it once did, so that it may be sent
    /// again when a connection dropped with it unanswered.
    const REPEATABLE: bool = true;

    /// Writes the operation's one command.
    fn encode<W: Wire>(&self, wire: &mut W);

    /// What the reply means. A server error is an error here; whether it sends the call
    /// elsewhere is decided by its caller.
    fn decode(&self, reply: Value) -> Result<Self::Out, LockError>;
}

/// An integer reply, read as the redis crate's connection reads one.
fn int(reply: Value) -> Result<i64, LockError> {
    crate::core::basics::resp::typed(reply)
}

#[cfg(test)]
#[path = "golden_tests.rs"]
mod golden_tests;

#[cfg(test)]
#[path = "slot_tests.rs"]
mod slot_tests;
