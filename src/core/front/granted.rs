//! What a DistributedLock acquisition answers with: the parts its handle is made of.

use crate::core::basics::clock::Stamp;
use crate::core::basics::lease::Lease;
use crate::core::ops::delivery::Unclaimed;
use std::time::{Duration, Instant};

/// A lock won for a DistributedLock call: what its handle is made of.
pub struct Granted {
    pub token: String,
    pub fence: u64,
    /// When the winning request was sent: validity counts from there.
    pub sent: Stamp,
    pub ttl: Duration,
    /// The watchdog entry that keeps it alive (`autoRefresh`), if any.
    pub watch: Option<u64>,
    /// Started on its predecessor's lease, valid until this by our clock unless Redis
    /// confirms the handover (see ops/fast/handoff.rs).
    pub lent_until: Option<Instant>,
    /// Frees a lock no watchdog keeps should this never reach its caller (see ops/delivery.rs).
    pub unclaimed: Option<Unclaimed>,
}

impl Granted {
    /// What its handle reports as `acquiredAt` (epoch ms): when the winning request was sent,
    /// the moment its expiry counts from, so `expiresAt - acquiredAt` is the TTL granted.
    /// Redis granted it no earlier; a time read as the reply arrives (or as the JS thread
    /// takes it) would shorten that span by the round trip and any wait for the thread.
    pub fn acquired_at_ms(&self) -> u64 {
        self.sent.wall_ms
    }

    pub fn of(lease: &Lease, watch: Option<u64>) -> Granted {
        Granted {
            token: lease.token.clone(),
            fence: lease.fence,
            sent: lease.sent(),
            ttl: lease.ttl(),
            watch,
            lent_until: None,
            unclaimed: None,
        }
    }

    /// A handle answered as its handover was sent, on a lease valid until `until`.
    pub fn lent(lease: &Lease, until: Instant, unclaimed: Unclaimed) -> Granted {
        Granted {
            lent_until: Some(until),
            unclaimed: Some(unclaimed),
            ..Granted::of(lease, None)
        }
    }
}

#[cfg(test)]
#[path = "granted_tests.rs"]
mod tests;
