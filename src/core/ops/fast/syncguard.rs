//! syncguard's acquire and release by lockId, sent on the JS thread's own connection (see
//! mod.rs). Both may run twice: an attempt resent with its lockId finds its own lock and
//! answers won (sg_acquire.lua), and a release by lockId only deletes that lockId's record.

use super::undo::UndoSent;
use super::{is_refusal, FastCall, Later, Settled, Step};
use crate::core::basics::background::spawn;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::pace::Pace;
use crate::core::ops::acquire::Start;
use crate::core::ops::attempt::Attempt;
use crate::core::ops::key_scheme::{KeyScheme, SyncguardKeys};
use crate::core::ops::lock::{AttemptForm, Locker};
use crate::core::ops::release_by_id;
use crate::core::ops::syncguard::{attempt_of, attempt_op};
use crate::core::proto::syncguard::{ReleaseById, ReleasedById};
use crate::core::proto::wire::write_whole;
use crate::core::proto::{Op, Wire};
use crate::core::wait::releases::Mark;
use futures_util::FutureExt;
use redis::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `backend.acquire`: one attempt. `Ok(None)` when the lock is held. Or `lock()`'s first
/// attempt (`then`): a held lock is then waited for on the runtime, paced and woken.
pub struct SyncguardAttempt {
    locker: Arc<Locker>,
    keys: SyncguardKeys,
    ttl: Duration,
    sent: Stamp,
    then: Option<PacedRest>,
}

/// The rest of a `lock()` whose first attempt this is: its pace from `started`, its
/// cancellation, and the release mark read before the attempt was sent.
pub struct PacedRest {
    pub pace: Pace,
    pub started: Instant,
    pub cancel: Cancel,
    pub mark: Mark,
}

impl SyncguardAttempt {
    pub fn new(locker: &Arc<Locker>, keys: SyncguardKeys, ttl: Duration) -> Self {
        SyncguardAttempt {
            locker: locker.clone(),
            keys,
            ttl,
            sent: Stamp::now(),
            then: None,
        }
    }

    /// `lock()`'s first attempt; the mark is read now, before it is sent.
    pub fn paced(
        locker: &Arc<Locker>,
        keys: SyncguardKeys,
        ttl: Duration,
        (pace, started): (Pace, Instant),
        cancel: Cancel,
    ) -> Self {
        let mark = locker.mark_at(&keys.lock_key);
        let then = Some(PacedRest {
            pace,
            started,
            cancel,
            mark,
        });
        SyncguardAttempt {
            then,
            ..Self::new(locker, keys, ttl)
        }
    }

    /// A won attempt: the caller's at once, unless its `lock()` was cancelled or its owner
    /// ended meanwhile; then the runtime frees it as acquire.rs `won` says.
    fn won(self, lease: Lease) -> Step<Option<Lease>> {
        let cancel = (self.then.as_ref()).map_or_else(Cancel::never, |rest| rest.cancel.clone());
        if !self.locker.is_cancelled(&cancel) {
            return Step::Now(Ok(Some(lease)));
        }
        let SyncguardAttempt { locker, keys, .. } = self;
        Step::Later(
            async move { (locker.won(lease, &cancel, (), KeyScheme::Syncguard(&keys))).await }
                .boxed(),
        )
    }

    /// A held lock: the answer, or for `lock()` the wait that follows.
    fn held(self, holder_ttl: Option<Duration>) -> Step<Option<Lease>> {
        self.locker.stats().contended(&self.keys.user_key);
        match self.then.is_some() {
            false => Step::Now(Ok(None)),
            true => Step::Later(self.paced_from(Start::Held { holder_ttl })),
        }
    }

    /// The rest of `lock()` on the runtime, from `start` (an attempt, or a pause when its
    /// first attempt here found the lock held); a plain acquire's attempt when not `lock()`.
    fn paced_from(self, start: Start) -> Later<Option<Lease>> {
        let SyncguardAttempt {
            locker,
            keys,
            ttl,
            then,
            ..
        } = self;
        async move {
            let Some(rest) = then else {
                return locker.sg_acquire(&keys, ttl).await;
            };
            let (paced, cancel) = ((rest.pace, rest.started), &rest.cancel);
            let lock = locker.sg_lock_from(&keys, ttl, paced, cancel, rest.mark, start);
            lock.await.map(Some)
        }
        .boxed()
    }

    /// The lock this attempt may have won, released by its lockId.
    fn release(locker: Arc<Locker>, keys: SyncguardKeys) -> Later<ReleasedById> {
        async move {
            let expect = Some(&keys.lock_key[..]);
            (locker.sg_release(&keys.index_key, &keys.lock_id, expect)).await
        }
        .boxed()
    }
}

impl FastCall for SyncguardAttempt {
    type Output = Option<Lease>;

    // Always the script: no transaction can apply syncguard's JSON liveness test. Not loaded
    // yet, the server refuses it, and the runtime's connection loads it and sends it again.
    fn write<W: Wire>(&self, out: &mut W, _form: AttemptForm) -> usize {
        let op = attempt_op(&self.keys, self.ttl, self.sent.at);
        op.encode(out);
        op.replies()
    }

    fn bound(&self) -> Duration {
        self.locker.command_timeout()
    }

    fn answered(self, reply: Value) -> Step<Option<Lease>> {
        // Only a script not loaded here is sent again: any other refusal came from a script
        // that ran (its fence may be drawn), and is the answer, as on the runtime.
        if matches!(&reply, Value::ServerError(err) if err.code() == "NOSCRIPT") {
            return Step::Later(self.resend(None));
        }
        let answer = attempt_op(&self.keys, self.ttl, self.sent.at).decode(reply);
        match answer.and_then(|answer| attempt_of(&self.keys, self.ttl, self.sent, answer)) {
            Ok(Attempt::Held { ttl }) => self.held(ttl),
            Ok(Attempt::Acquired(lease)) => self.won(lease),
            Err(err) => Step::Now(Err(err)),
        }
    }

    fn timed_out(&mut self, bound: Duration) -> Settled<Option<Lease>> {
        Err(LockError::no_reply(bound))
    }

    fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<UndoSent> {
        let answer = attempt_op(&self.keys, self.ttl, self.sent.at).decode(reply);
        if !answer.is_ok_and(|answer| answer.took_lock()) {
            return None;
        }
        let keys = &self.keys;
        let release = ReleaseById {
            index_key: &keys.index_key,
            lock_id: &keys.lock_id,
            expect: Some(&keys.lock_key),
            ours_wait: false,
        };
        write_whole(&release, out);
        let stats = self.locker.stats().clone();
        // Only what the undo needs, not the rest of a `lock()` (its pace, cancellation).
        let SyncguardAttempt { locker, keys, .. } = self;
        Some(UndoSent::new(&stats, move || abandon(locker, keys)))
    }

    // Within its command timeout again: an attempt is never bounded by less.
    fn resend(self, _left: Option<Duration>) -> Later<Option<Lease>> {
        // Its attempt never ran (not loaded here): it starts there again, on the runtime.
        self.paced_from(Start::Attempt)
    }

    fn abandon(self) {
        abandon(self.locker, self.keys);
    }

    fn orphaned(self) -> Option<Later<Option<Lease>>> {
        self.abandon();
        None
    }
}

/// `backend.release({ lockId })`, expecting the lock key this backend won it at.
pub struct SyncguardRelease {
    locker: Arc<Locker>,
    index_key: Vec<u8>,
    lock_id: String,
    expect: Vec<u8>,
    ours_wait: bool,
}

impl SyncguardRelease {
    pub fn new(locker: &Arc<Locker>, index_key: Vec<u8>, lock_id: String, expect: Vec<u8>) -> Self {
        let ours_wait = release_by_id::ours_wait(locker.store(), Some(&expect));
        SyncguardRelease {
            locker: locker.clone(),
            index_key,
            lock_id,
            expect,
            ours_wait,
        }
    }

    fn op(&self) -> ReleaseById<'_> {
        ReleaseById {
            index_key: &self.index_key,
            lock_id: &self.lock_id,
            expect: Some(&self.expect),
            ours_wait: self.ours_wait,
        }
    }
}

impl FastCall for SyncguardRelease {
    type Output = ReleasedById;

    fn write<W: Wire>(&self, out: &mut W, _form: AttemptForm) -> usize {
        self.op().encode(out);
        1
    }

    fn bound(&self) -> Duration {
        self.locker.command_timeout()
    }

    fn answered(self, reply: Value) -> Step<ReleasedById> {
        if is_refusal(&reply) {
            return Step::Later(self.resend(None));
        }
        let released = match self.op().decode(reply) {
            Ok(released) => released,
            Err(err) => return Step::Now(Err(err)),
        };
        let store = self.locker.store();
        match release_by_id::answered(store, Some(&self.expect), self.ours_wait, &released) {
            None => Step::Now(Ok(released)),
            Some(lock_key) => {
                store.pass_on(lock_key);
                Step::Now(Ok(released))
            }
        }
    }

    fn timed_out(&mut self, bound: Duration) -> Settled<ReleasedById> {
        Err(LockError::no_reply(bound))
    }

    fn answered_late(self, _reply: Value, _out: &mut Vec<u8>) -> Option<UndoSent> {
        None
    }

    fn resend(self, _left: Option<Duration>) -> Later<ReleasedById> {
        let SyncguardRelease {
            locker,
            index_key,
            lock_id,
            expect,
            ..
        } = self;
        async move { locker.sg_release(&index_key, &lock_id, Some(&expect)).await }.boxed()
    }

    fn abandon(self) {}

    fn orphaned(self) -> Option<Later<ReleasedById>> {
        Some(self.resend(None))
    }
}

/// Frees what a first attempt may have won, through the runtime.
fn abandon(locker: Arc<Locker>, keys: SyncguardKeys) {
    spawn(async move {
        let _ignored = SyncguardAttempt::release(locker, keys).await;
    });
}
