//! Tenure, on a store that grants across processes (`crossProcessGrants`): a process that got
//! a lock keeps it for a short window. Its releases within the window free the lock without
//! granting it to the ring ("quietly"), so its next attempt takes it straight back, one round
//! trip on the caller's own socket (barging); the first release after the window grants it to
//! the next connection of the ring, as every release did before. A hand-over across processes
//! on every section puts a release, a push, another process's runtime and thread hop on each
//! section's critical path; a window keeps most sections at barging speed while the lock still
//! changes owner at least once per window.
//!
//! A lock freed quietly that this process does not take back within `KICK_AFTER` is granted
//! to the ring's head by a kick (release_grant.lua, "only if free"): a waiter of another
//! process never sleeps until its poll for a lock nobody holds. Plain state: the store runs
//! the kick (ops/tenure.rs).

use std::time::{Duration, Instant};

/// How long a process keeps a lock it got before a release grants it on (W). A section of
/// the bench's (c4) (GET and SET inside) takes 0.25-0.35 ms at barging speed, a hand-over
/// across processes about as long again: 1 ms keeps roughly 3 of 4 sections off a hand-over
/// while the lock still changes owner some 700 times a second, more than 10x a barging peer.
/// A waiter in a ring of n connections waits about n x (TENURE + a hand-over) at most.
pub const TENURE: Duration = Duration::from_millis(1);

/// How long a lock freed quietly waits for this process to take it back before it is kicked
/// to the ring (K). A process that loops on a lock is back within a fraction of a millisecond;
/// one that is done with it costs the next waiter this much more than a grant would. The
/// runtime's timers tick in milliseconds: the kick runs 1-2 ms after the release.
pub const KICK_AFTER: Duration = Duration::from_millis(1);

/// A connection's tenure and kick delay: `TENURE` and `KICK_AFTER` unless a test sets others
/// (to make a release's timing certain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TenureTerms {
    pub window: Duration,
    pub kick_after: Duration,
}

impl Default for TenureTerms {
    fn default() -> Self {
        TenureTerms {
            window: TENURE,
            kick_after: KICK_AFTER,
        }
    }
}

/// One lock's tenure in this process.
#[derive(Debug, Default)]
pub struct Tenure {
    /// When this process got the lock, while its tenure lasts: taking it back after a quiet
    /// release goes on with the same tenure.
    since: Option<Instant>,
    /// A quiet release of ours freed the lock then, and no acquisition of ours followed yet.
    freed: Option<Instant>,
    /// A task of the store waits to kick the lock (see `kick_step`).
    kicker: bool,
    /// The fence counter's retention window of the lock's last quiet release, in ms, for its
    /// kick (see fence.lua).
    fence_retention_ms: u64,
}

/// What the task that kicks a lock does next.
#[derive(Debug, PartialEq, Eq)]
pub enum KickStep {
    /// Look again then.
    Wait(Instant),
    /// Grant the lock to the ring's head if it is free, now.
    Kick,
    /// Nothing to kick: the task ends.
    Done,
}

impl Tenure {
    /// This process acquired the lock at `now`: a tenure goes on where its quiet release
    /// freed the lock, else one starts.
    pub fn acquired(&mut self, now: Instant) {
        if self.freed.take().is_none() || self.since.is_none() {
            self.since = Some(now);
        }
    }

    /// Whether our release at `now` frees the lock quietly (within the tenure). One that
    /// does not grants the lock on, which ends the tenure.
    pub fn release_quietly(&mut self, now: Instant, terms: TenureTerms) -> bool {
        match self.since {
            Some(since) if now < since + terms.window => true,
            _ => {
                self.end();
                false
            }
        }
    }

    /// A quiet release freed the lock at `now` (or may have: its answer never came), its
    /// fence counter kept `fence_retention_ms`. `true` when no task waits to kick it yet: the
    /// caller starts one.
    pub fn freed(&mut self, now: Instant, fence_retention_ms: u64) -> bool {
        self.freed = Some(now);
        self.fence_retention_ms = fence_retention_ms;
        !std::mem::replace(&mut self.kicker, true)
    }

    /// Whether a lock freed quietly waits to be taken back or kicked.
    pub fn kick_pending(&self) -> bool {
        self.freed.is_some()
    }

    /// What the kicking task does at `now`. While we hold the lock again within our tenure,
    /// it waits for the tenure's end (the release after that grants, and needs no kick).
    pub fn kick_step(&mut self, now: Instant, terms: TenureTerms) -> KickStep {
        let TenureTerms { window, kick_after } = terms;
        let step = match (self.freed, self.since) {
            (Some(at), _) if now >= at + kick_after => {
                self.end();
                KickStep::Kick
            }
            (Some(at), _) => KickStep::Wait(at + kick_after),
            // A quiet release may come at any moment of the tenure: looked at again no later
            // than `kick_after` from now, it is kicked in time.
            (None, Some(since)) if now < since + window => {
                KickStep::Wait((since + window).min(now + kick_after))
            }
            (None, _) => KickStep::Done,
        };
        self.kicker = matches!(step, KickStep::Wait(_));
        step
    }

    /// The tenure began with a grant, read on the runtime's thread: the kicker starts there
    /// and then, rather than at the first quiet release, which would wake that thread from
    /// the caller's. `true` when no task waits to kick it yet: the caller starts one.
    pub fn arm(&mut self) -> bool {
        self.since.is_some() && !std::mem::replace(&mut self.kicker, true)
    }

    /// The fence counter's retention window for the lock's kick.
    pub fn fence_retention_ms(&self) -> u64 {
        self.fence_retention_ms
    }

    /// A kick is sent for the lock at once (the connection closes): nothing is left to kick.
    /// `true` when there was one to send.
    pub fn take_kick(&mut self) -> bool {
        let pending = self.freed.is_some();
        if pending {
            self.end();
        }
        pending
    }

    fn end(&mut self) {
        self.since = None;
        self.freed = None;
    }
}

#[cfg(test)]
#[path = "tenure_tests.rs"]
mod tests;
