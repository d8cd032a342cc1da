//! DistributedLock's `extend()` sent outside the runtime (see mod.rs). Unlike the
//! other fast calls it must not run twice (extend.lua adds to the remaining TTL), so a
//! connection that breaks under it ends it with the error the runtime's would give (see
//! `Replay::Never`); only a refusal, which ran nothing, goes again through the runtime.

use super::undo::UndoSent;
use super::{is_refusal, FastCall, Later, Settled, Step};
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::ops::lock::{AttemptForm, Locker};
use crate::core::proto::{Op, Wire};
use futures_util::FutureExt;
use redis::Value;
use std::sync::Arc;
use std::time::Duration;

/// Adds `extra` to the remaining TTL of a lock still ours.
pub struct ExtendCall {
    locker: Arc<Locker>,
    lease: Arc<Lease>,
    extra: Duration,
    sent: Stamp,
    bound: Duration,
}

impl ExtendCall {
    /// `sent` counts from now: the new deadline is counted from before Redis could act.
    pub fn new(locker: &Arc<Locker>, lease: &Arc<Lease>, extra: Duration) -> Self {
        ExtendCall {
            bound: locker.bound_for(lease),
            locker: locker.clone(),
            lease: lease.clone(),
            extra,
            sent: Stamp::now(),
        }
    }

    pub fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    fn through_runtime(self) -> Later<()> {
        let ExtendCall {
            locker,
            lease,
            extra,
            ..
        } = self;
        async move { locker.extend(&lease, extra).await }.boxed()
    }
}

impl FastCall for ExtendCall {
    fn silent_after(&self) -> Duration {
        self.locker.command_timeout()
    }

    type Output = ();

    fn write<W: Wire>(&self, out: &mut W, _form: AttemptForm) -> usize {
        Locker::extend_op(&self.lease, self.extra).encode(out);
        1
    }

    fn bound(&self) -> Duration {
        self.bound
    }

    fn answered(self, reply: Value) -> Step<()> {
        if is_refusal(&reply) {
            return Step::Later(self.through_runtime());
        }
        let extend = Locker::extend_op(&self.lease, self.extra);
        Step::Now(
            extend
                .decode(reply)
                .and_then(|new_ttl| self.locker.extended(&self.lease, self.sent, new_ttl)),
        )
    }

    fn timed_out(&mut self, bound: Duration) -> Settled<()> {
        Err(LockError::no_reply(bound))
    }

    fn answered_late(self, _reply: Value, _out: &mut Vec<u8>) -> Option<UndoSent> {
        None
    }

    fn resend(self, _left: Option<Duration>) -> Later<()> {
        async {
            Err(LockError::Connection(
                "the connection to Redis closed before extend() was answered; the lock's TTL \
                 may or may not have been extended"
                    .into(),
            ))
        }
        .boxed()
    }

    fn abandon(self) {}

    fn orphaned(self) -> Option<Later<()>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extend() -> ExtendCall {
        // Nothing is sent: the store only names the keys and bounds.
        let locker = crate::core::ops::test_support::locker(1, "lock:");
        let lease = Arc::new(Lease::new(
            "k".into(),
            locker.redis_key("k"),
            "token".into(),
            3,
            Stamp::now(),
            Duration::from_secs(1),
        ));
        ExtendCall::new(&locker, &lease, Duration::from_millis(500))
    }

    #[test]
    fn writes_the_extend_script_with_the_token_and_the_extra_ms() {
        let mut out = Vec::new();
        assert_eq!(extend().write(&mut out, AttemptForm::Transaction), 1);
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("EVALSHA"));
        assert!(text.contains("\r\nlock:k\r\n") && text.contains("\r\ntoken\r\n"));
        assert!(text.contains("\r\n500\r\n"), "{text}");
    }

    #[test]
    fn a_new_ttl_extends_the_lease_and_zero_says_it_is_not_held() {
        let call = extend();
        let lease = call.lease().clone();
        let before = lease.remaining();
        assert!(matches!(
            call.answered(Value::Int(60_000)),
            Step::Now(Ok(()))
        ));
        assert!(lease.remaining() > before + Duration::from_secs(50));
        let call = extend();
        let lease = call.lease().clone();
        assert!(matches!(
            call.answered(Value::Int(0)),
            Step::Now(Err(LockError::NotHeld { .. }))
        ));
        assert!(lease.is_released());
    }

    #[test]
    fn a_broken_connection_never_sends_it_again() {
        let later = extend().resend(None);
        let result = futures_util::FutureExt::now_or_never(later);
        assert!(matches!(result, Some(Err(LockError::Connection(_)))));
        assert!(extend().orphaned().is_none());
    }
}
