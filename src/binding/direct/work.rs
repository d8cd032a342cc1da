//! What a call sent on the JS-thread connection is waiting for, and how it ends: with its
//! reply, with its bound passed, or handed to the tokio connection when the JS-thread one
//! broke (or answered with an error) under it.

use super::super::completions::{Completer, Outcome};
use super::super::distributed_lock::{finish, AutoRefresh};
use super::handoff::Handoff;
use crate::core::error::LockError;
use crate::core::lease::Lease;
use crate::core::lock::{self, AttemptRequest, Locker};
use crate::core::wake::Caller;
use redis::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `acquire` gives up after its retries with an error; `tryAcquire` answers with no handle.
pub enum Mode {
    Try,
    Retries {
        retries: u32,
        delay: Duration,
        cancel: CancellationToken,
    },
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
        /// Who waits, should it come to retries: a release on this thread may answer it.
        caller: Option<Caller>,
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
                caller,
            } => match request.won(reply) {
                Ok(Some(fence)) => {
                    Next::Settled(won(locker, request.into_lease(fence), &mode, auto))
                }
                Ok(None) => held(id, locker, request, mode, auto, caller, completer),
                Err(err) => Next::Settled(Outcome::Failed(err)),
            },
            Work::Release { lease, .. } => Next::Settled(failed(
                Locker::release_outcome(&lease, Ok(reply)).map(|_| Outcome::Done),
            )),
            Work::Exists { .. } => Next::Settled(match redis::from_redis_value::<i64>(reply) {
                Ok(count) => Outcome::Bool(count > 0),
                Err(err) => Outcome::Failed(redis::RedisError::from(err).into()),
            }),
            Work::Forget | Work::Handoff(_) => Next::Elsewhere,
        }
    }

    /// The reply came after the caller was told of the timeout: a lock won meanwhile is
    /// freed at once, on the same connection (so after the attempt, whenever it ran); the
    /// release is written to `out`.
    pub fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<Work> {
        if let Work::Handoff(handoff) = &self {
            return handoff.answered_late(reply, out).then_some(Work::Forget);
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
                    let (retries, delay, cancel) = match &mode {
                        Mode::Try => (0, Duration::ZERO, CancellationToken::new()),
                        Mode::Retries {
                            retries,
                            delay,
                            cancel,
                        } => (*retries, *delay, cancel.clone()),
                    };
                    let result = locker
                        .acquire_again(request, timeout, retries, delay, &cancel)
                        .await;
                    match (result, mode) {
                        (Ok(lease), _) => finish(&locker, lease, auto),
                        (Err(LockError::Locked { .. }), Mode::Try) => Outcome::NoHandle,
                        (Err(err), _) => Outcome::Failed(err),
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
            Work::Forget => {}
        }
    }

    /// The JS environment is going away with this call unanswered: an attempt that may
    /// have won is freed, and a release (or handover) goes again through tokio, so the lock
    /// does not wait for its TTL. Nobody hears of either.
    pub fn orphaned(self, id: u32, completer: &Completer) {
        match self {
            Work::Acquire { .. } => self.abandon(),
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
    if let Mode::Retries { cancel, .. } = mode {
        if cancel.is_cancelled() {
            napi::bindgen_prelude::spawn(async move {
                let _ignored = locker.release(&lease).await;
            });
            return Outcome::Failed(LockError::Aborted);
        }
    }
    finish(&locker, lease, auto)
}

/// A held lock: `tryAcquire` answers, `acquire` retries through tokio (its waits and
/// wake-ups live there).
fn held(
    id: u32,
    locker: Arc<Locker>,
    request: AttemptRequest,
    mode: Mode,
    auto: Option<AutoRefresh>,
    caller: Option<Caller>,
    completer: &Completer,
) -> Next {
    match mode {
        Mode::Try => Next::Settled(Outcome::NoHandle),
        Mode::Retries { retries: 0, .. } => Next::Settled(Outcome::Failed(LockError::Locked {
            key: request.key,
            retries: 0,
        })),
        Mode::Retries {
            retries,
            delay,
            cancel,
        } => {
            completer.run(id, async move {
                let (key, ttl) = (request.key, request.ttl);
                match locker
                    .retry_as(&key, ttl, retries, delay, &cancel, caller)
                    .await
                {
                    Ok(lease) => finish(&locker, lease, auto),
                    Err(err) => Outcome::Failed(err),
                }
            });
            Next::Elsewhere
        }
    }
}
