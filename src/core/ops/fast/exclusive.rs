//! ExclusiveLock's fast calls, sent outside the runtime: acquire() and release(). They end as
//! DistributedLock's do (see acquire.rs): with the reply, with the bound passed, or again
//! through the runtime when their lane cannot finish them, which is safe because the
//! acquire script recognises the attempt's token and a release only deletes a lock still
//! ours.

use super::undo::UndoSent;
use super::{count_missed, is_refusal, FastCall, Later, Settled, Step};
use crate::core::backend::lock_store::ScriptsFor;
use crate::core::basics::background::spawn;
use crate::core::basics::error::LockError;
use crate::core::ops::exclusive::{Claim, Exclusive, ExclusiveRequest, Proof, Terms};
use crate::core::proto::acquire::{Acquired, AttemptForm};
use crate::core::proto::{Op, Wire};
use futures_util::FutureExt;
use redis::Value;
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

/// One attempt; `Ok(None)` when the lock is someone else's.
///
/// Sent as the script, it may run twice: the script recognises its own token. Sent as the
/// transaction (proto/acquire.rs), only its reply tells what it did: its lock key is known
/// ours only by the expiry the reply tells. So where the reply is lost a fresh attempt is
/// made (should the lost transaction have won, its lock key then waits for its TTL).
pub struct ExclusiveAttempt {
    lock: Arc<Exclusive>,
    request: ExclusiveRequest,
    /// How it was written: its reply is read so.
    form: Cell<AttemptForm>,
}

impl ExclusiveAttempt {
    /// `sent` counts from now.
    pub fn new(lock: &Arc<Exclusive>, terms: &Terms) -> Self {
        ExclusiveAttempt {
            request: lock.attempt_request(terms),
            lock: lock.clone(),
            form: Cell::new(AttemptForm::Script),
        }
    }

    fn transaction(&self) -> bool {
        self.form.get() == AttemptForm::Transaction
    }

    /// A transaction that set the lock key, but whose counter gave no fence: the lock is
    /// taken back, and the attempt fails as the script's would.
    fn no_fence(self, set_at: Option<i64>) -> Later<Option<Claim>> {
        let ExclusiveAttempt { lock, request, .. } = self;
        async move {
            lock.undo(&request, set_at).await;
            Err(LockError::no_fence())
        }
        .boxed()
    }
}

impl FastCall for ExclusiveAttempt {
    type Output = Option<Claim>;

    fn write<W: Wire>(&self, out: &mut W, form: AttemptForm) -> usize {
        let form = self.request.terms.form(form);
        self.form.set(form);
        let op = self.request.op(form);
        op.encode(out);
        op.replies()
    }

    fn bound(&self) -> Duration {
        self.lock.command_timeout()
    }

    fn answered(self, reply: Value) -> Step<Option<Claim>> {
        if self.transaction() {
            let terms = &self.request.terms;
            terms.note_kept_fences(self.lock.store(), &reply);
        }
        match self.request.op(self.form.get()).decode(reply) {
            Ok(Acquired::Won { fence, set_at }) => {
                Step::Now(Ok(Some(self.request.claim(fence, set_at))))
            }
            Ok(Acquired::Held { .. }) => {
                self.lock.stats().contended(&self.lock.key);
                self.request.terms.note_held(self.lock.store());
                Step::Now(Ok(None))
            }
            Ok(Acquired::SetWithoutFence { set_at }) => Step::Later(self.no_fence(set_at)),
            // NOSCRIPT, EXECABORT and the like: nothing ran, or the script recognises its
            // token.
            Ok(Acquired::Refused) => Step::Later(self.resend(None)),
            Err(err) => Step::Now(Err(err)),
        }
    }

    fn follow_up(&self, reply: &Value, out: &mut Vec<u8>) -> bool {
        count_missed(&self.request.op(self.form.get()), reply, out)
    }

    fn timed_out(&mut self, bound: Duration) -> Settled<Option<Claim>> {
        Err(LockError::no_reply(bound))
    }

    fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<UndoSent> {
        match self.request.op(self.form.get()).decode(reply) {
            Ok(Acquired::Won { set_at, .. } | Acquired::SetWithoutFence { set_at }) => {
                self.request.write_release(out, set_at);
                let ExclusiveAttempt { lock, request, .. } = self;
                let stats = lock.stats().clone();
                let again = move || spawn(async move { lock.undo(&request, set_at).await });
                Some(UndoSent::new(&stats, again))
            }
            _ => None,
        }
    }

    fn resend(self, left: Option<Duration>) -> Later<Option<Claim>> {
        let transaction = self.transaction();
        let ExclusiveAttempt { lock, request, .. } = self;
        async move {
            let timeout = left.unwrap_or(lock.command_timeout());
            let request = if transaction {
                request.renewed()
            } else {
                request
            };
            lock.store()
                .ensure_scripts(timeout, ScriptsFor::Attempt)
                .await?;
            lock.acquire_again(request, timeout).await
        }
        .boxed()
    }

    fn abandon(self) {
        let transaction = self.transaction();
        let ExclusiveAttempt { lock, request, .. } = self;
        // A transaction's lock key is known ours only by the expiry its reply would have told:
        // it is left to its TTL.
        if !transaction {
            spawn(async move { lock.abandon(&request).await });
        }
    }

    fn orphaned(self) -> Option<Later<Option<Claim>>> {
        self.abandon();
        None
    }
}

/// Deletes the lock if it is still ours; answers whether it was.
pub struct ExclusiveRelease {
    lock: Arc<Exclusive>,
    token: String,
    contents: String,
    /// The lock key's expiry as the transaction that took it set it.
    set_at: Option<i64>,
}

impl ExclusiveRelease {
    pub fn new(
        lock: &Arc<Exclusive>,
        token: String,
        contents: String,
        set_at: Option<i64>,
    ) -> Self {
        ExclusiveRelease {
            lock: lock.clone(),
            token,
            contents,
            set_at,
        }
    }

    fn proof(&self) -> Proof<'_> {
        Proof {
            token: &self.token,
            contents: &self.contents,
            set_at: self.set_at,
        }
    }

    /// The same release through the runtime's connection.
    pub async fn run(self) -> Settled<bool> {
        self.lock.release(&self.proof()).await
    }
}

impl FastCall for ExclusiveRelease {
    type Output = bool;

    fn write<W: Wire>(&self, out: &mut W, _form: AttemptForm) -> usize {
        self.lock.release_op(&self.proof()).encode(out);
        1
    }

    fn bound(&self) -> Duration {
        self.lock.command_timeout()
    }

    fn answered(self, reply: Value) -> Step<bool> {
        if is_refusal(&reply) {
            return Step::Later(self.resend(None));
        }
        Step::Now(self.lock.release_op(&self.proof()).decode(reply))
    }

    fn timed_out(&mut self, bound: Duration) -> Settled<bool> {
        Err(LockError::no_reply(bound))
    }

    fn answered_late(self, _reply: Value, _out: &mut Vec<u8>) -> Option<UndoSent> {
        None
    }

    fn resend(self, _left: Option<Duration>) -> Later<bool> {
        self.run().boxed()
    }

    fn abandon(self) {}

    fn orphaned(self) -> Option<Later<bool>> {
        Some(self.resend(None))
    }
}

#[cfg(test)]
#[path = "exclusive_tests.rs"]
mod tests;
