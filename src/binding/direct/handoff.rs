//! A release that hands the lock to a waiter of the same JS thread, sent on that thread's
//! connection: the reply settles both promises, the release's and the waiter's, in one
//! callback, with no trip through the runtime (see release.rs for the handover itself).
//! Whatever goes wrong leaves the waiter to try on its own and frees the token it may have
//! been given.

use super::super::completions::{Completer, Granted, Outcome};
use super::work::Next;
use crate::core::clock::Stamp;
use crate::core::error::LockError;
use crate::core::lease::Lease;
use crate::core::lock::{self, Locker};
use crate::core::wake::{self, Caller, Reservation};
use redis::Value;
use std::sync::Arc;
use std::time::Duration;

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
}

impl Handoff {
    /// The request, written to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        lock::write_handoff(
            out,
            &self.lease.redis_key,
            &self.lease.token,
            &self.token,
            self.ttl,
        );
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

    /// Frees the waiter's token, in case the handover ran; nobody waits for this.
    pub fn abandon(&self) {
        let orphan = self.granted(0);
        self.locker.store().release_orphan(orphan);
    }
}
