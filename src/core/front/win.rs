//! What an acquisition's caller is given once it ends, whichever way its attempts went: each
//! API's own answer, made by its `Win`.

use crate::core::basics::background;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::ops::delivery::{won, Won};
use crate::core::ops::fast::Settled;
use crate::core::ops::lock::Locker;
use crate::core::ops::watchdog::Watchdog;
use std::time::Instant;

/// An API's answer to a won lock (and what it starts with it: a watchdog entry, a record of
/// the hold).
pub trait Win: Sized + Send + 'static {
    type Output: Send + 'static;

    /// Whether a watchdog will keep the lock alive once won.
    fn watched(&self) -> bool;

    /// `lease` is the caller's, its owner still there: what the caller is answered.
    /// Callable on the caller's thread as on the runtime.
    fn deliver(self, locker: &Locker, lease: Lease) -> Self::Output;

    /// The acquisition ended without the lock: `Ok(None)` when that is an answer.
    fn without(self, err: LockError) -> Settled<Option<Self::Output>> {
        Err(err)
    }
}

/// Loads the refresh script before a watched lock is taken, so every refresh is one round
/// trip from the first.
pub async fn prepare(locker: &Locker, watched: bool) -> Result<(), LockError> {
    if watched {
        Watchdog::of(locker.store())
            .prepare(locker.command_timeout())
            .await?;
    }
    Ok(())
}

/// The end of an acquisition: `Ok(None)` is not won, and the plan does not make that an
/// error. A lease won for an owner that has gone is released, not handed out.
pub fn settle<W: Win>(
    win: W,
    locker: &Locker,
    (started, cancel): (Instant, &Cancel),
    result: Settled<Option<Lease>>,
) -> Settled<Option<W::Output>> {
    let answer = answer(win, locker, result);
    let cancelled = cancel.is_cancelled();
    locker.stats().ended(started, &answer, cancelled);
    answer
}

fn answer<W: Win>(
    win: W,
    locker: &Locker,
    result: Settled<Option<Lease>>,
) -> Settled<Option<W::Output>> {
    match result {
        Ok(Some(lease)) => match won(locker, lease) {
            Won::Deliver(lease) => Ok(Some(background::within(|| win.deliver(locker, lease)))),
            Won::Ownerless(lease) => Err(background::within(|| lease.free())),
        },
        Ok(None) => Ok(None),
        Err(err) => win.without(err),
    }
}
