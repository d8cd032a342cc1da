//! A release that hands the lock to a waiter of the same JS thread, sent on that thread's
//! connection (see release.rs for the handover itself).
//!
//! When our lease outlasts the handover's bound, the waiter does not wait for Redis: it is
//! answered as the handover is sent, with the fence kept for it (handoff.lua), and starts on
//! our lease, which nobody else can hold until it runs out; the handover then only tells
//! Redis. Its section overlaps the round trip, which is the larger part of a section on a
//! small machine. Should Redis not confirm it (our lock was taken from us behind our back,
//! or no reply within the bound, which is shorter than our lease), the waiter's handle stops
//! counting itself as holding (core::lent), and its token is left to expire, never freed
//! under it. Otherwise the reply settles both promises, the release's and the waiter's, in
//! one callback; whatever goes wrong leaves the waiter to try on its own and frees the token
//! it may have been given.

use super::super::completions::{Completer, Granted, Outcome};
use super::work::Next;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::ops::lock::{self, Locker};
use crate::core::ops::release;
use crate::core::wait::lent::Lent;
use crate::core::wait::wake::{self, Caller, Reservation};
use redis::Value;
use std::sync::Arc;
use std::time::Duration;

/// What lending our lease to the waiter came to.
pub enum Lending {
    /// It waits for the reply as before (our lease is too short, or its fence unknown).
    No,
    /// It starts now, holding this.
    Lent(Granted),
    /// It left meanwhile: nobody to hand the lock to.
    WaiterGone,
}

pub struct Handoff {
    pub locker: Arc<Locker>,
    /// The releaser's.
    pub lease: Arc<Lease>,
    /// Taken when the handover is settled one way or another.
    pub to: Option<Reservation>,
    pub caller: Caller,
    /// The waiter's fresh token and TTL, and when the handover was sent.
    pub token: String,
    pub ttl: Duration,
    pub sent: Stamp,
    /// The waiter was answered when this was sent (`lend`).
    pub lent: bool,
}

impl Handoff {
    /// The request, written to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        lock::write_handoff(out, &self.lease, &self.token, self.ttl);
    }

    /// Answers the waiter now when our lease outlasts the handover's `bound`: should no
    /// reply come within it, the waiter learns it holds nothing before our lease (the only
    /// thing it stands on until then) runs out.
    ///
    /// Not from a lease that is itself lent and unconfirmed: its fence is not known to be
    /// below every other holder's, nor its lock to be ours.
    pub fn lend(&mut self, bound: Duration) -> Lending {
        let wakes = self.locker.store().wakes().clone();
        if !self.caller.lent_start
            || self.lease.fence == 0
            || self.lease.remaining() <= bound
            || wakes.lends().unconfirmed(&self.lease.token)
        {
            return Lending::No;
        }
        let Some(to) = self.to.take() else {
            return Lending::No;
        };
        if !wakes.settle(&self.channel(), to) {
            return Lending::WaiterGone;
        }
        self.lent = true;
        wakes.lends().lend(self.token.clone(), self.own_deadline());
        let granted = self.granted(self.lease.fence + 1);
        Lending::Lent(Granted::lent(&granted, self.lease.deadline()))
    }

    /// The waiter's deadline once Redis ran the handover.
    fn own_deadline(&self) -> std::time::Instant {
        self.sent.at + crate::core::basics::clock::validity(self.ttl)
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

    pub fn answered(mut self, id: u32, reply: Value, completer: &Completer) -> Next {
        let fence = match reply {
            Value::Int(fence) => fence,
            _ => {
                self.hand_over(id, completer);
                return Next::Elsewhere;
            }
        };
        if self.lent {
            self.lease.mark_released();
            self.told(fence > 0 && fence as u64 == self.lease.fence + 1);
            return Next::Settled(Outcome::Done);
        }
        let wakes = self.locker.store().wakes().clone();
        let Some(to) = self.to.take() else {
            return Next::Settled(Outcome::Done);
        };
        self.lease.mark_released();
        if fence <= 0 {
            // Not ours any more: nothing changed; the waiter tries on its own.
            wakes.unreserve(to);
            return Next::Settled(Outcome::Done);
        }
        let granted = self.granted(fence as u64);
        if wakes.settle(&self.channel(), to) {
            // Its runtime task ends without a word: nothing of it is to reach JS.
            completer.answered(self.caller.id);
            let handle = Outcome::Lease(Granted::of(&granted, None));
            return Next::Also(Outcome::Done, self.caller.id, handle);
        }
        // The waiter left meanwhile: the lock goes on as our own release would.
        let locker = self.locker.clone();
        napi::bindgen_prelude::spawn(async move {
            let _ignored = locker.release(&granted).await;
        });
        Next::Settled(Outcome::Done)
    }

    /// No reply within the bound: it may still run. The waiter tries on its own now; a late
    /// reply that says it ran frees the waiter's token (`answered_late`).
    pub fn timed_out(&mut self, bound: Duration) -> Outcome {
        if self.lent {
            self.told(false);
        }
        if let Some(to) = self.to.take() {
            self.locker.store().wakes().unreserve(to);
        }
        let err = LockError::Timeout(format!("no reply within {} ms", bound.as_millis()));
        match Locker::release_outcome(&self.lease, Err(err)) {
            Ok(_) => Outcome::Done,
            Err(err) => Outcome::Failed(err),
        }
    }

    /// The reply after the caller was told of the timeout: a lock handed over meanwhile has
    /// nobody holding it; it is freed on the same connection.
    pub fn answered_late(&self, reply: Value, out: &mut Vec<u8>) -> bool {
        // A lent waiter may still be in its section: its token expires on its own.
        if self.lent {
            return false;
        }
        if matches!(reply, Value::Int(fence) if fence > 0) {
            lock::write_release(out, &self.lease.redis_key, &self.token);
            return true;
        }
        false
    }

    /// The connection is gone with no answer: the release goes again through tokio within
    /// what is left of its bound, the waiter tries on its own, and the token it may have been
    /// given is freed.
    pub fn hand_over(mut self, id: u32, completer: &Completer) {
        if self.lent {
            return self.confirm_elsewhere(id, completer);
        }
        if let Some(to) = self.to.take() {
            self.locker.store().wakes().unreserve(to);
        }
        self.abandon();
        let (locker, lease) = (self.locker, self.lease);
        completer.run(id, async move {
            match locker.release(&lease).await {
                Ok(_) => Outcome::Done,
                Err(err) => Outcome::Failed(err),
            }
        });
    }

    /// The lent waiter is in its section already: the handover goes again through tokio
    /// (it is safe to run twice), within what is left of our lease's bound.
    fn confirm_elsewhere(self, id: u32, completer: &Completer) {
        let bound = self.locker.release_bound(&self.lease);
        completer.run(id, async move {
            let store = self.locker.store();
            let result =
                release::confirm_lend(store, &self.lease, &self.token, self.ttl, bound).await;
            self.told(matches!(result, Ok(true)));
            match result {
                Ok(_) => Outcome::Done,
                Err(err) => Outcome::Failed(err),
            }
        });
    }

    /// Frees the waiter's token, in case the handover ran; nobody waits for this. Not a lent
    /// waiter's: it may still be in its section.
    pub fn abandon(&self) {
        if self.lent {
            return;
        }
        let orphan = self.granted(0);
        self.locker.store().release_orphan(orphan);
    }
}
