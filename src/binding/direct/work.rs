//! What a call sent on the JS-thread connection is waiting for, and how it ends: with its
//! reply, with its bound passed, or handed to the tokio connection when the JS-thread one
//! broke (or answered with an error) under it.

use super::super::completions::{Completer, Outcome};
use super::super::distributed_lock::{finish, AutoRefresh};
use super::exclusive_work::ExclusiveWork;
use super::handoff::Handoff;
use crate::core::error::LockError;
use crate::core::lease::Lease;
use crate::core::lock::{self, AttemptRequest, Locker, WaitStart};
use crate::core::wake::{Caller, Ticket};
use redis::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// `acquire` gives up after its retries with an error; `tryAcquire` answers with no handle;
/// `waitForLock` waits, already in its lock's queue, until its deadline.
pub enum Mode {
    Try,
    Retries {
        retries: u32,
        delay: Duration,
        cancel: CancellationToken,
        /// Who waits, should it come to retries: a release on this thread may answer it.
        caller: Option<Caller>,
    },
    Wait {
        ticket: Ticket,
        deadline: Instant,
        poll: Duration,
        cancel: CancellationToken,
    },
}

impl Mode {
    fn cancel(&self) -> Option<&CancellationToken> {
        match self {
            Mode::Try => None,
            Mode::Retries { cancel, .. } | Mode::Wait { cancel, .. } => Some(cancel),
        }
    }
}

// An acquire is most of what goes out, and lives only while in flight: boxing it would cost
// an allocation per call for the sake of the rarer, smaller variants.
#[allow(clippy::large_enum_variant)]
pub enum Work {
    Acquire {
        locker: Arc<Locker>,
        request: AttemptRequest,
        mode: Mode,
        /// Kept alive by the watchdog once won (`autoRefresh`).
        auto: Option<AutoRefresh>,
    },
    Release {
        locker: Arc<Locker>,
        lease: Arc<Lease>,
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
                auto,
            } => {
                let holder_ttl = AttemptRequest::holder_ttl(&reply);
                match request.won(reply) {
                    Ok(Some(fence)) => {
                        Next::Settled(won(locker, request.into_lease(fence), &mode, auto))
                    }
                    Ok(None) => held(id, locker, request, mode, auto, holder_ttl, completer),
                    Err(err) => Next::Settled(Outcome::Failed(err)),
                }
            }
            Work::Release { lease, .. } => Next::Settled(failed(
                Locker::release_outcome(&lease, Ok(reply)).map(|_| Outcome::Done),
            )),
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
            Work::Release { lease, .. } => {
                failed(Locker::release_outcome(lease, Err(err)).map(|_| Outcome::Done))
            }
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
                auto,
                ..
            } => {
                let timeout = left.unwrap_or(locker.command_timeout());
                completer.run(id, async move {
                    let (retries, delay, cancel, try_only) = match mode {
                        Mode::Try => (0, Duration::ZERO, CancellationToken::new(), true),
                        Mode::Retries {
                            retries,
                            delay,
                            cancel,
                            ..
                        } => (retries, delay, cancel, false),
                        Mode::Wait {
                            ticket,
                            deadline,
                            poll,
                            cancel,
                        } => {
                            let result = locker
                                .wait_again(request, timeout, ticket, deadline, poll, &cancel)
                                .await;
                            return failed(result.map(|lease| finish(&locker, lease, auto)));
                        }
                    };
                    let result = locker
                        .acquire_again(request, timeout, retries, delay, &cancel)
                        .await;
                    match result {
                        Ok(lease) => finish(&locker, lease, auto),
                        Err(LockError::Locked { .. }) if try_only => Outcome::NoHandle,
                        Err(err) => Outcome::Failed(err),
                    }
                });
            }
            Work::Release { locker, lease } => completer.run(id, async move {
                failed(locker.release(&lease).await.map(|_| Outcome::Done))
            }),
            Work::Exists { locker, key } => completer.run(id, async move {
                failed(locker.is_locked(&key).await.map(Outcome::Bool))
            }),
            Work::Handoff(handoff) => handoff.hand_over(id, completer),
            Work::Exclusive(work) => work.hand_over(id, left, completer),
            Work::Forget => {}
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
fn won(locker: Arc<Locker>, lease: Lease, mode: &Mode, auto: Option<AutoRefresh>) -> Outcome {
    if let Some(cancel) = mode.cancel() {
        if cancel.is_cancelled() {
            napi::bindgen_prelude::spawn(async move {
                let _ignored = locker.release(&lease).await;
            });
            return Outcome::Failed(LockError::Aborted);
        }
    }
    finish(&locker, lease, auto)
}

/// A held lock: `tryAcquire` answers, `acquire` retries and `waitForLock` waits through
/// tokio (their waits and wake-ups live there).
fn held(
    id: u32,
    locker: Arc<Locker>,
    request: AttemptRequest,
    mode: Mode,
    auto: Option<AutoRefresh>,
    holder_ttl: Option<Duration>,
    completer: &Completer,
) -> Next {
    let (key, ttl) = (request.key, request.ttl);
    match mode {
        Mode::Try => Next::Settled(Outcome::NoHandle),
        Mode::Retries { retries: 0, .. } => {
            Next::Settled(Outcome::Failed(LockError::Locked { key, retries: 0 }))
        }
        Mode::Retries {
            retries,
            delay,
            cancel,
            caller,
        } => {
            completer.run(id, async move {
                let result = locker
                    .retry_as(&key, ttl, retries, delay, &cancel, caller)
                    .await;
                failed(result.map(|lease| finish(&locker, lease, auto)))
            });
            Next::Elsewhere
        }
        Mode::Wait {
            ticket,
            deadline,
            poll,
            cancel,
        } => {
            completer.run(id, async move {
                let start = WaitStart::Held { holder_ttl };
                let result = locker
                    .wait_joined(ticket, &key, ttl, deadline, poll, &cancel, start)
                    .await;
                failed(result.map(|lease| finish(&locker, lease, auto)))
            });
            Next::Elsewhere
        }
    }
}
