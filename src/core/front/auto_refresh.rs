//! DistributedLock's `autoRefresh`: the watchdog keeps a won lock alive, refreshing it every
//! third of its TTL, and gives it up once the holder's thread has been blocked for three
//! TTLs (nobody could use it then).

use super::granted::Granted;
use super::win::Win;
use crate::core::basics::lease::Lease;
use crate::core::ops::delivery::Unclaimed;
use crate::core::ops::lock::Locker;
use crate::core::ops::signals::{Heartbeat, Sink};
use crate::core::ops::watchdog::{Limits, Watchdog};
use crate::core::wait::owner::Owner;
use std::sync::Arc;
use std::time::Duration;

/// What an `autoRefresh` acquisition starts once won, prepared when it is called.
pub struct AutoRefresh {
    sink: Arc<dyn Sink>,
    listener: u32,
    limits: Limits,
}

impl AutoRefresh {
    /// For a hold of `ttl` whose news goes to `listener` through `sink`.
    pub fn new(
        ttl: Duration,
        heartbeat: &Arc<Heartbeat>,
        sink: &Arc<dyn Sink>,
        listener: u32,
        owner: Owner,
    ) -> Self {
        // A beat now: the heartbeat may be stale from before this hold.
        heartbeat.beat();
        AutoRefresh {
            sink: sink.clone(),
            listener,
            limits: Limits {
                stall: Some((heartbeat.clone(), ttl.saturating_mul(3))),
                hold_until: None,
                owner: Some(owner),
                outlives_owner: None,
            },
        }
    }

    /// Keeps `lease` alive from now on; the watchdog entry's id.
    fn start(self, locker: &Locker, lease: &Lease) -> u64 {
        let target = locker.target(lease, lease.ttl() / 3);
        let watchdog = Watchdog::of(locker.store());
        let sent = lease.sent().at;
        watchdog.watch_id(target, sent, self.limits, self.sink, self.listener)
    }
}

/// A DistributedLock acquisition answers with a handle, kept alive with `autoRefresh`.
pub struct HandleWin(pub Option<AutoRefresh>);

impl Win for HandleWin {
    type Output = Granted;

    fn watched(&self) -> bool {
        self.0.is_some()
    }

    fn deliver(self, locker: &Locker, lease: Lease) -> Granted {
        let Some(auto) = self.0 else {
            // A grant whose confirmation was sent as its caller started (ops/claims.rs): the
            // handle asks, also when the answer came before this (a plain lease would count
            // on the claim after a confirm that found the lock gone).
            if lease.is_claim_only() && locker.store().wakes().lends().is_lent(&lease.token) {
                let until = lease.deadline();
                let granted = Granted::of(&lease, None);
                return Granted {
                    lent_until: Some(until),
                    unclaimed: Some(Unclaimed::lent(locker, lease)),
                    ..granted
                };
            }
            let granted = Granted::of(&lease, None);
            let unclaimed = Some(Unclaimed::new(locker, lease));
            return Granted {
                unclaimed,
                ..granted
            };
        };
        let watch = auto.start(locker, &lease);
        Granted::of(&lease, Some(watch))
    }
}
