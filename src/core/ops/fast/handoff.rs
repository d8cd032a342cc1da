//! A release sent outside the runtime that hands the lock to a waiter of the same JS
//! thread (see release.rs for the handover itself), and the choice of it over a plain
//! release.
//!
//! When our lease outlasts the handover's bound, the waiter does not wait for Redis: it is
//! answered as the handover is sent, with the fence kept for it (handoff.lua), and starts on
//! our lease, which nobody else can hold until it runs out; the handover then only tells
//! Redis. Its section overlaps the round trip, which is the larger part of a section on a
//! small machine. Should Redis not confirm it (our lock was taken from us behind our back,
//! or no reply within the bound, which is shorter than our lease), the waiter's handle stops
//! counting itself as holding (wait/lent.rs), and its token is left to expire, never freed
//! under it. Otherwise the reply settles both calls, the release's and the waiter's, at
//! once; whatever goes wrong leaves the waiter to try on its own and frees the token it may
//! have been given.

use super::undo::UndoSent;
use super::{FastCall, Later, PlainRelease, Settled, Step};
use crate::core::basics::background::spawn;
use crate::core::basics::clock::{self, Stamp};
use crate::core::basics::error::LockError;
use crate::core::basics::key_counts::KeyEvent;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::stats::CallCounters;
use crate::core::basics::token;
use crate::core::ops::delivery::Unclaimed;
use crate::core::ops::lock::{AttemptForm, Locker};
use crate::core::ops::release::{self, hand_over, outcome};
use crate::core::proto::release::{FenceUpkeep, HandOver, Release};
use crate::core::proto::wire::write_whole;
use crate::core::proto::{Op, Wire};
use crate::core::wait::lent::Lent;
use crate::core::wait::wake::{self, Caller, Parking, Parks, Reservation};
use futures_util::FutureExt;
use redis::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a release of ours is sent.
// Unboxed: made and taken apart at once, on every release of the caller's connection.
#[allow(clippy::large_enum_variant)]
pub enum Releasing {
    /// A plain release: nobody of ours waits for the lock.
    Plain(PlainRelease),
    /// A handover to a waiter of the releasing thread.
    HandOver(Handoff),
    /// Through the runtime: a fair lock, a waiter of another thread, a lease already
    /// released, or a waiter that left meanwhile.
    Elsewhere,
}

impl Releasing {
    /// How `lease` is released from JS thread `thread` (`Caller::thread`).
    pub fn of(locker: &Arc<Locker>, lease: &Arc<Lease>, thread: usize) -> Releasing {
        // A holder whose own handover is still pending goes through the runtime, after it
        // (see held.rs): the handover may have moved there with a broken connection. Any
        // other lent holder's answer was taken by its handle before: nothing to forget.
        if locker.store().wakes().lends().pending(&lease.token) {
            return Releasing::Elsewhere;
        }
        if let Some(release) = PlainRelease::new(locker, lease, false) {
            return Releasing::Plain(release);
        }
        // A fair lock is never handed over (see release::release_fair).
        if locker.is_fair() {
            return Releasing::Elsewhere;
        }
        // Not after a release: the runtime's would do nothing, and the waiter would wait
        // for its next attempt.
        if lease.is_released() {
            return Releasing::Elsewhere;
        }
        // Only the first waiter, of this thread and with no attempt on its way, is answered
        // from here; any other is handed the lock by the runtime's release, in order.
        let wakes = locker.store().wakes();
        let channel = wake::channel(&lease.redis_key);
        let Some((to, caller)) = wakes.reserve_in_place(&channel, thread) else {
            return Releasing::Elsewhere;
        };
        let (ttl, bound) = (to.ttl(), locker.bound_for(lease));
        let window = Some(locker.fence_retention_ms());
        // A waiter that joined through no lock of ours (none does) is counted here.
        let counters = to.counters().unwrap_or(locker.stats()).clone();
        Releasing::HandOver(Handoff {
            locker: locker.clone(),
            lease: lease.clone(),
            counters,
            ttl,
            bound,
            upkeep: release::upkeep(locker.store(), lease, ttl, window, bound),
            to: Some(to),
            caller,
            token: token::new_token(),
            sent: Stamp::now(),
            lent: false,
            parking: None,
        })
    }
}

/// What the fast lane sends for a release, in this order: the call, then (when `lent`) the
/// answer of the waiter it lent our lease to.
// Unboxed: taken apart at once, on every release of the caller's connection.
#[allow(clippy::large_enum_variant)]
pub enum FastRelease<S> {
    /// Nothing here: the release goes through the runtime.
    Elsewhere,
    Plain(PlainRelease),
    HandOver {
        sender: S,
        handoff: Handoff,
        lent: Option<LentTo>,
    },
}

/// A waiter answered as the handover is sent (see `Handoff::lend`).
pub struct LentTo {
    pub waiter: u32,
    pub lease: Lease,
    pub until: Instant,
    /// Frees the lock should the waiter's code never have its handle.
    pub unclaimed: Unclaimed,
}

impl Releasing {
    /// What to send. `sender` is the fast lane, if it is open (asked only for a
    /// handover, which must know it will be sent before it lends our lease: a lent waiter
    /// is answered at once, so no lease is lent for a handover that is not sent).
    pub fn send_on<S: Parks>(self, sender: impl FnOnce() -> Option<S>) -> FastRelease<S> {
        let mut handoff = match self {
            Releasing::Elsewhere => return FastRelease::Elsewhere,
            Releasing::Plain(release) => return FastRelease::Plain(release),
            Releasing::HandOver(handoff) => handoff,
        };
        // Not sent: dropped with its reservation, which lets the waiter be picked by the
        // runtime's release.
        let Some(sender) = sender() else {
            return FastRelease::Elsewhere;
        };
        handoff.parking = Some(sender.parking());
        let lent = match handoff.lend() {
            // The waiter left: the runtime's release picks the next one, or frees the lock.
            Lending::WaiterGone => return FastRelease::Elsewhere,
            Lending::Lent {
                waiter,
                lease,
                until,
                unclaimed,
            } => Some(LentTo {
                waiter,
                lease: *lease,
                until,
                unclaimed,
            }),
            Lending::No => None,
        };
        FastRelease::HandOver {
            sender,
            handoff,
            lent,
        }
    }
}

/// What lending our lease to the waiter came to.
pub enum Lending {
    /// It waits for the reply as before (our lease is too short, or its fence unknown).
    No,
    /// Its call (`waiter`) ends now, holding `lease`, valid until `until` by our clock
    /// unless Redis confirms the handover.
    Lent {
        waiter: u32,
        // Boxed: the other variants are empty, and a lease is large.
        lease: Box<Lease>,
        until: Instant,
        unclaimed: Unclaimed,
    },
    /// It left meanwhile: nobody to hand the lock to.
    WaiterGone,
}

pub struct Handoff {
    locker: Arc<Locker>,
    /// The releaser's.
    lease: Arc<Lease>,
    /// The waiter's object's, where its win is counted.
    counters: Arc<CallCounters>,
    bound: Duration,
    /// Taken when the handover is settled one way or another.
    to: Option<Reservation>,
    caller: Caller,
    /// The waiter's fresh token and TTL, and when the handover was sent.
    token: String,
    ttl: Duration,
    sent: Stamp,
    /// What it does for the fence counter, decided before it is sent.
    upkeep: FenceUpkeep,
    /// The waiter was answered when this was sent (`lend`).
    lent: bool,
    /// The calls parked on the releasing thread, once the lane it goes on is known.
    parking: Option<Arc<dyn Parking>>,
}

impl Handoff {
    /// Answers the waiter now when our lease outlasts the handover's bound: should no reply
    /// come within it, the waiter learns it holds nothing before our lease (the only thing
    /// it stands on until then) runs out. Called once the handover is sure to be sent.
    ///
    /// Not from a lease that is itself lent and unconfirmed: its fence is not known to be
    /// below every other holder's, nor its lock to be ours.
    pub fn lend(&mut self) -> Lending {
        let wakes = self.locker.store().wakes().clone();
        if !self.caller.lent_start
            || self.lease.fence == 0
            || self.lease.remaining() <= self.bound
            || wakes.lends().unconfirmed(&self.lease.token)
        {
            return Lending::No;
        }
        let Some(to) = self.to.take() else {
            return Lending::No;
        };
        if !self.settle(&wakes, to) {
            return Lending::WaiterGone;
        }
        self.lent = true;
        self.answering();
        wakes.lends().lend(self.token.clone(), self.own_deadline());
        let fence = self.lease.fence + 1;
        Lending::Lent {
            waiter: self.caller.id,
            lease: Box::new(self.granted(fence)),
            until: self.lease.deadline(),
            unclaimed: Unclaimed::lent(&self.locker, self.granted(fence)),
        }
    }

    /// Settles the waiter, answered here. Its task, if parked on this thread, is claimed
    /// first, so no wake moves it to the runtime after the choice not to tell it: dropped
    /// unrun once settled, started on the runtime otherwise. (Claimed, not held under its
    /// slot: a wake takes that slot under the table's lock, which `settle` takes.)
    fn settle(&self, wakes: &wake::Wakes, to: Reservation) -> bool {
        let claimed = (self.parking.as_ref()).and_then(|parking| parking.claim(self.caller.id));
        let settled = wakes.settle(&self.channel(), to, claimed.is_some());
        if let Some(task) = claimed.filter(|_| settled) {
            task.drop_unrun();
        }
        settled
    }

    /// The waiter is answered here, not by its own task: its wait is counted here, as its
    /// task counts a lock handed over through the runtime (acquire.rs `handed`), into the
    /// counters of the object it waited for, which may not be the releaser's (two objects
    /// of different settings share the JS thread's connection, and so its waiters).
    fn answering(&self) {
        self.counters.handed_over(&self.lease.key);
        (self.locker.store().key_watch()).count(KeyEvent::HandedOver, || &self.lease.redis_key);
        self.counters.acquired(self.caller.asked.elapsed());
    }

    /// The waiter's deadline once Redis ran the handover.
    fn own_deadline(&self) -> Instant {
        self.sent.at + clock::validity(self.ttl)
    }

    /// What became of the lent waiter's start: `confirmed` when Redis ran the handover.
    fn told(&self, confirmed: bool) {
        let state = if confirmed {
            Lent::Confirmed(self.own_deadline())
        } else {
            Lent::Failed
        };
        self.locker
            .store()
            .wakes()
            .lends()
            .settle(&self.token, state);
    }

    fn channel(&self) -> Vec<u8> {
        wake::channel(&self.lease.redis_key)
    }

    /// The handover as it is written.
    fn op(&self) -> HandOver<'_> {
        hand_over(&self.lease, &self.token, self.ttl, self.upkeep)
    }

    /// The handover ran: how long it kept the fence counter, if it did.
    fn ran(&self) {
        let fence_key = keys::fence_key(&self.lease.redis_key);
        let kept = self.locker.store().kept_fences();
        kept.handed(self.upkeep, &fence_key, self.sent.at, self.ttl);
    }

    /// What the waiter would hold had the handover run.
    fn granted(&self, fence: u64) -> Lease {
        Lease::new(
            self.lease.key.clone(),
            self.lease.redis_key.clone(),
            self.token.clone(),
            fence,
            self.sent,
            self.ttl,
        )
    }

    /// The lent waiter is in its section already: the handover goes again through the
    /// runtime (it is safe to run twice), within what is left of our lease's bound.
    fn confirm_elsewhere(self) -> Later<()> {
        let bound = self.locker.bound_for(&self.lease);
        let terms = (bound, Some(self.locker.fence_retention_ms()));
        async move {
            let store = self.locker.store();
            let result =
                release::confirm_lend(store, &self.lease, &self.token, self.ttl, terms).await;
            self.told(matches!(result, Ok(true)));
            result.map(|_| ())
        }
        .boxed()
    }

    /// Frees the waiter's token, in case the handover ran; nobody waits for this. Not a lent
    /// waiter's: it may still be in its section.
    fn free_token(&self) {
        if self.lent {
            return;
        }
        let orphan = self.granted(0);
        self.locker.store().release_orphan(orphan);
    }
}

impl FastCall for Handoff {
    fn silent_after(&self) -> Duration {
        self.locker.command_timeout()
    }

    type Output = ();

    fn write<W: Wire>(&self, out: &mut W, _form: AttemptForm) -> usize {
        self.op().encode(out);
        1
    }

    fn bound(&self) -> Duration {
        self.bound
    }

    fn answered(mut self, reply: Value) -> Step<()> {
        let Ok(fence) = self.op().decode(reply) else {
            return Step::Later(self.resend(None));
        };
        if fence.is_some() {
            self.ran();
        }
        if self.lent {
            self.lease.mark_released();
            self.told(fence == Some(self.lease.fence + 1));
            return Step::Now(Ok(()));
        }
        let wakes = self.locker.store().wakes().clone();
        let Some(to) = self.to.take() else {
            return Step::Now(Ok(()));
        };
        self.lease.mark_released();
        let Some(fence) = fence else {
            // Not ours any more: nothing changed; the waiter tries on its own.
            wakes.unreserve(to);
            return Step::Now(Ok(()));
        };
        let granted = self.granted(fence);
        if self.settle(&wakes, to) {
            self.answering();
            return Step::Handed {
                released: Ok(()),
                waiter: self.caller.id,
                unclaimed: Unclaimed::new(&self.locker, self.granted(fence)),
                lease: granted,
            };
        }
        // The waiter left meanwhile: the lock goes on as our own release would.
        let locker = self.locker.clone();
        spawn(async move {
            let _ignored = locker.release(&granted).await;
        });
        Step::Now(Ok(()))
    }

    /// No reply within the bound: it may still run. The waiter tries on its own now; a late
    /// reply that says it ran frees the waiter's token (`answered_late`).
    fn timed_out(&mut self, bound: Duration) -> Settled<()> {
        if self.lent {
            self.told(false);
        }
        if let Some(to) = self.to.take() {
            self.locker.store().wakes().unreserve(to);
        }
        let err = LockError::no_reply(bound);
        outcome(&self.lease, Err(err)).map(|_| ())
    }

    /// A lock handed over meanwhile has nobody holding it.
    fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<UndoSent> {
        // A lent waiter may still be in its section: its token expires on its own.
        if self.lent {
            return None;
        }
        let handed = self.op().decode(reply);
        if !matches!(handed, Ok(Some(_))) {
            return None;
        }
        let free = Release::late_win(&self.lease.redis_key, &self.token, false);
        write_whole(&free, out);
        let stats = self.locker.stats().clone();
        // Only what the undo needs: the rest (the releaser's lease, the reservation's table,
        // the lane's parked calls) is not kept until its reply.
        let (locker, orphan) = (self.locker.clone(), self.granted(0));
        Some(UndoSent::new(&stats, move || {
            locker.store().release_orphan(orphan);
        }))
    }

    /// The release goes again through the runtime, the waiter tries on its own, and the
    /// token it may have been given is freed.
    fn resend(mut self, _left: Option<Duration>) -> Later<()> {
        if self.lent {
            return self.confirm_elsewhere();
        }
        if let Some(to) = self.to.take() {
            self.locker.store().wakes().unreserve(to);
        }
        self.free_token();
        let (locker, lease) = (self.locker, self.lease);
        async move { locker.release(&lease).await.map(|_| ()) }.boxed()
    }

    fn abandon(self) {
        self.free_token();
    }

    fn orphaned(self) -> Option<Later<()>> {
        Some(self.resend(None))
    }
}

#[cfg(test)]
#[path = "handoff_tests.rs"]
mod tests;
