//! A DistributedLock handle, as its caller keeps it: a plain value holding its lock's key,
//! token, fence and deadline, passed back with each call (so nothing native exists per
//! handle). Its release and extend, and what the watchdog knows of an `autoRefresh` hold.

use super::distributed_lock::DistributedLock;
use super::granted::Granted;
use super::reply::{ready, ready_quorum, FastLane, Reply};
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::validate;
use crate::core::ops::fast::extend::ExtendCall;
use crate::core::ops::fast::handoff::{FastRelease, Releasing};
use crate::core::ops::fast::quorum::QuorumRelease;
use crate::core::ops::fast::Settled;
use crate::core::ops::holder;
use crate::core::ops::route::{Route, RouteFacts};
use crate::core::ops::watchdog::Watchdog;
use crate::core::wait::lent::Lent;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a handle passes back: its parts, as its caller kept them.
pub struct Parts {
    pub key: String,
    /// Empty for an `autoRefresh` hold whose handle never read it: the watchdog keeps it.
    pub token: String,
    /// Its fencing token, as a number the caller may not have kept exactly.
    pub fence: f64,
    /// Its deadline by our clock, as the handle counted it from its acquisition.
    pub deadline: Instant,
    /// The watchdog entry of an `autoRefresh` hold, as a number (see `watch_id`).
    pub watch: f64,
}

/// A watchdog entry as the caller passes it: 0, or anything not a positive integer, is none.
pub fn watch_id(watch: f64) -> Option<u64> {
    (watch >= 1.0 && watch.fract() == 0.0 && watch < 4.0e15).then_some(watch as u64)
}

/// The new deadline of an extended lock, when Redis expires it (epoch ms), and when the
/// extend that confirmed it was sent (a drop from then on puts it in doubt again).
pub struct Extended {
    pub deadline: Instant,
    pub expires_at_ms: u64,
    pub confirmed: Instant,
}

impl DistributedLock {
    /// The lease a handle describes. A watched lock's deadline is the watchdog's (the
    /// handle's own is its acquisition's, which the refreshes moved on since), and so is its
    /// token when the handle did not keep it.
    fn lease(&self, parts: Parts, fence: u64) -> Result<Lease, LockError> {
        validate::key("key", &parts.key)?;
        let redis_key = self.locker.redis_key(&parts.key);
        // Only a watched lock asks the watchdog (a plain release must not make one).
        let watched = watch_id(parts.watch).map(|id| (id, Watchdog::of(self.locker.store())));
        let confirmed = watched.as_ref().and_then(|(id, w)| w.confirmed(*id));
        let token = match &watched {
            Some((id, w)) if parts.token.is_empty() => w.token(*id).unwrap_or_default(),
            _ => parts.token,
        };
        let deadline = confirmed.map_or(parts.deadline, |confirmed| confirmed.deadline);
        Ok(Lease::resumed(parts.key, redis_key, token, fence, deadline))
    }

    /// A handle's release, checked: `start` stops its refreshes, then deletes the lock if
    /// it is still ours (or hands it to a waiter of ours).
    pub fn release(&self, parts: Parts) -> Result<HandleRelease<'_>, LockError> {
        let watch = watch_id(parts.watch);
        // A fence we cannot read back exactly is none: a handover then draws a new one.
        let fence = watch_id(parts.fence).unwrap_or(0);
        let lease = Arc::new(self.lease(parts, fence)?);
        Ok(HandleRelease {
            lock: self,
            lease,
            watch,
        })
    }

    /// A handle's extend by `additional_ms`, checked (see `HandleExtend`).
    pub fn extend(&self, parts: Parts, additional_ms: f64) -> Result<HandleExtend<'_>, LockError> {
        let extra = validate::positive_ms("additionalMs", additional_ms)?;
        let lease = Arc::new(self.lease(parts, 0)?);
        Ok(HandleExtend {
            lock: self,
            lease,
            extra,
        })
    }

    /// Where a holder that started on a lent lease stands: `None` while Redis has not run
    /// its handover, then once its confirmed deadline, or `Some(None)` when it holds nothing
    /// (also for a token not lent, or already told).
    pub fn lent_state(&self, token: &str) -> Option<Option<Instant>> {
        match self.locker.store().wakes().lends().take(token) {
            Some(Lent::Pending) => None,
            Some(Lent::Confirmed(deadline)) => Some(Some(deadline)),
            Some(Lent::Failed) | None => Some(None),
        }
    }

    /// The owner token of `watch`, while the watchdog keeps it alive.
    pub fn watch_token(&self, watch: f64) -> Option<String> {
        watch_id(watch).and_then(|id| Watchdog::of(self.locker.store()).token(id))
    }

    /// Whether the watchdog still keeps `watch` alive, its TTL has not run out, and its
    /// connection has not dropped since Redis last confirmed it (in doubt).
    pub fn watch_held(&self, watch: f64) -> bool {
        let Some(id) = watch_id(watch) else {
            return false;
        };
        let watchdog = Watchdog::of(self.locker.store());
        watchdog.certain(id)
            && watchdog
                .confirmed(id)
                .is_some_and(|confirmed| Instant::now() < confirmed.deadline)
    }

    /// Whether a plain handle's lock, last confirmed by a request sent at `confirmed`, is in
    /// doubt: its connection dropped since, so nobody can say the lock still exists until a
    /// call (its `extend`) confirms it again or finds it gone. No timer and no table: the
    /// store remembers when it last dropped, and the handle asks when its holder does.
    pub fn in_doubt(&self, confirmed: Instant) -> bool {
        self.locker.store().dropped().since(confirmed)
    }

    /// When Redis expires `watch` after its last confirmed refresh (epoch ms); `None` when it
    /// is no longer watched.
    pub fn watch_expires_at(&self, watch: f64) -> Option<u64> {
        watch_id(watch)
            .and_then(|id| Watchdog::of(self.locker.store()).confirmed(id))
            .map(|confirmed| confirmed.expires_at_ms)
    }
}

/// A checked release of a handle's lock.
pub struct HandleRelease<'a> {
    lock: &'a DistributedLock,
    lease: Arc<Lease>,
    watch: Option<u64>,
}

impl HandleRelease<'_> {
    /// Resolves once Redis answered (or the lock ran out meanwhile).
    pub fn start<R: Reply<()>>(self, reply: R) {
        let locker = &self.lock.locker;
        // Before the release is sent: no refresh goes out after it, and a refresh in flight
        // cannot report our own delete as a loss.
        if let Some(id) = self.watch {
            Watchdog::of(locker.store()).stop(id);
        }
        // A grant whose confirmation waits needs none now: this release checks our token.
        locker
            .store()
            .wakes()
            .lends()
            .forget_grant(&self.lease.token);
        let thread = reply.thread();
        let releasing = Releasing::of(locker, &self.lease, thread);
        let way = Route::way(locker.store(), RouteFacts::Any);
        // A Redlock's plain release: every node's socket at once, done at a quorum.
        if let (Releasing::Plain(_), Some(on)) = (&releasing, ready_quorum(&reply, way)) {
            if let Some(parts) = QuorumRelease::new(locker, &self.lease) {
                return reply.call_quorum(&on, parts, done);
            }
        }
        let reply = match releasing.send_on(|| ready(&reply, way)) {
            FastRelease::Elsewhere => reply,
            FastRelease::Plain(release) => {
                // Asked again: the handover path is the one that must know before it commits.
                match ready(&reply, way) {
                    Some(on) => return reply.call_fast(&on, release, done),
                    None => reply,
                }
            }
            FastRelease::HandOver {
                sender,
                handoff,
                lent,
            } => {
                reply.call_fast(&sender, handoff, done);
                if let Some(to) = lent {
                    let granted = Granted::lent(&to.lease, to.until, to.unclaimed);
                    sender.answer_lent(to.waiter, granted);
                }
                return;
            }
        };
        let (locker, lease) = (locker.clone(), self.lease);
        reply.run(async move { holder::release(&locker, &lease).await.map(|_| ()) });
    }
}

fn done<T>(result: Settled<T>) -> Settled<()> {
    result.map(|_| ())
}

/// A checked extend of a handle's lock.
pub struct HandleExtend<'a> {
    lock: &'a DistributedLock,
    lease: Arc<Lease>,
    extra: Duration,
}

impl HandleExtend<'_> {
    /// Adds the extra time to the lock's remaining TTL if it is still ours (for a watched
    /// lock, until its next refresh sets the TTL back to the hold's own).
    pub fn start<R: Reply<Extended>>(self, reply: R) {
        let HandleExtend { lock, lease, extra } = self;
        let locker = lock.locker.clone();
        // A watched lock's deadline stays the watchdog's: its next refresh sets the TTL back
        // to the hold's own, and a refresh Redis ran without our hearing must not leave us
        // counting on the longer one.
        let extended = |lease: Arc<Lease>| {
            move |result: Settled<()>| {
                result.map(|()| Extended {
                    deadline: lease.deadline(),
                    expires_at_ms: lease.expires_at_ms(),
                    confirmed: lease.confirmed(),
                })
            }
        };
        let facts = RouteFacts::Holder {
            locker: &locker,
            lease: &lease,
        };
        if let Some(on) = ready(&reply, Route::way(locker.store(), facts)) {
            let extend = ExtendCall::new(&locker, &lease, extra);
            return reply.call_fast(&on, extend, extended(lease));
        }
        reply.run(async move {
            let result = holder::extend(&locker, &lease, extra).await;
            extended(lease)(result)
        });
    }
}
