//! A waiter's first attempt sent elsewhere (the caller's own connection) whose outcome is
//! unknown, sent again through the runtime with the same token (acquire.rs `Start::Again`).

use super::attempt::{Attempt, PlainRequest};
use super::lock::Locker;
use super::pause::Pause;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::wait::wake::{Ticket, Trying};
use std::time::{Duration, Instant};

/// What a waiter whose attempt is sent again does first.
enum Resend<'t> {
    /// A release of ours handed it the lock.
    Handed(Lease),
    /// It sends, marked trying; unmarked (`None`) when its caller was answered or gave up,
    /// or the hand-over outlasted a command's time.
    Send(Option<Trying<'t>>),
}

impl Locker {
    /// A first attempt sent elsewhere whose outcome is unknown, sent again with its token
    /// within `timeout` (`Start::Again`), marked trying as every attempt of a waiter's own
    /// (`attempt_with`). While a release of ours is handing the waiter the lock it waits for
    /// that hand-over's end instead (a command's time at most), then sends within what is
    /// left: its first send may have won, and only its token can learn it. A lock handed to it
    /// meanwhile comes back as acquired. Its caller answered already by a release, or gone,
    /// it is sent all the same, unmarked: what it wins is then freed (`won`), and a lock
    /// found held ends the acquisition.
    pub(super) async fn attempt_again(
        &self,
        request: PlainRequest,
        timeout: Duration,
        waiting: Option<&Ticket>,
        cancel: &Cancel,
    ) -> Result<Attempt, LockError> {
        let PlainRequest { key, terms } = request;
        let budget = Instant::now() + timeout;
        let trying = match waiting {
            Some(ticket) => match self.handed_or_trying(ticket, &key, cancel).await {
                Resend::Send(trying) => trying,
                Resend::Handed(lease) => return Ok(Attempt::Acquired(lease)),
            },
            None => None,
        };
        // A budget the wait spent is no reason not to send: only this send can free what
        // the first one won. It is late by one command at most then.
        let left = match budget.saturating_duration_since(Instant::now()) {
            Duration::ZERO => self.command_timeout(),
            left => left,
        };
        let sent = self.attempt_with(&key, terms.token, terms.sent, terms.ttl, left, None);
        let attempt = sent.await?;
        drop(trying);
        if matches!(attempt, Attempt::Held { .. }) {
            // Nobody hears a held lock for a caller answered by its releaser, or gone: the
            // plan's next attempt would be spent for nothing.
            if waiting.is_some_and(|ticket| ticket.view().settled) {
                return Err(LockError::Aborted);
            }
            self.check(cancel)?;
        }
        Ok(attempt)
    }

    /// The lock a release of ours handed the waiter, or else its send, once no such
    /// release is handing it one.
    async fn handed_or_trying<'t>(
        &self,
        ticket: &'t Ticket,
        key: &str,
        cancel: &Cancel,
    ) -> Resend<'t> {
        loop {
            match ticket.trying() {
                Ok(Some(trying)) => return Resend::Send(Some(trying)),
                Err(_) => return Resend::Send(None),
                Ok(None) => {}
            }
            // The hand-over's end wakes it (see `pause_until`), within its commands' bound.
            let due = Instant::now() + self.command_timeout();
            match self.pause_until(ticket, due, key, cancel).await {
                Ok(Pause::Granted(lease)) => return Resend::Handed(lease),
                Ok(Pause::Woken) => {}
                Ok(Pause::Due | Pause::Moving) | Err(_) => return Resend::Send(None),
            }
        }
    }
}
