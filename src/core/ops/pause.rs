//! A waiter between attempts: its pause until its next attempt is due, cut short by a release
//! that wakes it, and a lock handed to it meanwhile, by a release of ours or another
//! process's grant. When pauses happen, and what follows each, is the acquisition's
//! (acquire.rs).

use super::attempt::Attempt;
use super::key_scheme::KeyScheme;
use super::lock::Locker;
use super::release::GRANT_CLAIM;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::error::LockError;
use crate::core::basics::key_counts::KeyEvent;
use crate::core::basics::lease::Lease;
use crate::core::wait::wake::{self, Resume, Ticket};
use std::time::{Duration, Instant};

/// What a pause between attempts ended with.
pub(super) enum Pause {
    Woken,
    Due,
    /// Due, while the lock was handed between waiters of this process: it is not stuck, and
    /// this waiter's turn comes the same way.
    Moving,
    /// A release of this process handed the lock to this waiter.
    Granted(Lease),
}

impl Locker {
    /// Sleeps until `due` or until a release wakes this waiter, whichever comes first, and
    /// says which; a release of this process may have handed it the lock meanwhile. The
    /// first time, the connection subscribes and queues for the lock in the background
    /// (best effort: the sleep is the safety net, so a wait never fails or lingers for want
    /// of a subscription).
    pub(super) async fn pause_until(
        &self,
        ticket: &Ticket,
        due: Instant,
        name: &str,
        cancel: &Cancel,
    ) -> Result<Pause, LockError> {
        match ticket.look() {
            Resume::Granted(lease) => return Ok(self.handed(lease, name, ticket).await),
            Resume::Settled => return Err(LockError::Aborted),
            Resume::Waiting => {}
        }
        let view = ticket.view();
        if view.needs_preparing {
            let fair = ticket.is_fair();
            self.store()
                .prepare_wake(ticket.lock_key(), self.command_timeout(), fair);
        }
        let mut left = due.saturating_duration_since(Instant::now());
        // A fair waiter's place in line lives only as long as it keeps trying.
        let beat = ticket.is_fair() && left > wake::FAIR_HEARTBEAT;
        if beat {
            left = wake::FAIR_HEARTBEAT;
        }
        // While the server refuses connections no attempt can win: once refusals persist,
        // every waiter tries at once instead of sleeping out its bound, and its attempt
        // decides: it fails as fast, or finds the server back. Found down already, it tries
        // at once too (a refusal heard before may be stale when the JS thread's socket did
        // the talking). Not while a release of ours is handing it the lock: its attempt
        // would be refused at once, without a wait that lets the hand-over's task run on
        // the runtime's one thread; that hand-over's end wakes it instead.
        let drops = self.store().dropped();
        let refused = drops.next_refusal();
        let stale = drops.refusal().is_some();
        let mut notified = false;
        ticket.pausing(Instant::now() + left);
        let pause = tokio::select! {
            biased;
            _ = std::future::ready(()), if stale && !view.reserved => Pause::Woken,
            _ = refused, if !view.reserved => Pause::Woken,
            _ = ticket.woken() => {
                notified = true;
                Pause::Woken
            }
            result = self.sleep(left, cancel) => {
                result?;
                match () {
                    _ if beat => Pause::Woken,
                    _ if ticket.view().handoffs != view.handoffs => Pause::Moving,
                    _ => Pause::Due,
                }
            }
        };
        // From here on, a release announced is news for this waiter again; a lock handed
        // over meanwhile is taken, and a caller answered by its releaser is done. Only a
        // waiter that tries again was woken (README "Stats"): the news of a hand-over is a
        // notice too, but what it brought is counted as handed over, never as woken.
        match ticket.rearm() {
            Resume::Granted(lease) => Ok(self.handed(lease, name, ticket).await),
            Resume::Settled => Err(LockError::Aborted),
            Resume::Waiting => {
                if notified {
                    self.stats().woken(name);
                    self.store()
                        .key_watch()
                        .count(KeyEvent::Woken, || ticket.lock_key());
                }
                Ok(pause)
            }
        }
    }

    /// A release handed this waiter the lock: one of ours, or another process's grant,
    /// kept once confirmed (a grant lost meanwhile has the waiter try at once). A caller
    /// whose handle asks for the confirmation later starts on a fresh grant at once (valid
    /// for its claim until confirmed): the confirmation's round trip is off its way. One
    /// read late (its process stopped, or its thread busy) is confirmed first: it may have
    /// run out, and its caller should not start on a lock that is gone.
    async fn handed(&self, lease: Lease, name: &str, ticket: &Ticket) -> Pause {
        self.stats().handed_over(name);
        (self.store().key_watch()).count(KeyEvent::HandedOver, || &lease.redis_key);
        let fresh = lease.remaining() > GRANT_CLAIM / 2;
        if ticket.lends_grants() && lease.is_claim_only() && fresh {
            return Pause::Granted(self.confirm_grant_later(lease, name));
        }
        match self.confirm_grant(lease, name).await {
            Some(lease) => Pause::Granted(lease),
            None => Pause::Woken,
        }
    }

    /// Until `due` (the next scheduled attempt), tries again whenever a release is
    /// announced; a failed try leaves the schedule as it was.
    pub(super) async fn attempts_on_release(
        &self,
        scheme: KeyScheme<'_>,
        ttl: Duration,
        ticket: &Ticket,
        due: Instant,
        cancel: &Cancel,
    ) -> Result<Option<Lease>, LockError> {
        loop {
            match self.pause_until(ticket, due, scheme.name(), cancel).await? {
                Pause::Granted(lease) => return Ok(Some(lease)),
                // An attempt is due on its schedule, moving lock or not.
                Pause::Due | Pause::Moving => return Ok(None),
                Pause::Woken => {}
            }
            let timeout = self.command_timeout();
            self.pass_gate(scheme, timeout, cancel).await?;
            match self
                .attempt_bounded(scheme, ttl, timeout, Some(ticket))
                .await?
            {
                Attempt::Acquired(lease) => return Ok(Some(lease)),
                Attempt::Held { .. } => self.stats().contended(scheme.name()),
            }
        }
    }
}
