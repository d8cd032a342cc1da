//! DistributedLock's (and maestro's service's) first attempt at a lock, sent on the JS
//! thread's own connection (see mod.rs): a won lock is the caller's at once; a held one
//! goes on through the runtime as the attempt's plan says.

use super::undo::UndoSent;
use super::{count_missed, FastCall, Later, Settled, Step};
use crate::core::basics::background::spawn;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::ops::acquire::{Plan, Start};
use crate::core::ops::attempt::PlainRequest;
use crate::core::ops::key_scheme::KeyScheme;
use crate::core::ops::lock::{AttemptForm, Locker};
use crate::core::proto::acquire::Acquired;
use crate::core::proto::release::Release;
use crate::core::proto::wire::write_whole;
use crate::core::proto::{Op, Wire};
use crate::core::wait::wake::TryingSent;
use futures_util::FutureExt;
use redis::Value;
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

/// How an acquisition sent here goes on: its plan should the lock be held, and the
/// caller's cancellation.
pub struct Mode {
    pub plan: Plan,
    pub cancel: Cancel,
}

/// A first attempt at a DistributedLock (or maestro's service) lock. `Ok(None)`: not won,
/// and the plan does not make that an error.
pub struct PlainAttempt {
    locker: Arc<Locker>,
    request: PlainRequest,
    /// How it was written: its reply is read so.
    form: Cell<AttemptForm>,
    mode: Mode,
    bound: Duration,
    /// A waiter joined before this attempt (behind waiters of ours) is marked trying while
    /// it is on its way, as the runtime's attempts are (ops/attempt.rs): no release of ours
    /// answers its caller in place meanwhile. Cleared as the attempt is dropped, its reply
    /// read (or the connection gone).
    _trying: Option<TryingSent>,
}

impl PlainAttempt {
    /// `locker`'s first attempt at `key`; `sent` counts from now.
    pub fn new(locker: &Arc<Locker>, key: impl Into<String>, ttl: Duration, mode: Mode) -> Self {
        Self::sent_at(locker, key, ttl, mode, Stamp::now())
    }

    /// `new`, sent at `sent`, the caller's reading taken before it (see
    /// `Locker::attempt_request_at`).
    pub fn sent_at(
        locker: &Arc<Locker>,
        key: impl Into<String>,
        ttl: Duration,
        mode: Mode,
        sent: Stamp,
    ) -> Self {
        let bound = mode.plan.attempts.bound(locker.command_timeout());
        // Left unmarked when a release of ours is handing it the lock already (that
        // hand-over answers it), as it was before this mark.
        let trying = (mode.plan.ticket()).and_then(|ticket| ticket.trying_sent().ok().flatten());
        PlainAttempt {
            _trying: trying,
            request: locker.attempt_request_at(key, ttl, sent),
            locker: locker.clone(),
            form: Cell::new(AttemptForm::Script),
            mode,
            bound,
        }
    }

    /// A held lock: the plan goes on through the runtime (its waits and wake-ups live
    /// there), unless it ends here (`tryAcquire`, `acquire` without retries).
    fn held(self, holder_ttl: Option<Duration>) -> Step<Option<Lease>> {
        self.locker.stats().contended(&self.request.key);
        self.request.terms.note_held(self.locker.store());
        let PlainAttempt {
            locker,
            request,
            mode: Mode { plan, cancel },
            ..
        } = self;
        let (key, ttl) = (request.key, request.terms.ttl);
        if let Some(ended) = plan.attempts.ended_by_held(&key) {
            return Step::Now(ended);
        }
        // Joined here, on the lane's thread, as soon as the reply is read: a release made
        // there from now on can hand the lock to it at once.
        let (plan, missed) = plan.joined(&locker, &key, ttl);
        let start = Start::after_held(missed, holder_ttl);
        Step::Later(async move { locker.pursue(plan, &key, ttl, &cancel, start).await }.boxed())
    }
}

/// A won attempt: the caller's at once, unless it gave up meanwhile; then the runtime frees
/// it as acquire.rs `won` says.
pub(super) fn won(locker: Arc<Locker>, lease: Lease, mode: Mode) -> Step<Option<Lease>> {
    if !locker.is_cancelled(&mode.cancel) {
        drop(mode);
        return Step::Now(Ok(Some(lease)));
    }
    Step::Later(
        async move {
            let Mode { plan, cancel } = mode;
            let key = lease.key.clone();
            (locker.won(lease, &cancel, plan, KeyScheme::Ours(&key))).await
        }
        .boxed(),
    )
}

/// An attempt whose outcome is unknown (its connection broke, or a server refused it there)
/// goes on through the runtime with the same token, within `left` (or the command timeout).
pub(super) fn again(
    locker: Arc<Locker>,
    request: PlainRequest,
    mode: Mode,
    left: Option<Duration>,
) -> Later<Option<Lease>> {
    let Mode { plan, cancel } = mode;
    let timeout = left.unwrap_or(locker.command_timeout());
    async move {
        let (key, ttl) = (request.key.clone(), request.terms.ttl);
        let start = Start::Again { request, timeout };
        locker.pursue(plan, &key, ttl, &cancel, start).await
    }
    .boxed()
}

impl FastCall for PlainAttempt {
    fn silent_after(&self) -> Duration {
        self.locker.command_timeout()
    }

    type Output = Option<Lease>;

    fn write<W: Wire>(&self, out: &mut W, form: AttemptForm) -> usize {
        let form = self.request.terms.form(form);
        self.form.set(form);
        let mut op = self.request.op(form);
        op.fences_known_kept = self.request.terms.script_skips_upkeep(form);
        op.encode(out);
        op.replies()
    }

    fn bound(&self) -> Duration {
        self.bound
    }

    fn answered(self, reply: Value) -> Step<Option<Lease>> {
        let terms = &self.request.terms;
        terms.note_kept_fences(self.locker.store(), &reply);
        match self.request.op(self.form.get()).decode(reply) {
            Ok(Acquired::Won { fence, .. }) => {
                terms.note_script_won(self.locker.store(), self.form.get());
                // Before its ticket leaves: the lock's entry is still there to note it.
                (self.locker.store()).acquired(&self.request.terms.redis_key);
                let PlainAttempt {
                    locker,
                    request,
                    mode,
                    ..
                } = self;
                won(locker, request.into_lease(fence), mode)
            }
            Ok(Acquired::Held { ttl }) => self.held(ttl),
            // The script, sent with the same token, finds its own lock and either reads its
            // fence or takes the lock back and fails (see fence.lua).
            Ok(Acquired::SetWithoutFence { .. } | Acquired::Refused) => {
                Step::Later(self.resend(None))
            }
            Err(err) => Step::Now(Err(err)),
        }
    }

    fn follow_up(&self, reply: &Value, out: &mut Vec<u8>) -> bool {
        count_missed(&self.request.op(self.form.get()), reply, out)
    }

    fn timed_out(&mut self, bound: Duration) -> Settled<Option<Lease>> {
        // Its caller stops waiting: a late reply is undone, not read as this waiter's.
        self._trying = None;
        Err(LockError::no_reply(bound))
    }

    fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<UndoSent> {
        let answer = self.request.op(self.form.get()).decode(reply);
        if !answer.is_ok_and(|answer| answer.took_lock()) {
            return None;
        }
        let terms = &self.request.terms;
        let free = Release::late_win(&terms.redis_key, &terms.token, self.locker.is_fair());
        write_whole(&free, out);
        let stats = self.locker.stats().clone();
        // Only what the undo needs: the waiter's ticket and its trying mark end now, not
        // at the undo's reply, so a waiter that stopped waiting holds up no hand-over.
        let PlainAttempt {
            locker, request, ..
        } = self;
        Some(UndoSent::new(&stats, move || abandon(locker, request)))
    }

    fn resend(self, left: Option<Duration>) -> Later<Option<Lease>> {
        let PlainAttempt {
            locker,
            request,
            mode,
            ..
        } = self;
        again(locker, request, mode, left)
    }

    fn abandon(self) {
        abandon(self.locker, self.request);
    }

    fn orphaned(self) -> Option<Later<Option<Lease>>> {
        self.abandon();
        None
    }
}

/// Frees what an attempt may have won, through the runtime.
fn abandon(locker: Arc<Locker>, request: PlainRequest) {
    spawn(async move { locker.abandon(&request.terms).await });
}
