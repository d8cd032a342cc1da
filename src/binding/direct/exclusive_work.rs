//! ExclusiveLock's calls on the JS-thread connection: acquire() and release(). They end as
//! DistributedLock's do (see work.rs): with the reply, with the bound passed, or again
//! through tokio when this connection cannot finish them, which is safe because the acquire
//! script recognises the attempt's token and a release only deletes a lock still ours.

use super::super::completions::{Completer, Outcome};
use super::super::exclusive_lock::Winning;
use super::work::{Next, Work};
use crate::core::basics::error::LockError;
use crate::core::ops::exclusive::{AttemptRequest, Exclusive};
use redis::Value;
use std::sync::Arc;
use std::time::Duration;

// Boxed once as a whole (`Work::Exclusive`): boxing the acquire again would cost a second
// allocation per call for the sake of the smaller release.
#[allow(clippy::large_enum_variant)]
pub enum ExclusiveWork {
    Acquire {
        request: AttemptRequest,
        /// Makes the hold of a win: its watch, and the lock's `held`.
        winning: Winning,
    },
    Release {
        lock: Arc<Exclusive>,
        token: String,
        contents: String,
    },
}

impl ExclusiveWork {
    /// The reply came. A server error goes again through tokio, which loads the scripts on
    /// NOSCRIPT and reports anything else exactly as it would have.
    pub fn answered(self, id: u32, reply: Value, completer: &Completer) -> Next {
        if matches!(reply, Value::ServerError(_)) {
            self.hand_over(id, None, completer);
            return Next::Elsewhere;
        }
        Next::Settled(match self {
            ExclusiveWork::Acquire { request, winning } => winning.settle(request.won(reply)),
            ExclusiveWork::Release { .. } => match Exclusive::released(reply) {
                Ok(deleted) => Outcome::Bool(deleted),
                Err(err) => Outcome::Failed(err),
            },
        })
    }

    /// The reply came after the caller was told of the timeout: a lock won meanwhile is
    /// freed at once, on the same connection; the release is written to `out`.
    pub fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<Work> {
        let ExclusiveWork::Acquire { request, .. } = self else {
            return None;
        };
        if !AttemptRequest::took_it(&reply) {
            return None;
        }
        request.write_release(out);
        Some(Work::Forget)
    }

    /// The bound passed with no reply (the reply may still come, see `answered_late`): the
    /// error the runtime's path gives for its own bound.
    pub fn timed_out(&mut self, bound: Duration) -> Outcome {
        Outcome::Failed(LockError::Timeout(format!(
            "no reply within {} ms",
            bound.as_millis()
        )))
    }

    /// The connection is gone (or answered with an error) with this call unanswered: it goes
    /// again through tokio within what is left of its bound (`left`, or its own bound).
    pub fn hand_over(self, id: u32, left: Option<Duration>, completer: &Completer) {
        match self {
            ExclusiveWork::Acquire { request, winning } => completer.run(id, async move {
                let lock = winning.lock().clone();
                let timeout = left.unwrap_or(lock.command_timeout());
                let attempt = async {
                    lock.store().ensure_scripts(timeout).await?;
                    lock.acquire_again(request, timeout).await
                };
                winning.settle(attempt.await)
            }),
            ExclusiveWork::Release {
                lock,
                token,
                contents,
            } => completer.run(id, async move {
                match lock.release(&token, &contents).await {
                    Ok(deleted) => Outcome::Bool(deleted),
                    Err(err) => Outcome::Failed(err),
                }
            }),
        }
    }

    /// The JS environment is going away with this call unanswered: an attempt that may
    /// have won is freed, a release goes again through tokio. Nobody hears of either.
    pub fn orphaned(self, id: u32, completer: &Completer) {
        match self {
            ExclusiveWork::Acquire { .. } => self.abandon(),
            ExclusiveWork::Release { .. } => self.hand_over(id, None, completer),
        }
    }

    /// The connection is gone with this call unanswered and its caller already told of the
    /// timeout: a lock the attempt may have won is freed through tokio.
    pub fn abandon(self) {
        if let ExclusiveWork::Acquire { request, winning } = self {
            let lock = winning.lock().clone();
            napi::bindgen_prelude::spawn(async move { lock.abandon(&request).await });
        }
    }
}
