//! How a call of a front is answered. Whoever calls a front gives one `Reply` per call (the
//! binding: a promise of a JS thread); the front decides the call's way and the reply only
//! carries it out: sent on the caller's own connection when that is open (one round trip
//! from the caller's thread, see ops/carried.rs), or run on the runtime.

use super::granted::Granted;
use crate::core::ops::carried::Carried;
pub use crate::core::ops::carried::Settled;
use crate::core::wait::wake::Caller;
use std::future::Future;

pub trait Reply<T>: Sized {
    /// The caller's own connection, found open.
    type Carrier: Carrier;

    /// The caller's own connection if it is open now; asking may start opening it for a
    /// later call.
    fn carrier(&self) -> Option<Self::Carrier>;

    /// Sends `call` on `on`; `then` makes its result this call's answer.
    fn carry<C, F>(self, on: &Self::Carrier, call: C, then: F)
    where
        C: Carried,
        F: FnOnce(Settled<C::Output>) -> Settled<T> + Send + 'static;

    /// Runs `work` on the runtime; its result is the answer.
    fn run(self, work: impl Future<Output = Settled<T>> + Send + 'static);

    /// Answers now (the caller hears of it once its call has returned).
    fn now(self, result: Settled<T>);

    /// This call as a waiter that a release made on the same thread may answer directly
    /// (see wait/wake.rs); `lent_start` when it may start on the releaser's lease.
    fn caller(&self, lent_start: bool) -> Caller;
}

/// The caller's own connection, open.
pub trait Carrier {
    /// Answers call `waiter` of the same thread at once with a lock lent to it by a handover
    /// being sent on this connection (see ops/carried_handoff.rs).
    fn answer_lent(&self, waiter: u32, granted: Granted);
}
