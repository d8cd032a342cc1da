//! A waiter's first attempt sent elsewhere (the caller's own connection) whose outcome is
//! unknown, sent again through the runtime with the same token (acquire.rs `Start::Again`).

use super::attempt::{Attempt, PlainRequest};
use super::lock::Locker;
use super::pause::Pause;
use crate::core::basics::error::LockError;
use crate::core::wait::wake::Ticket;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

impl Locker {
    /// A first attempt sent elsewhere whose outcome is unknown, sent again with its token
    /// (`Start::Again`), marked trying as every attempt of a waiter's own (`attempt_with`).
    /// While a release of ours is handing the waiter the lock it waits for that hand-over's
    /// end instead, then sends: its first send may have won, and only its token can learn
    /// it. A lock handed to it meanwhile comes back as acquired. Its caller answered already
    /// by a release, it is sent all the same, unmarked: what it wins is then freed (`won`).
    pub(super) async fn attempt_again(
        &self,
        request: PlainRequest,
        timeout: Duration,
        waiting: Option<&Ticket>,
        cancel: &CancellationToken,
    ) -> Result<Attempt, LockError> {
        let PlainRequest { key, terms } = request;
        loop {
            let trying = match waiting.map(|ticket| (ticket, ticket.trying())) {
                None | Some((_, Err(_))) => None,
                Some((_, Ok(Some(trying)))) => Some(trying),
                Some((ticket, Ok(None))) => {
                    let due = Instant::now() + timeout;
                    match self.pause_until(ticket, due, &key, cancel).await {
                        Ok(Pause::Granted(lease)) => return Ok(Attempt::Acquired(lease)),
                        Err(err) if !ticket.view().settled => return Err(err),
                        _ => continue,
                    }
                }
            };
            let sent = self.attempt_with(&key, terms.token, terms.sent, terms.ttl, timeout, None);
            let attempt = sent.await;
            drop(trying);
            return attempt;
        }
    }
}
