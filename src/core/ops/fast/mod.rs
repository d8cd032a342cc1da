//! Fast calls: sent on a lane outside the runtime (the JS thread's own socket, see
//! `ops/direct.rs`, or inline on `memory://`): each encodes its command, reads its reply,
//! and decides what comes next, whatever sends it. The lane only writes bytes, hands back
//! replies in order, and tells a call when its bound passed or its connection broke; it
//! knows nothing of locks.
//!
//! A call the lane cannot finish (its connection broke, or the server refused it there,
//! NOSCRIPT among others) goes again through the runtime's connection, which reloads scripts
//! and reports anything else exactly as it would have. That is safe because every call here
//! may run twice: an attempt's script recognises its token, a release only deletes a lock
//! still ours, and a handover names the waiter's token.

use super::delivery::Unclaimed;
use super::lock::{AttemptForm, Locker};
use super::release::outcome;
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::proto::acquire::AcquireAttempt;
use crate::core::proto::missed::CountMissed;
use crate::core::proto::read::Exists as IsLocked;
use crate::core::proto::release::{Release, ReleaseKind};
use crate::core::proto::wire::write_whole;
use crate::core::proto::{Op, Wire};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use redis::Value;
use std::sync::Arc;
use std::time::Duration;
use undo::UndoSent;

pub mod acquire;
pub mod exclusive;
pub mod extend;
pub mod handoff;
pub mod quorum;
pub mod syncguard;
pub mod undo;

pub type Settled<T> = Result<T, LockError>;

/// What a call comes to on the runtime, once it cannot end where it was sent.
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

/// A call sent on a lane outside the runtime. Its lane calls exactly one of `answered`,
/// `resend`, `orphaned`, or (after `timed_out`) `answered_late` or `abandon`.
pub trait FastCall: Send + 'static {
    /// The core-level result its caller is given.
    type Output: Send + 'static;

    /// Appends the request to `out` (RESP for a socket, the commands themselves for a
    /// keyspace run inline); answers with the number of replies it gets (the last is its
    /// answer; an error among the others is the answer).
    fn write<W: Wire>(&self, out: &mut W, form: AttemptForm) -> usize;

    /// How long the lane waits for the reply.
    fn bound(&self) -> Duration;

    /// How long the lane may go without this call's reply before the server counts as
    /// silent, and the lane is trusted with no more calls: the caller's command timeout. A
    /// bound cut short by the caller's own deadline or lease passes while the server is only
    /// busy a moment, and the lane keeps its order past it (issue 26).
    fn silent_after(&self) -> Duration {
        self.bound()
    }

    /// The reply came in time.
    fn answered(self, reply: Value) -> Step<Self::Output>;

    /// Read before `answered` (or `answered_late`) takes the reply, on a socket: `true` when
    /// a command was written to `out` behind the call, on its connection, its reply for
    /// nobody. Only an attempt's count of fences drawn in vain (`count_missed`); inline
    /// (`memory://`) nothing is drawn in vain, attempts going as the script.
    fn follow_up(&self, _reply: &Value, _out: &mut Vec<u8>) -> bool {
        false
    }

    /// The bound passed with no reply. The reply may still come (`answered_late`), or the
    /// connection break first (`abandon`).
    fn timed_out(&mut self, bound: Duration) -> Settled<Self::Output>;

    /// The reply came after the caller was told of the timeout. The undo, when something had
    /// to be undone (a lock won meanwhile, which nobody holds) and was written to `out`, on
    /// the same connection so that it runs after the call, whenever that ran; its reply is
    /// for nobody but the undo (`undo.rs`), so it goes whole (`wire::write_whole`): a
    /// NOSCRIPT would leave the lock to its TTL.
    fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<UndoSent>;

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

/// Counts the fences `attempt`'s `reply` drew for no acquisition (proto/missed.rs), written to
/// `out`: `true` when there were any. Not waited for: the caller is answered meanwhile.
pub(super) fn count_missed(attempt: &AcquireAttempt<'_>, reply: &Value, out: &mut Vec<u8>) -> bool {
    let fences = attempt.drawn_in_vain(reply);
    if fences == 0 {
        return false;
    }
    let missed_key = keys::missed_key(attempt.lock_key);
    let count = CountMissed {
        missed_key: &missed_key,
        fences,
    };
    write_whole(&count, out);
    true
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

/// A plain release of a lock nobody of ours waits for (`Locker::release_request`). Answers
/// whether the lock is ours no more: deleted now, or (`ask_gone`, maestro's answer) found
/// gone all the same.
pub struct PlainRelease {
    locker: Arc<Locker>,
    lease: Arc<Lease>,
    bound: Duration,
    ask_gone: bool,
    /// Within our tenure, on a store that grants (see ops/tenure.rs): once sent, the lock is
    /// kicked to the ring unless this process takes it back.
    quiet: bool,
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
            quiet: locker.store().grants(),
        })
    }

    /// A quiet release was answered (or timed out): the lock is kicked unless taken back.
    fn freed_quietly(&self) {
        if self.quiet {
            let window = self.locker.fence_retention_ms();
            (self.locker.store()).freed_quietly(&self.lease.redis_key, window);
        }
    }
}

impl PlainRelease {
    /// Sent only when no waiter of ours is to be woken (`Locker::release_request`). A quiet
    /// one leaves the queue alone: the lock stays with the ring's connections.
    fn op(&self) -> Release<'_> {
        Release {
            lock_key: &self.lease.redis_key,
            token: &self.lease.token,
            kind: ReleaseKind::Wake {
                ours_wait: self.quiet,
            },
        }
    }
}

/// A release that deleted nothing: whether the lock is gone all the same.
async fn gone(locker: Arc<Locker>, lease: Arc<Lease>) -> Settled<bool> {
    locker.is_locked(&lease.key).await.map(|held| !held)
}

impl FastCall for PlainRelease {
    fn silent_after(&self) -> Duration {
        self.locker.command_timeout()
    }

    type Output = bool;

    fn write<W: Wire>(&self, out: &mut W, _form: AttemptForm) -> usize {
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
        let outcome = outcome(&self.lease, self.op().decode(reply));
        self.freed_quietly();
        match outcome {
            Ok(false) if self.ask_gone => Step::Later(gone(self.locker, self.lease).boxed()),
            result => Step::Now(result),
        }
    }

    fn timed_out(&mut self, bound: Duration) -> Settled<bool> {
        self.freed_quietly();
        if self.ask_gone {
            return Err(LockError::no_reply(bound));
        }
        outcome(&self.lease, Err(LockError::no_reply(bound)))
    }

    fn answered_late(self, _reply: Value, _out: &mut Vec<u8>) -> Option<UndoSent> {
        None
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

    fn write<W: Wire>(&self, out: &mut W, _form: AttemptForm) -> usize {
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

    fn answered_late(self, _reply: Value, _out: &mut Vec<u8>) -> Option<UndoSent> {
        None
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
