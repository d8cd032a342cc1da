//! A first attempt to send on a connection of its own (the caller's, see carried.rs): what
//! it writes, and what its reply means.

use super::lock::{fence_of, write_keep_fences, write_script, AttemptForm, Locker};
use super::scripts;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::resp;
use crate::core::basics::token;
use crate::core::proto::release::Release;
use std::time::Duration;

/// An acquire attempt sent on a connection of its own, and what its reply means.
pub struct AttemptRequest {
    pub key: String,
    pub redis_key: Vec<u8>,
    pub token: String,
    pub ttl: Duration,
    pub sent: Stamp,
    /// The locker's (see `Locker::fence_retention`).
    pub fence_retention_ms: u64,
    /// Whether the transaction pushes the fence counter's expiry (see kept_fences.rs).
    pub keep_fences: bool,
}

impl AttemptRequest {
    /// Appends the attempt to `out`; the answer is how many replies it gets (the last one
    /// is what `won` reads). Only the script tells a held lock's remaining TTL: a waiter
    /// whose transaction found the lock held asks it then (see `Locker::holder_ttl`), so a
    /// free lock costs nothing more.
    pub fn write(&self, out: &mut Vec<u8>, form: AttemptForm) -> usize {
        let fence_key = keys::fence_key(&self.redis_key);
        let ttl = resp::decimal(self.ttl.as_millis() as u64);
        match form {
            AttemptForm::Transaction | AttemptForm::Untried => {
                resp::write_command(out, &[b"MULTI"]);
                resp::write_command(
                    out,
                    &[
                        b"SET",
                        &self.redis_key,
                        self.token.as_bytes(),
                        b"NX",
                        b"PX",
                        ttl.as_bytes(),
                    ],
                );
                resp::write_command(out, &[b"INCRBY", &fence_key, b"2"]);
                let kept = write_keep_fences(
                    out,
                    &fence_key,
                    self.ttl.as_millis() as u64,
                    self.fence_retention_ms,
                    self.keep_fences,
                );
                resp::write_command(out, &[b"EXEC"]);
                4 + kept
            }
            AttemptForm::Script => {
                write_script(
                    out,
                    &scripts::ACQUIRE,
                    &[&self.redis_key, &fence_key],
                    &[
                        self.token.as_bytes(),
                        ttl.as_bytes(),
                        resp::decimal(self.fence_retention_ms).as_bytes(),
                    ],
                );
                1
            }
        }
    }

    /// The fence it drew when the reply says it won, `None` when the lock was held. Reads
    /// both forms: EXEC's `[OK or nil, counter]` and the script's `[1 or 0, fence or pttl]`.
    /// A win without a usable fence is an error (see `needs_script`, which catches the
    /// transaction's before this is asked).
    pub fn won(&self, reply: redis::Value) -> Result<Option<u64>, LockError> {
        use redis::Value;
        let reply = reply.extract_error()?;
        if let Value::Array(items) = &reply {
            if let [set @ (Value::Okay | Value::SimpleString(_) | Value::Nil), Value::Int(counter), ..] =
                items.as_slice()
            {
                if matches!(set, Value::Nil) {
                    return Ok(None);
                }
                fence_of(*counter)?;
                return fence_of(*counter - 1).map(Some);
            }
        }
        match resp::typed::<(i64, i64)>(reply)? {
            (1, fence) => fence_of(fence).map(Some),
            _ => Ok(None),
        }
    }

    /// Whether the reply must be settled by the acquire script instead: a server error (in
    /// the transaction's answer too), or a transaction that set the lock but whose counter
    /// gave no usable fence. The script, sent with the same token, finds its own lock and
    /// either reads its fence or takes the lock back and fails (see fence.lua).
    pub fn needs_script(reply: &redis::Value) -> bool {
        use redis::Value;
        match reply {
            Value::ServerError(_) => true,
            Value::Array(items) => match items.as_slice() {
                [Value::Nil, ..] => false,
                // The script's own answer (`[1, fence]` or `[0, pttl]`) is read by `won`.
                [Value::Int(_), Value::Int(_)] => false,
                // Drawn two at a time: the counter is the kept one, which must be a fence too.
                [_, Value::Int(counter), ..] => fence_of(*counter).is_err() || *counter < 2,
                _ => items
                    .iter()
                    .any(|item| matches!(item, Value::ServerError(_))),
            },
            _ => false,
        }
    }

    /// The holder's remaining TTL, when the reply to a failed attempt tells it: the
    /// script's `[0, pttl]`.
    pub fn holder_ttl(reply: &redis::Value) -> Option<Duration> {
        use redis::Value;
        let Value::Array(items) = reply else {
            return None;
        };
        match items.as_slice() {
            [Value::Int(0), Value::Int(pttl)] => {
                u64::try_from(*pttl).ok().map(Duration::from_millis)
            }
            _ => None,
        }
    }

    /// Whether the reply says the attempt set the lock, with or without a fence: what a late
    /// reply must know to free it.
    pub fn took_it(reply: &redis::Value) -> bool {
        use redis::Value;
        match reply {
            Value::Array(items) => matches!(
                items.first(),
                Some(Value::Okay | Value::SimpleString(_)) | Some(Value::Int(1))
            ),
            _ => false,
        }
    }

    pub fn into_lease(self, fence: u64) -> Lease {
        Lease::new(
            self.key,
            self.redis_key,
            self.token,
            fence,
            self.sent,
            self.ttl,
        )
    }
}

impl Locker {
    /// A first attempt (as `attempt`) to send elsewhere; `sent` is now.
    pub fn attempt_request(&self, key: &str, ttl: Duration) -> AttemptRequest {
        let redis_key = self.redis_key(key);
        let fence_retention_ms = self.fence_retention_ms();
        let keep_fences =
            self.store()
                .kept_fences()
                .due(&keys::fence_key(&redis_key), ttl, fence_retention_ms);
        AttemptRequest {
            key: key.to_owned(),
            redis_key,
            token: token::new_token(),
            ttl,
            sent: Stamp::now(),
            fence_retention_ms,
            keep_fences,
        }
    }

    /// Remembers how long the reply to `request`'s transaction kept its fence counter.
    pub fn note_kept_fences(&self, request: &AttemptRequest, reply: &redis::Value) {
        if request.keep_fences {
            let (ttl, window) = (request.ttl, request.fence_retention_ms);
            let kept = self.store().kept_fences();
            kept.answered(
                reply,
                &keys::fence_key(&request.redis_key),
                request.sent.at,
                ttl,
                window,
            );
        }
    }

    /// The bound of a release sent elsewhere (written by `write_release`). `None` when it
    /// must go through `release`: already released, or waiters of this process are to be
    /// woken by it.
    pub fn release_request(&self, lease: &Lease) -> Option<Duration> {
        let wakes = self.store().wakes();
        if self.is_fair() || lease.is_released() || wakes.waiters_at_release(&lease.redis_key) {
            return None;
        }
        Some(self.bound_for(lease))
    }

    /// The bound of a release (or handover) of `lease` sent elsewhere.
    pub fn release_bound(&self, lease: &Lease) -> Duration {
        self.bound_for(lease)
    }

    /// Frees a lock an attempt may have won after its caller stopped waiting, through the
    /// tokio connection (the attempt's own connection is gone), bounded by the lock's TTL.
    pub async fn abandon(&self, request: &AttemptRequest) {
        let free = Release::late_win(&request.redis_key, &request.token, self.is_fair());
        let _ignored = self.store().run(&free, request.ttl).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn pair(a: Value, b: Value) -> Value {
        Value::Array(vec![a, b])
    }

    fn request(keep_fences: bool) -> AttemptRequest {
        AttemptRequest {
            key: "k".into(),
            redis_key: b"lock:k".to_vec(),
            token: "t".into(),
            ttl: Duration::from_millis(1000),
            sent: Stamp::now(),
            fence_retention_ms: 5000,
            keep_fences,
        }
    }

    #[test]
    fn the_scripts_answer_is_read_as_it_is_even_for_the_first_fence() {
        // `[1, 1]`: the script won the key's very first fence; nothing to settle again.
        assert!(!AttemptRequest::needs_script(&pair(
            Value::Int(1),
            Value::Int(1)
        )));
        assert!(!AttemptRequest::needs_script(&pair(
            Value::Int(0),
            Value::Int(250)
        )));
        // The transaction's counter is the kept fence: below 2 it gave no usable pair.
        assert!(AttemptRequest::needs_script(&pair(
            Value::Okay,
            Value::Int(1)
        )));
        assert!(!AttemptRequest::needs_script(&pair(
            Value::Okay,
            Value::Int(2)
        )));
        assert!(!AttemptRequest::needs_script(&pair(
            Value::Nil,
            Value::Int(7)
        )));
    }

    #[test]
    fn only_the_scripts_held_answer_tells_the_holders_ttl() {
        let ttl = AttemptRequest::holder_ttl(&pair(Value::Int(0), Value::Int(250)));
        assert_eq!(ttl, Some(Duration::from_millis(250)));
        // No TTL on the key (-1) or a transaction's answer: unknown.
        assert_eq!(
            AttemptRequest::holder_ttl(&pair(Value::Int(0), Value::Int(-1))),
            None
        );
        assert_eq!(
            AttemptRequest::holder_ttl(&pair(Value::Nil, Value::Int(9))),
            None
        );
        assert_eq!(
            AttemptRequest::holder_ttl(&pair(Value::Int(1), Value::Int(9))),
            None
        );
    }

    #[test]
    fn the_transaction_asks_nothing_a_free_lock_does_not_need() {
        // Pushing the fence counter's expiry, or leaving a counter known kept alone.
        for (keep_fences, replies) in [(true, 6), (false, 4)] {
            let request = request(keep_fences);
            let mut out = Vec::new();
            assert_eq!(request.write(&mut out, AttemptForm::Transaction), replies);
            assert!(!out.windows(4).any(|w| w == b"PTTL"));
            assert_eq!(out.windows(7).any(|w| w == b"PEXPIRE"), keep_fences);
            assert!(!AttemptRequest::needs_script(&pair(
                Value::Okay,
                Value::Int(8)
            )));
            assert_eq!(
                request.won(pair(Value::Okay, Value::Int(8))).ok(),
                Some(Some(7))
            );
            assert_eq!(
                request.won(pair(Value::Nil, Value::Int(8))).ok(),
                Some(None)
            );
        }
    }
}
