//! What an acquisition's caller is given once it ends: each API's own answer, whichever
//! connection won the lock and however many attempts it took.

use super::completions::Outcome;
use super::distributed_lock::{finish, AutoRefresh};
use super::lock_service::ServiceHold;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::ops::lock::Locker;

pub enum Win {
    /// A DistributedLock handle, kept alive by the watchdog with `autoRefresh`.
    Handle(Option<AutoRefresh>),
    /// A DistributedLockService hold: kept alive by the watchdog, answered with its token.
    Service(ServiceHold),
}

impl Win {
    /// `Ok(None)`: not won, and the plan does not make that an error.
    pub fn settle(self, locker: &Locker, result: Result<Option<Lease>, LockError>) -> Outcome {
        match (self, result) {
            (Win::Handle(auto), Ok(Some(lease))) => finish(locker, lease, auto),
            (Win::Service(hold), Ok(Some(lease))) => hold.start(locker, lease),
            (_, Ok(None)) => Outcome::NoHandle,
            (win, Err(err)) => win.settle_without(err),
        }
    }

    pub fn settle_without(self, err: LockError) -> Outcome {
        match (self, err) {
            // maestro answers a wait its own release() ended as a lock not won.
            (Win::Service(_), LockError::Aborted) => Outcome::NoHandle,
            (_, err) => Outcome::Failed(err),
        }
    }
}
