//! How a call of a front is answered. Whoever calls a front gives one `Reply` per call (the
//! binding: a promise of a JS thread); the call's way is decided by ops/route.rs and the
//! reply only carries it out: sent on the caller's own connection when that is open (one
//! round trip from the caller's thread, see ops/fast/mod.rs), run where the caller is
//! (`memory://`), or run on the runtime.

use super::granted::Granted;
use crate::core::ops::fast::quorum::NodeCall;
use crate::core::ops::fast::FastCall;
pub use crate::core::ops::fast::Settled;
use crate::core::ops::route::Way;
use crate::core::wait::wake::{Caller, Parks};
use std::future::Future;

pub trait Reply<T>: Sized {
    /// The caller's own way outside the runtime, found ready: its fast lane.
    type Lane: FastLane;

    /// The caller's own transport for `way` (`Socket` or `Inline`) if it is ready now;
    /// asking may start opening a socket for a later call. Fronts ask through `ready`.
    fn fast_lane(&self, way: Way) -> Option<Self::Lane>;

    /// Sends `call` on `on`; `then` makes its result this call's answer.
    fn call_fast<C, F>(self, on: &Self::Lane, call: C, then: F)
    where
        C: FastCall,
        F: FnOnce(Settled<C::Output>) -> Settled<T> + Send + 'static;

    /// The caller's sockets to every node of a Redlock, found open: its quorum lane.
    type Quorum;

    /// The caller's quorum lane if every node's socket is open now; asking may start
    /// opening them for a later call. Fronts ask through `ready_quorum`.
    fn quorum_lane(&self) -> Option<Self::Quorum>;

    /// Sends each of `parts` on its node's socket of `on` (in the nodes' order); the one
    /// part that decides answers, `then` making its result this call's answer.
    fn call_quorum<P, F>(self, on: &Self::Quorum, parts: Vec<P>, then: F)
    where
        P: NodeCall,
        F: FnOnce(Settled<P::Output>) -> Settled<T> + Send + 'static;

    /// Runs `work` on the runtime; its result is the answer.
    fn run(self, work: impl Future<Output = Settled<T>> + Send + 'static);

    /// As `run`, for work that starts by sleeping (a waiter queued behind waiters of ours):
    /// it may be polled first where the caller is, and reach the runtime only once something
    /// wakes it, so starting it wakes the runtime's thread only if its timer is the earliest.
    fn run_after_pause(self, work: impl Future<Output = Settled<T>> + Send + 'static) {
        self.run(work);
    }

    /// Answers now (the caller hears of it once its call has returned).
    fn now(self, result: Settled<T>);

    /// This call as a waiter that a release made on the same thread may answer directly
    /// (see wait/wake.rs); `lent_start` when it may start on the releaser's lease; `asked`
    /// when the call was made (read once by the front: each clock reading costs a pair
    /// some 20 ns on the JS thread).
    fn caller(&self, lent_start: bool, asked: std::time::Instant) -> Caller;

    /// The thread the call was made on, as `Caller::thread` names it.
    fn thread(&self) -> usize;
}

/// Where a front's call goes: the caller's transport for `way` when it has it ready (the
/// call is then sent on it with `call_fast`), `None` for the runtime (`run`).
pub fn ready<T, R: Reply<T>>(reply: &R, way: Way) -> Option<R::Lane> {
    match way {
        Way::Runtime => None,
        way => reply.fast_lane(way),
    }
}

/// The caller's quorum lane, when `way` is the quorum's and every node's socket is open;
/// `None` for the runtime.
pub fn ready_quorum<T, R: Reply<T>>(reply: &R, way: Way) -> Option<R::Quorum> {
    match way {
        Way::Quorum => reply.quorum_lane(),
        _ => None,
    }
}

/// The caller's own transport outside the runtime, ready.
/// `Parks`: a release sent on it knows which calls of its thread wait parked there.
pub trait FastLane: Parks {
    /// Answers call `waiter` of the same thread at once with a lock lent to it by a handover
    /// sent this way (see ops/fast/handoff.rs).
    fn answer_lent(&self, waiter: u32, granted: Granted);
}
