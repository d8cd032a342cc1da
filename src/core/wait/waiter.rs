//! One waiter of a connection's wake table and the only function that changes its state.
//! The table (wake.rs) holds every waiter under one mutex and picks whom an event is for;
//! `Waiter::apply` decides what the event does to that waiter, so the rules live in one place
//! and the model test (waiters_model_tests.rs) can hold them to their invariants.

use super::owner::Owner;
use crate::core::basics::lease::Lease;
use crate::core::basics::stats::CallCounters;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A settled waiter whose pause ends within this is left to see it then, not told: telling
/// it wakes the runtime's thread from the releaser's, once per hand-over, to end a task
/// that ends within this anyway (on one core, a context switch each way). Longer pauses are
/// told, so an answered task never lingers longer than this.
pub(crate) const SETTLED_UNTOLD: Duration = Duration::from_millis(100);

/// Which calls of the releasing thread wait parked on it, their task polled once there and
/// never run on the runtime (the binding's `start_here`): a release that answers such a call
/// in place drops its task unrun, so the waiter is not told (telling it would move the task
/// to the runtime just before it is dropped), however long its pause.
pub trait Parking: Send + Sync {
    /// Takes call `id`'s task while it waits parked, so that no wake moves it to the runtime
    /// between the release's choice not to tell it and its answer: `None` when a wake moved
    /// it there already (it is told like any waiter), or it is over.
    fn claim(&self, id: u32) -> Option<Box<dyn ClaimedTask>>;
}

/// A parked task taken by `Parking::claim`. Dropped, it goes on on the runtime (its waiter
/// was not settled, or left).
pub trait ClaimedTask: Send {
    /// Its call was answered in place: the task is dropped unrun.
    fn drop_unrun(self: Box<Self>);
}

/// The fast lane a release is sent on: what it knows of the calls parked on its thread.
pub trait Parks {
    fn parking(&self) -> Arc<dyn Parking>;
}

/// The caller of a wait, as the binding knows it: a call (`id`) of one JS thread
/// (`thread`). A release made on that same thread may hand the lock over and answer the
/// caller itself, with no trip through the runtime (see binding/js/socket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub thread: usize,
    pub id: u32,
    /// It opted in to starting on its releaser's lease, before Redis confirms the handover
    /// (`lendOnHandover`).
    pub lent_start: bool,
    /// When it asked for the lock: a releaser that answers it counts its wait from there.
    pub asked: std::time::Instant,
}

/// Where a waiter stands. A waiter whose caller was answered by the one who handed it the
/// lock (settled) is no longer in the table at all: its ticket finds itself gone.
#[derive(Debug)]
pub(crate) enum WaiterState {
    /// Sleeps until its next attempt is due, or a wake.
    Waiting,
    /// Told of a release it has not acted on yet: the next wake goes to someone else, and
    /// should it leave, the wake is its to pass on.
    Woken,
    /// A release of this process is handing it the lock. `woken`: a wake came meanwhile (a
    /// lost connection wakes the first waiter whatever it is doing), kept if the hand-over
    /// does not happen. `refused`: its task was refused an attempt meanwhile and sleeps on
    /// the hand-over's word; should the reservation be dropped unused, it tries at once.
    Reserved { woken: bool, refused: bool },
    /// Handed the lock; the lease waits for the waiter's task to take it. Counts as woken.
    Granted(Lease),
}

/// What happens to a waiter.
pub(crate) enum Event {
    /// A release (ours, a queue turn, a fair lock's line) or a lost connection: try now.
    Wake,
    /// About to try: a wake from now on is news again. A lease granted meanwhile comes out.
    Rearm,
    /// A release of ours picks it to hand the lock to.
    Reserve,
    /// The hand-over was given up before it ran (its reservation dropped unused): a waiter
    /// refused its attempt meanwhile is told to try, as nobody else will (see `Reserved`).
    DropReservation,
    /// The hand-over did not happen: it tries on its own, at once.
    Unreserve,
    /// The hand-over ran: it holds the lease.
    Grant(Lease),
    /// The hand-over ran and its caller was answered by the releaser: its wait is over.
    /// `parked`: its task waits parked on the releaser's thread, dropped there unrun.
    Settle { parked: bool },
    /// Its task takes the lease handed to it.
    TakeGrant,
    /// A fair lock's waiter took (`true`) or gave up its place in the lock's line.
    Line(bool),
    /// Its task sends an attempt of its own (`true`), or has its reply (`false`). A release
    /// in place does not answer its caller meanwhile (see `trying`): that caller could
    /// release the lock before the attempt lands, which would then win it for nobody. The
    /// runtime's release may pick it all the same, since its own task answers it after the
    /// reply. Refused while it is being handed the lock: the hand-over answers it instead.
    Trying(bool),
    /// It stops waiting (won, timed out, cancelled, its owner gone).
    Leave,
    /// Its task sleeps until this (`Some`), or goes on (`None`, as it rearms).
    Pausing(Option<Instant>),
}

/// What a transition asks of the table, or hands back.
pub(crate) enum Effect {
    /// Done; `notify`: its task is told (after the change, under the same lock).
    Done { notify: bool },
    /// The event does not apply in this state (or to an ended owner's waiter); nothing
    /// changed. A refused grant's lease comes back, for the releaser to free.
    Refused(Option<Lease>),
    /// The lease handed to it, taken.
    Took(Lease),
    /// Granted: the table counts a hand-over and tells its task.
    Handed,
    /// Settled: the table removes it, counts a hand-over, and tells its task when `notify`
    /// (see `SETTLED_UNTOLD`).
    Settled { notify: bool },
    /// It leaves the table, owing what `Leaving` says.
    Left(Leaving),
}

/// What a departing waiter leaves behind for the table to settle.
pub(crate) enum Leaving {
    Nothing,
    /// A lock handed to it that it will never use.
    Lease(Lease),
    /// A wake it will never act on: the next waiter's, here or at the next connection.
    Wake,
    /// A fair lock's waiter's place in the lock's line, given up (leave_fair.lua tells the
    /// next in line; a fair waiter passes no wake on and is never handed a lock).
    Line,
}

pub(crate) struct Waiter {
    pub(crate) state: WaiterState,
    /// It holds a place in the fair lock's line, to give up when it stops waiting.
    pub(crate) in_line: bool,
    /// An attempt of its own is on its way: a release of ours that answered its caller now
    /// could see that attempt win the lock its handle just released, for nobody.
    pub(crate) trying: bool,
    /// The TTL it asks for: what a handoff grants it.
    pub(crate) ttl: Duration,
    /// Who waits, when the releaser may answer them itself (see `Caller`).
    pub(crate) caller: Option<Caller>,
    /// The counters of the object it waits for: a releaser that answers its caller counts
    /// the acquisition there, not in its own (two objects of one connection share waiters).
    pub(crate) counters: Option<Arc<CallCounters>>,
    /// Its number on this connection, in joining order: a fair lock's release names the
    /// waiter it wakes.
    pub(crate) seq: u64,
    /// It waits for a fair lock: woken by name, in the line's order, never handed a lock.
    pub(crate) fair: bool,
    /// On whose behalf it waits: once that owner is gone, nobody is handed the lock through
    /// it, and its wait ends (see owner.rs).
    pub(crate) owner: Option<Owner>,
    pub(crate) notify: Arc<Notify>,
    /// When the pause its task sleeps in ends, while it sleeps.
    pub(crate) pause_ends: Option<Instant>,
}

impl Waiter {
    pub(crate) fn new(
        ttl: Duration,
        caller: Option<Caller>,
        counters: Option<Arc<CallCounters>>,
        seq: u64,
        fair: bool,
        owner: Option<Owner>,
    ) -> Self {
        Waiter {
            state: WaiterState::Waiting,
            in_line: false,
            trying: false,
            ttl,
            caller,
            counters,
            seq,
            fair,
            owner,
            notify: Arc::new(Notify::new()),
            pause_ends: None,
        }
    }

    /// Its owner ended: whatever its wait would win goes to the next in line.
    pub(crate) fn is_orphaned(&self) -> bool {
        self.owner.as_ref().is_some_and(Owner::is_gone)
    }

    /// Whether a release's wake (ours, or a queue turn) may pick it: it sleeps, and its owner
    /// is there to use the lock.
    pub(crate) fn is_wakeable(&self) -> bool {
        matches!(self.state, WaiterState::Waiting) && !self.is_orphaned()
    }

    /// Whether a release of ours may hand it the lock: wakeable, and not a fair lock's
    /// waiter (whose turn comes by its line).
    pub(crate) fn is_reservable(&self) -> bool {
        !self.fair && self.is_wakeable()
    }

    /// Whether a release of ours is handing it the lock now.
    pub(crate) fn is_reserved(&self) -> bool {
        matches!(self.state, WaiterState::Reserved { .. })
    }

    /// The one writer of `state`: every change of a waiter goes through here, under the
    /// table's lock. The table tells the task (`notify`) when the answer says so.
    pub(crate) fn apply(&mut self, event: Event) -> Effect {
        use WaiterState::{Granted, Reserved, Waiting, Woken};
        if matches!(event, Event::Rearm) {
            self.pause_ends = None;
        }
        let state = std::mem::replace(&mut self.state, Waiting);
        let (state, effect) = match (state, event) {
            (Granted(lease), Event::Wake) => (Granted(lease), notified()),
            (Reserved { refused, .. }, Event::Wake) => (
                Reserved {
                    woken: true,
                    refused,
                },
                notified(),
            ),
            (Waiting | Woken, Event::Wake) => (Woken, notified()),
            (Granted(lease), Event::Rearm | Event::TakeGrant) => (Waiting, Effect::Took(lease)),
            (Reserved { refused, .. }, Event::Rearm) => (
                Reserved {
                    woken: false,
                    refused,
                },
                quiet(),
            ),
            (Waiting | Woken, Event::Rearm) => (Waiting, quiet()),
            (Waiting, Event::Reserve) if self.is_reservable_now() => (reserved(), quiet()),
            // Not `Woken`: the release that dropped it goes on through the runtime, which may
            // pick it again (a woken waiter is passed over), or wake the first that sleeps.
            (Reserved { woken, refused }, Event::DropReservation) => {
                let effect = if refused { notified() } else { quiet() };
                (unreserved(woken), effect)
            }
            (Reserved { .. }, Event::Unreserve) => (Woken, notified()),
            (Reserved { woken, .. }, Event::Grant(lease)) if self.is_orphaned() => {
                (unreserved(woken), Effect::Refused(Some(lease)))
            }
            (Reserved { .. }, Event::Grant(lease)) => (Granted(lease), Effect::Handed),
            // Its state no longer matters: the table removes it.
            (Reserved { .. }, Event::Settle { parked }) => {
                let notify = !parked
                    && self.pause_ends.is_none_or(|ends| {
                        ends.saturating_duration_since(Instant::now()) > SETTLED_UNTOLD
                    });
                (Waiting, Effect::Settled { notify })
            }
            (_, Event::Leave) if self.fair => {
                let leaving = if self.in_line {
                    Leaving::Line
                } else {
                    Leaving::Nothing
                };
                (Waiting, Effect::Left(leaving))
            }
            (state, Event::Line(in_line)) => {
                self.in_line = in_line;
                (state, quiet())
            }
            (Reserved { woken, .. }, Event::Trying(true)) => {
                let refused = Reserved {
                    woken,
                    refused: true,
                };
                (refused, Effect::Refused(None))
            }
            (state, Event::Trying(trying)) => {
                self.trying = trying;
                (state, quiet())
            }
            (state, Event::Pausing(ends)) => {
                self.pause_ends = ends;
                (state, quiet())
            }
            (Granted(lease), Event::Leave) => (Waiting, Effect::Left(Leaving::Lease(lease))),
            (Woken | Reserved { woken: true, .. }, Event::Leave) => {
                (Waiting, Effect::Left(Leaving::Wake))
            }
            (Waiting | Reserved { woken: false, .. }, Event::Leave) => {
                (Waiting, Effect::Left(Leaving::Nothing))
            }
            (state, Event::Grant(lease)) => (state, Effect::Refused(Some(lease))),
            (state, _) => (state, Effect::Refused(None)),
        };
        self.state = state;
        effect
    }

    /// `is_reservable`, read while `state` is taken out by `apply`.
    fn is_reservable_now(&self) -> bool {
        !self.fair && !self.is_orphaned()
    }
}

fn notified() -> Effect {
    Effect::Done { notify: true }
}

fn quiet() -> Effect {
    Effect::Done { notify: false }
}

/// A waiter just picked for a hand-over.
fn reserved() -> WaiterState {
    WaiterState::Reserved {
        woken: false,
        refused: false,
    }
}

/// Where a reserved waiter stands once its hand-over is off.
fn unreserved(woken: bool) -> WaiterState {
    if woken {
        WaiterState::Woken
    } else {
        WaiterState::Waiting
    }
}
