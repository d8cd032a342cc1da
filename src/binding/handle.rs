use super::completions::{Completer, Outcome};
use super::direct::{Link, Work};
use super::error::{OrThrow, Result};
use super::events::JsSink;
use crate::core::clock::Stamp;
use crate::core::error::LockError;
use crate::core::lease::Lease;
use crate::core::lock::Locker;
use crate::core::sync::lock;
use crate::core::token::format_fence;
use crate::core::validate;
use crate::core::watchdog::{Sink, Watch};
use napi_derive::napi;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A held lock. Reads are local and synchronous; release and extend go to Redis.
#[napi]
pub struct NativeLockHandle {
    locker: Arc<Locker>,
    lease: Arc<Lease>,
    /// Present while the watchdog keeps the lock alive (`autoRefresh: true`).
    watch: Mutex<Option<Watch>>,
    completer: Completer,
}

impl NativeLockHandle {
    pub fn new(
        locker: Arc<Locker>,
        lease: Arc<Lease>,
        watch: Option<Watch>,
        completer: Completer,
    ) -> Self {
        NativeLockHandle {
            locker,
            lease,
            watch: Mutex::new(watch),
            completer,
        }
    }

    fn stop_refreshing(&self) {
        let watch = lock(&self.watch).take();
        if let Some(watch) = watch {
            watch.stop();
        }
    }
}

/// Keeps an auto-refreshed handle's local validity in step with what Redis confirmed, and
/// tells JavaScript when the lock is lost.
pub struct HandleSink {
    pub lease: Arc<Lease>,
    pub js: JsSink,
}

impl Sink for HandleSink {
    fn refreshed(&self, sent: Instant, ttl: Duration) {
        self.lease.extended(Stamp::at(sent), ttl);
    }

    fn lost(&self, error: LockError) {
        self.lease.mark_lost();
        self.js.lost(error);
    }
}

#[napi]
impl NativeLockHandle {
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.lease.key.clone()
    }

    #[napi(getter)]
    pub fn token(&self) -> String {
        self.lease.token.clone()
    }

    #[napi(getter)]
    pub fn fence(&self) -> String {
        format_fence(self.lease.fence)
    }

    #[napi(getter)]
    pub fn acquired_at(&self) -> f64 {
        self.lease.acquired_at_ms as f64
    }

    #[napi(getter)]
    pub fn expires_at(&self) -> f64 {
        self.lease.expires_at_ms() as f64
    }

    #[napi(getter)]
    pub fn is_held(&self) -> bool {
        self.lease.is_held()
    }

    /// Settles completion `id` when the lock is deleted (or was no longer ours).
    #[napi]
    pub fn release(&self, id: u32) {
        // Before the release is sent, on the JS thread (see NativeExclusiveLock::release).
        self.stop_refreshing();
        if let Some(link) = Link::existing(self.locker.store(), &self.completer) {
            if let Some((cmd, bound)) = self.locker.release_request(&self.lease) {
                let (locker, lease) = (self.locker.clone(), self.lease.clone());
                if link.send(id, || (cmd, bound, Work::Release { locker, lease })) {
                    return;
                }
            }
        }
        let (locker, lease) = (self.locker.clone(), self.lease.clone());
        self.completer.run(id, async move {
            match locker.release(&lease).await {
                Ok(_) => Outcome::Done,
                Err(err) => Outcome::Failed(err),
            }
        });
    }

    /// Settles completion `id` when Redis confirmed the longer TTL.
    #[napi]
    pub fn extend(&self, id: u32, additional_ms: f64) -> Result<()> {
        let extra = validate::positive_ms("additionalMs", additional_ms).or_throw()?;
        let (locker, lease) = (self.locker.clone(), self.lease.clone());
        self.completer.run(id, async move {
            match locker.extend(&lease, extra).await {
                Ok(()) => Outcome::Done,
                Err(err) => Outcome::Failed(err),
            }
        });
        Ok(())
    }
}
