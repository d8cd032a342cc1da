//! Calls carried by a connection outside the runtime (the JS thread's own socket, see
//! `ops/direct.rs`): each encodes its command, reads its reply, and decides what comes next,
//! whatever carries it. The carrier only writes bytes, hands back replies in order, and
//! tells a call when its bound passed or its connection broke; it knows nothing of locks.
//!
//! A call the carrier cannot finish (its connection broke, or the server refused it there,
//! NOSCRIPT among others) goes again through the runtime's connection, which reloads scripts
//! and reports anything else exactly as it would have. That is safe because every call here
//! may run twice: an attempt's script recognises its token, a release only deletes a lock
//! still ours, and a handover names the waiter's token.

use super::acquire::{Attempts, Plan, Start};
use super::attempt_terms::PlainRequest;
use super::delivery::Unclaimed;
use super::lock::{AttemptForm, Locker};
use super::release::outcome;
use crate::core::basics::background::spawn;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::proto::acquire::Acquired;
use crate::core::proto::read::Exists as IsLocked;
use crate::core::proto::release::{Release, ReleaseKind};
use crate::core::proto::Op;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use redis::Value;
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub mod exclusive;
pub mod extend;
pub mod handoff;

pub type Settled<T> = Result<T, LockError>;

/// What a call comes to on the runtime, once it cannot end where it was carried.
pub type Later<T> = BoxFuture<'static, Settled<T>>;

/// What a reply leads to.
pub enum Step<T> {
    /// The call ends now.
    Now(Settled<T>),
    /// The call ends now, and so does the call `waiter` of the same JS thread: a handover
    /// gave it `lease`. Its runtime task, if any, is to end without a word.
    Handed {
        released: Settled<T>,
        waiter: u32,
        lease: Lease,
        /// Frees the lock should the waiter's thread end before its code has it.
        unclaimed: Unclaimed,
    },
    /// The call goes on through the runtime.
    Later(Later<T>),
}

/// A call carried by an outside connection. Its carrier calls exactly one of `answered`,
/// `resend`, `orphaned`, or (after `timed_out`) `answered_late` or `abandon`.
pub trait FastCall: Send + 'static {
    /// The core-level result its caller is given.
    type Output: Send + 'static;

    /// Appends the request to `out`; answers with the number of replies it gets (the last
    /// is its answer; an error among the others is the answer).
    fn write(&self, out: &mut Vec<u8>, form: AttemptForm) -> usize;

    /// How long the carrier waits for the reply.
    fn bound(&self) -> Duration;

    /// The reply came in time.
    fn answered(self, reply: Value) -> Step<Self::Output>;

    /// The bound passed with no reply. The reply may still come (`answered_late`), or the
    /// connection break first (`abandon`).
    fn timed_out(&mut self, bound: Duration) -> Settled<Self::Output>;

    /// The reply came after the caller was told of the timeout. `true` when something had to
    /// be undone (a lock won meanwhile, which nobody holds), and was written to `out`, on the
    /// same connection so that it runs after the call, whenever that ran; its reply is for
    /// nobody.
    fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> bool;

    /// The connection is gone with the call unanswered: it goes again through the runtime
    /// within what is left of its bound (`left`, or its own bound when `None`).
    fn resend(self, left: Option<Duration>) -> Later<Self::Output>;

    /// The connection is gone with the call unanswered and its caller already told of the
    /// timeout: whatever it may have taken is freed through the runtime.
    fn abandon(self);

    /// The caller's JS environment is going away with the call unanswered: nobody hears of
    /// it. An attempt that may have won is freed; a release (or handover) goes again through
    /// the runtime, so the lock does not wait for its TTL.
    fn orphaned(self) -> Option<Later<Self::Output>>;
}

/// A server error, as the reply or inside a transaction's answer.
pub(crate) fn is_refusal(reply: &Value) -> bool {
    match reply {
        Value::ServerError(_) => true,
        Value::Array(items) => items
            .iter()
            .any(|item| matches!(item, Value::ServerError(_))),
        _ => false,
    }
}

/// How an acquisition carried here goes on: its plan should the lock be held, and the
/// caller's cancellation.
pub struct Mode {
    pub plan: Plan,
    pub cancel: CancellationToken,
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
}

impl PlainAttempt {
    /// `locker`'s first attempt at `key`; `sent` counts from now.
    pub fn new(locker: &Arc<Locker>, key: &str, ttl: Duration, mode: Mode) -> Self {
        let bound = mode.plan.attempts.bound(locker.command_timeout());
        PlainAttempt {
            request: locker.attempt_request(key, ttl),
            locker: locker.clone(),
            form: Cell::new(AttemptForm::Script),
            mode,
            bound,
        }
    }

    /// A held lock: the plan goes on through the runtime (its waits and wake-ups live
    /// there), unless it ends here (`tryAcquire`, `acquire` without retries).
    fn held(self, holder_ttl: Option<Duration>) -> Step<Option<Lease>> {
        let PlainAttempt {
            locker,
            request,
            mode: Mode { plan, cancel },
            ..
        } = self;
        let (key, ttl) = (request.key, request.terms.ttl);
        match plan.attempts {
            Attempts::Once => Step::Now(Ok(None)),
            Attempts::Retries { max: 0, .. } => {
                Step::Now(Err(LockError::Locked { key, retries: 0 }))
            }
            _ => {
                // Joined here, on the carrier's thread, as soon as the reply is read: a
                // release made there from now on can hand the lock to it at once.
                let (plan, missed) = plan.joined(&locker, &key, ttl);
                let start = match missed {
                    true => Start::Attempt,
                    false => Start::Held { holder_ttl },
                };
                Step::Later(
                    async move { locker.pursue(plan, &key, ttl, &cancel, start).await }.boxed(),
                )
            }
        }
    }
}

/// A won attempt, unless the caller cancelled meanwhile: the lock is then freed, not handed
/// out, and the caller is answered once it is (as on the runtime, acquire.rs `won`), so that
/// a caller who cancelled finds nothing held. `mode` goes first: a waiter's ticket in it
/// would be the one our release hands the lock to.
fn won(locker: Arc<Locker>, lease: Lease, mode: Mode) -> Step<Option<Lease>> {
    let cancelled = mode.cancel.is_cancelled();
    drop(mode);
    if !cancelled {
        return Step::Now(Ok(Some(lease)));
    }
    Step::Later(
        async move {
            let _ignored = locker.release(&lease).await;
            Err(LockError::Aborted)
        }
        .boxed(),
    )
}

impl FastCall for PlainAttempt {
    type Output = Option<Lease>;

    fn write(&self, out: &mut Vec<u8>, form: AttemptForm) -> usize {
        self.form.set(form);
        let op = self.request.op(form);
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

    fn timed_out(&mut self, bound: Duration) -> Settled<Option<Lease>> {
        Err(LockError::no_reply(bound))
    }

    fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> bool {
        let answer = self.request.op(self.form.get()).decode(reply);
        if !answer.is_ok_and(|answer| answer.took_lock()) {
            return false;
        }
        let terms = &self.request.terms;
        Release::late_win(&terms.redis_key, &terms.token, self.locker.is_fair()).encode(out);
        true
    }

    fn resend(self, left: Option<Duration>) -> Later<Option<Lease>> {
        let PlainAttempt {
            locker,
            request,
            mode: Mode { plan, cancel },
            ..
        } = self;
        let timeout = left.unwrap_or(locker.command_timeout());
        async move {
            let (key, ttl) = (request.key.clone(), request.terms.ttl);
            let start = Start::Again { request, timeout };
            locker.pursue(plan, &key, ttl, &cancel, start).await
        }
        .boxed()
    }

    fn abandon(self) {
        let PlainAttempt {
            locker, request, ..
        } = self;
        spawn(async move { locker.abandon(&request.terms).await });
    }

    fn orphaned(self) -> Option<Later<Option<Lease>>> {
        self.abandon();
        None
    }
}

/// A plain release of a lock nobody of ours waits for (`Locker::release_request`). Answers
/// whether the lock is ours no more: deleted now, or (`ask_gone`, maestro's answer) found
/// gone all the same.
pub struct PlainRelease {
    locker: Arc<Locker>,
    lease: Arc<Lease>,
    bound: Duration,
    ask_gone: bool,
}

impl PlainRelease {
    /// `None` when the release must go through the runtime (see `Locker::release_request`).
    pub fn new(locker: &Arc<Locker>, lease: &Arc<Lease>, ask_gone: bool) -> Option<Self> {
        let bound = locker.release_request(lease)?;
        Some(PlainRelease {
            locker: locker.clone(),
            lease: lease.clone(),
            bound,
            ask_gone,
        })
    }
}

impl PlainRelease {
    /// Sent only when no waiter of ours is to be woken (`Locker::release_request`).
    fn op(&self) -> Release<'_> {
        Release {
            lock_key: &self.lease.redis_key,
            token: &self.lease.token,
            kind: ReleaseKind::Wake { ours_wait: false },
        }
    }
}

/// A release that deleted nothing: whether the lock is gone all the same.
async fn gone(locker: Arc<Locker>, lease: Arc<Lease>) -> Settled<bool> {
    locker.is_locked(&lease.key).await.map(|held| !held)
}

impl FastCall for PlainRelease {
    type Output = bool;

    fn write(&self, out: &mut Vec<u8>, _form: AttemptForm) -> usize {
        self.op().encode(out);
        1
    }

    fn bound(&self) -> Duration {
        self.bound
    }

    fn answered(self, reply: Value) -> Step<bool> {
        if is_refusal(&reply) {
            return Step::Later(self.resend(None));
        }
        match outcome(&self.lease, self.op().decode(reply)) {
            Ok(false) if self.ask_gone => Step::Later(gone(self.locker, self.lease).boxed()),
            result => Step::Now(result),
        }
    }

    fn timed_out(&mut self, bound: Duration) -> Settled<bool> {
        if self.ask_gone {
            return Err(LockError::no_reply(bound));
        }
        outcome(&self.lease, Err(LockError::no_reply(bound)))
    }

    fn answered_late(self, _reply: Value, _out: &mut Vec<u8>) -> bool {
        false
    }

    fn resend(self, _left: Option<Duration>) -> Later<bool> {
        let PlainRelease {
            locker,
            lease,
            ask_gone,
            ..
        } = self;
        async move {
            match locker.release(&lease).await? {
                false if ask_gone => gone(locker, lease).await,
                deleted => Ok(deleted),
            }
        }
        .boxed()
    }

    fn abandon(self) {}

    fn orphaned(self) -> Option<Later<bool>> {
        Some(self.resend(None))
    }
}

/// Whether anyone holds a lock (`isLocked`).
pub struct IsLockedCall {
    locker: Arc<Locker>,
    key: String,
    lock_key: Vec<u8>,
}

impl IsLockedCall {
    pub fn new(locker: &Arc<Locker>, key: &str) -> Self {
        IsLockedCall {
            lock_key: locker.redis_key(key),
            locker: locker.clone(),
            key: key.to_owned(),
        }
    }
}

impl IsLockedCall {
    fn op(&self) -> IsLocked<'_> {
        IsLocked {
            lock_key: &self.lock_key,
        }
    }
}

impl FastCall for IsLockedCall {
    type Output = bool;

    fn write(&self, out: &mut Vec<u8>, _form: AttemptForm) -> usize {
        self.op().encode(out);
        1
    }

    fn bound(&self) -> Duration {
        self.locker.command_timeout()
    }

    fn answered(self, reply: Value) -> Step<bool> {
        if is_refusal(&reply) {
            return Step::Later(self.resend(None));
        }
        Step::Now(self.op().decode(reply))
    }

    fn timed_out(&mut self, bound: Duration) -> Settled<bool> {
        Err(LockError::no_reply(bound))
    }

    fn answered_late(self, _reply: Value, _out: &mut Vec<u8>) -> bool {
        false
    }

    fn resend(self, _left: Option<Duration>) -> Later<bool> {
        let IsLockedCall { locker, key, .. } = self;
        async move { locker.is_locked(&key).await }.boxed()
    }

    fn abandon(self) {}

    fn orphaned(self) -> Option<Later<bool>> {
        None
    }
}

#[cfg(test)]
mod tests;
