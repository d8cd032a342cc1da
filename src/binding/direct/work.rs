//! What a call sent on the JS-thread connection is waiting for, and how it ends: with its
//! reply, with its bound passed, or handed to the tokio connection when the JS-thread one
//! broke (or answered with an error) under it.

use super::super::completions::{Completer, Outcome};
use super::super::win::Win;
use super::exclusive_work::ExclusiveWork;
use super::handoff::Handoff;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::ops::lock::{self, AttemptRequest, Locker, Plan};
use redis::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How an acquisition sent here goes on: its plan should the lock be held, and the
/// caller's cancellation.
pub struct Mode {
    pub plan: Plan,
    pub cancel: CancellationToken,
}

// An acquire is most of what goes out, and lives only while in flight: boxing it would cost
// an allocation per call for the sake of the rarer, smaller variants.
#[allow(clippy::large_enum_variant)]
pub enum Work {
    Acquire {
        locker: Arc<Locker>,
        request: AttemptRequest,
        mode: Mode,
        /// What the caller is given once it is won.
        win: Win,
    },
    Release {
        locker: Arc<Locker>,
        lease: Arc<Lease>,
        answer: Answer,
    },
    Exists {
        locker: Arc<Locker>,
        key: String,
    },
    /// A release that hands the lock to a waiter of this thread.
    Handoff(Box<Handoff>),
    /// Frees a lock won by an attempt whose caller stopped waiting; nobody waits for it.
    Forget,
    /// ExclusiveLock's acquire() and release() (see exclusive_work.rs).
    Exclusive(Box<ExclusiveWork>),
}

/// What a release answers its caller.
#[derive(Clone, Copy)]
pub enum Answer {
    /// Nothing (DistributedLock's handle).
    Done,
    /// Whether the lock is ours no more: deleted now, or found gone (maestro's).
    Gone,
}

/// What the connection does after a reply.
pub enum Next {
    Settled(Outcome),
    /// Settled, and so is another call (`id`): a waiter handed the lock.
    Also(Outcome, u32, Outcome),
    /// Handed to tokio, which settles it (or nothing to settle).
    Elsewhere,
}

fn failed(result: Result<Outcome, LockError>) -> Outcome {
    result.unwrap_or_else(Outcome::Failed)
}

impl Work {
    /// The reply came. A server error is not interpreted here: the call goes again through
    /// tokio (safe: every call here may run twice), which reloads scripts on NOSCRIPT and
    /// reports anything else exactly as it would have.
    pub fn answered(self, id: u32, reply: Value, completer: &Completer) -> Next {
        if let Work::Handoff(handoff) = self {
            if is_refusal(&reply) {
                handoff.hand_over(id, completer);
                return Next::Elsewhere;
            }
            return handoff.answered(id, reply, completer);
        }
        if let Work::Exclusive(work) = self {
            return work.answered(id, reply, completer);
        }
        let refused = match &self {
            Work::Acquire { .. } => AttemptRequest::needs_script(&reply),
            _ => is_refusal(&reply),
        };
        if refused {
            self.hand_over(id, None, completer);
            return Next::Elsewhere;
        }
        match self {
            Work::Acquire {
                locker,
                request,
                mode,
                win,
            } => {
                let holder_ttl = AttemptRequest::holder_ttl(&reply);
                match request.won(reply) {
                    Ok(Some(fence)) => {
                        Next::Settled(won(locker, request.into_lease(fence), &mode, win))
                    }
                    Ok(None) => held(id, locker, request, mode, win, holder_ttl, completer),
                    Err(err) => Next::Settled(Outcome::Failed(err)),
                }
            }
            Work::Release {
                locker,
                lease,
                answer,
            } => match (Locker::release_outcome(&lease, Ok(reply)), answer) {
                (Err(err), _) => Next::Settled(Outcome::Failed(err)),
                (Ok(_), Answer::Done) => Next::Settled(Outcome::Done),
                (Ok(true), Answer::Gone) => Next::Settled(Outcome::Bool(true)),
                (Ok(false), Answer::Gone) => {
                    completer.run(id, gone(locker, lease));
                    Next::Elsewhere
                }
            },
            Work::Exists { .. } => Next::Settled(match redis::from_redis_value::<i64>(reply) {
                Ok(count) => Outcome::Bool(count > 0),
                Err(err) => Outcome::Failed(redis::RedisError::from(err).into()),
            }),
            Work::Forget | Work::Handoff(_) | Work::Exclusive(_) => Next::Elsewhere,
        }
    }

    /// The reply came after the caller was told of the timeout: a lock won meanwhile is
    /// freed at once, on the same connection (so after the attempt, whenever it ran); the
    /// release is written to `out`.
    pub fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<Work> {
        if let Work::Handoff(handoff) = &self {
            return handoff.answered_late(reply, out).then_some(Work::Forget);
        }
        if let Work::Exclusive(work) = self {
            return work.answered_late(reply, out);
        }
        let Work::Acquire { request, .. } = self else {
            return None;
        };
        if !AttemptRequest::took_it(&reply) {
            return None;
        }
        lock::write_release(out, &request.redis_key, &request.token);
        Some(Work::Forget)
    }

    /// The bound passed with no reply. The reply may still come (see `answered_late`).
    pub fn timed_out(&mut self, bound: Duration) -> Outcome {
        if let Work::Handoff(handoff) = self {
            return handoff.timed_out(bound);
        }
        if let Work::Exclusive(work) = self {
            return work.timed_out(bound);
        }
        let err = LockError::Timeout(format!("no reply within {} ms", bound.as_millis()));
        match self {
            Work::Release {
                lease,
                answer: Answer::Done,
                ..
            } => failed(Locker::release_outcome(lease, Err(err)).map(|_| Outcome::Done)),
            _ => Outcome::Failed(err),
        }
    }

    /// The connection is gone with this call unanswered: it goes again through tokio within
    /// what is left of its bound (`left`, or the call's own bound when `None`).
    pub fn hand_over(self, id: u32, left: Option<Duration>, completer: &Completer) {
        match self {
            Work::Acquire {
                locker,
                request,
                mode,
                win,
            } => {
                let timeout = left.unwrap_or(locker.command_timeout());
                completer.run(id, async move {
                    let Mode { plan, cancel } = mode;
                    let result = locker.again(request, timeout, plan, &cancel).await;
                    win.settle(&locker, result)
                });
            }
            Work::Release {
                locker,
                lease,
                answer,
            } => completer.run(id, async move {
                match (locker.release(&lease).await, answer) {
                    (Err(err), _) => Outcome::Failed(err),
                    (Ok(_), Answer::Done) => Outcome::Done,
                    (Ok(true), Answer::Gone) => Outcome::Bool(true),
                    (Ok(false), Answer::Gone) => gone(locker, lease).await,
                }
            }),
            Work::Exists { locker, key } => completer.run(id, async move {
                failed(locker.is_locked(&key).await.map(Outcome::Bool))
            }),
            Work::Handoff(handoff) => handoff.hand_over(id, completer),
            Work::Exclusive(work) => work.hand_over(id, left, completer),
            Work::Forget => {}
        }
    }

    /// The JS environment is going away with this call unanswered: an attempt that may
    /// have won is freed, and a release (or handover) goes again through tokio, so the lock
    /// does not wait for its TTL. Nobody hears of either.
    pub fn orphaned(self, id: u32, completer: &Completer) {
        match self {
            Work::Acquire { .. } => self.abandon(),
            Work::Exclusive(work) => work.orphaned(id, completer),
            Work::Release { .. } | Work::Handoff(_) => self.hand_over(id, None, completer),
            Work::Exists { .. } | Work::Forget => {}
        }
    }

    /// The connection is gone with this call unanswered and its caller already told of the
    /// timeout: an attempt that may have won, or a waiter's token a handover may have set,
    /// is freed through tokio.
    pub fn abandon(self) {
        match self {
            Work::Acquire {
                locker, request, ..
            } => {
                napi::bindgen_prelude::spawn(async move { locker.abandon(&request).await });
            }
            Work::Handoff(handoff) => handoff.abandon(),
            Work::Exclusive(work) => work.abandon(),
            _ => {}
        }
    }
}

/// A release that deleted nothing: whether the lock is gone all the same (maestro's answer).
async fn gone(locker: Arc<Locker>, lease: Arc<Lease>) -> Outcome {
    failed(
        locker
            .is_locked(&lease.key)
            .await
            .map(|held| Outcome::Bool(!held)),
    )
}

/// A server error, as the reply or inside a transaction's answer: the call goes again
/// through tokio, which reports it as it always does.
fn is_refusal(reply: &Value) -> bool {
    match reply {
        Value::ServerError(_) => true,
        Value::Array(items) => items
            .iter()
            .any(|item| matches!(item, Value::ServerError(_))),
        _ => false,
    }
}

/// A won attempt, unless the caller cancelled meanwhile: the lock is then freed, not handed out.
fn won(locker: Arc<Locker>, lease: Lease, mode: &Mode, win: Win) -> Outcome {
    if mode.cancel.is_cancelled() {
        napi::bindgen_prelude::spawn(async move {
            let _ignored = locker.release(&lease).await;
        });
        return win.settle_without(LockError::Aborted);
    }
    win.settle(&locker, Ok(Some(lease)))
}

/// A held lock: the plan goes on through tokio (its waits and wake-ups live there), unless
/// it ends here (`tryAcquire`, `acquire` without retries).
fn held(
    id: u32,
    locker: Arc<Locker>,
    request: AttemptRequest,
    mode: Mode,
    win: Win,
    holder_ttl: Option<Duration>,
    completer: &Completer,
) -> Next {
    let Mode { plan, cancel } = mode;
    let (key, ttl) = (request.key, request.ttl);
    match plan {
        Plan::Once => Next::Settled(win.settle(&locker, Ok(None))),
        Plan::Retries { retries: 0, .. } => {
            Next::Settled(Outcome::Failed(LockError::Locked { key, retries: 0 }))
        }
        plan => {
            completer.run(id, async move {
                let result = locker
                    .after_held(plan, &key, ttl, holder_ttl, &cancel)
                    .await;
                win.settle(&locker, result)
            });
            Next::Elsewhere
        }
    }
}
