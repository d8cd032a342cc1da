//! Holders that started on a lease lent to them by a release of their JS thread, before
//! Redis ran the handover (see handoff.lua and ops/fast/handoff.rs), by token: pending
//! until the reply, then confirmed (with the holder's own deadline) or failed. Their handles
//! are plain JS objects: they ask here, and count on the lender's deadline until then. A call
//! of theirs that goes through the runtime waits for the answer first, so it cannot reach
//! Redis before the handover. One table per connection: a release lends to any waiter of its
//! JS thread on that connection, whatever `DistributedLock` instance it came from.
//!
//! A grant from another process (see ops/claims.rs) is kept here too while its confirmation
//! waits: the grant already ran in Redis, so its holder's calls need not wait for it. Its
//! release makes the confirmation needless (`forget_grant`); its extend has it sent at once
//! (`hurry`) and goes after it.

use crate::core::basics::sync::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// What a lent holder's handle learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lent {
    Pending,
    /// Redis ran the handover: the holder's own deadline.
    Confirmed(Instant),
    /// It holds nothing (the handover did not run, or not within its bound).
    Failed,
}

struct LentEntry {
    state: Lent,
    /// After this nobody can still be counting on the entry.
    until: Instant,
    /// A grant whose confirmation is deferred (`lend_grant`): `Some(hurried)`.
    grant: Option<bool>,
}

#[derive(Default)]
pub struct Lends {
    entries: Mutex<HashMap<String, LentEntry>>,
    /// Woken whenever an entry stops being pending (the few who wait recheck their own).
    answered: Notify,
    /// Woken whenever a deferred confirmation is wanted at once (see `hurry`), or may have
    /// become needless (see `recheck_grants`).
    hurried: Notify,
}

/// Entries whose handles never asked are dropped once past their time, checked when the
/// table has grown by this much since the last sweep.
const SWEEP_EVERY: usize = 256;

impl Lends {
    /// `token` starts now on a lent lease; its handle holds at most until `until`.
    pub fn lend(&self, token: String, until: Instant) {
        self.insert(token, until, None);
    }

    /// `token` starts now on a grant whose confirmation is deferred; its handle holds at most
    /// until `until`.
    pub fn lend_grant(&self, token: String, until: Instant) {
        self.insert(token, until, Some(false));
    }

    fn insert(&self, token: String, until: Instant, grant: Option<bool>) {
        let mut entries = lock(&self.entries);
        if entries.len() % SWEEP_EVERY == SWEEP_EVERY - 1 {
            let now = Instant::now();
            entries.retain(|_, entry| entry.until > now);
        }
        let state = Lent::Pending;
        entries.insert(
            token,
            LentEntry {
                state,
                until,
                grant,
            },
        );
    }

    /// A deferred grant's confirmation is wanted now (its holder extends it): `true` when one
    /// still waits to be sent or answered, and the caller then waits for it (`settled`).
    pub fn hurry(&self, token: &str) -> bool {
        let mut entries = lock(&self.entries);
        match entries.get_mut(token) {
            Some(entry) if entry.state == Lent::Pending && entry.grant.is_some() => {
                entry.grant = Some(true);
                self.hurried.notify_waiters();
                true
            }
            _ => false,
        }
    }

    /// Has every deferred confirmation look at its entry again now: one released meanwhile
    /// ends then, on the thread that calls this, rather than wake that thread at its timer.
    pub fn recheck_grants(&self) {
        self.hurried.notify_waiters();
    }

    /// Whether `token`'s deferred confirmation is still to be sent: `Some(hurried)`, `None`
    /// once it is needless (released, forgotten, answered).
    pub fn confirm_wanted(&self, token: &str) -> Option<bool> {
        let entries = lock(&self.entries);
        let entry = entries.get(token)?;
        (entry.state == Lent::Pending).then_some(entry.grant?)
    }

    /// Waits until some deferred confirmation is hurried (the waiter rechecks its own);
    /// the future is made before the check, so a hurry between the two still wakes it.
    pub fn hurried(&self) -> tokio::sync::futures::Notified<'_> {
        self.hurried.notified()
    }

    /// Its holder released a grant whose confirmation waits: none is sent, and nobody asks
    /// again. A lease lent in this process is left as it is (its release goes after it).
    pub fn forget_grant(&self, token: &str) {
        let mut entries = lock(&self.entries);
        if entries
            .get(token)
            .is_some_and(|entry| entry.grant.is_some())
        {
            entries.remove(token);
        }
    }

    /// The handover's answer for `token`.
    pub fn settle(&self, token: &str, state: Lent) {
        if let Some(entry) = lock(&self.entries).get_mut(token) {
            if entry.state == Lent::Pending {
                entry.state = state;
                self.answered.notify_waiters();
            }
        }
    }

    /// Where `token` stands; `None` for a token never lent (or already told). A final
    /// answer is given once: the handle keeps it.
    pub fn take(&self, token: &str) -> Option<Lent> {
        let mut entries = lock(&self.entries);
        let state = entries.get(token)?.state;
        if state != Lent::Pending {
            entries.remove(token);
        }
        Some(state)
    }

    /// Whether `token` was lent and Redis has not confirmed it (yet).
    pub fn unconfirmed(&self, token: &str) -> bool {
        matches!(self.peek(token), Some(Lent::Pending | Lent::Failed))
    }

    /// Whether `token` was lent and its handle has not been told yet, answered or not.
    pub fn is_lent(&self, token: &str) -> bool {
        self.peek(token).is_some()
    }

    pub fn pending(&self, token: &str) -> bool {
        self.peek(token) == Some(Lent::Pending)
    }

    fn peek(&self, token: &str) -> Option<Lent> {
        lock(&self.entries).get(token).map(|entry| entry.state)
    }

    /// Waits, at most `bound`, while `token`'s handover is pending.
    pub async fn settled(&self, token: &str, bound: Duration) {
        let until = tokio::time::Instant::now() + bound;
        loop {
            // Made before the look, so an answer between the two still wakes it.
            let answered = self.answered.notified();
            if !self.pending(token) {
                return;
            }
            if tokio::time::timeout_at(until, answered).await.is_err() {
                return;
            }
        }
    }

    /// Its handle released it: nobody asks again.
    pub fn forget(&self, token: &str) {
        lock(&self.entries).remove(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_lend_is_pending_until_settled_and_told_once() {
        let lends = Lends::default();
        let until = Instant::now() + Duration::from_secs(60);
        assert_eq!(lends.take("a"), None);
        lends.lend("a".into(), until);
        assert_eq!(lends.take("a"), Some(Lent::Pending));
        assert!(lends.unconfirmed("a"));
        lends.settle("a", Lent::Confirmed(until));
        assert!(!lends.unconfirmed("a"));
        // A late second answer changes nothing.
        lends.settle("a", Lent::Failed);
        assert_eq!(lends.take("a"), Some(Lent::Confirmed(until)));
        assert_eq!(lends.take("a"), None);
    }

    #[test]
    fn a_grant_awaiting_its_confirmation_holds_no_call_back_until_hurried() {
        let lends = Lends::default();
        let until = Instant::now() + Duration::from_secs(60);
        lends.lend_grant("g".into(), until);
        lends.lend("h".into(), until);
        assert_eq!(lends.confirm_wanted("g"), Some(false));
        // A lease lent in this process is no grant: nothing to confirm, never forgotten here.
        assert_eq!(lends.confirm_wanted("h"), None);
        lends.forget_grant("h");
        assert!(lends.pending("h"));
        // Its handle still counts on the claim until told.
        assert_eq!(lends.take("g"), Some(Lent::Pending));
        assert!(lends.unconfirmed("g"));
        assert!(lends.hurry("g"));
        assert_eq!(lends.confirm_wanted("g"), Some(true));
        lends.settle("g", Lent::Confirmed(until));
        assert_eq!(lends.confirm_wanted("g"), None);
        assert!(!lends.hurry("g"));
        assert_eq!(lends.take("g"), Some(Lent::Confirmed(until)));
    }

    #[test]
    fn a_released_grant_is_confirmed_by_nobody() {
        let lends = Lends::default();
        let until = Instant::now() + Duration::from_secs(60);
        lends.lend_grant("g".into(), until);
        lends.forget_grant("g");
        assert_eq!(lends.confirm_wanted("g"), None);
        assert!(!lends.is_lent("g"));
        // A confirmation that was already on its way finds nothing to answer.
        lends.settle("g", Lent::Failed);
        assert_eq!(lends.take("g"), None);
    }

    #[tokio::test]
    async fn a_hurry_wakes_the_confirmation_that_waits() {
        let lends = Arc::new(Lends::default());
        lends.lend_grant("g".into(), Instant::now() + Duration::from_secs(60));
        let hurried = lends.hurried();
        assert!(lends.hurry("g"));
        let woke = tokio::time::timeout(Duration::from_secs(2), hurried).await;
        assert!(woke.is_ok());
    }

    #[tokio::test]
    async fn a_recheck_wakes_the_confirmations_that_wait_and_a_released_one_finds_itself_needless()
    {
        let lends = Arc::new(Lends::default());
        let until = Instant::now() + Duration::from_secs(60);
        lends.lend_grant("released".into(), until);
        lends.lend_grant("held".into(), until);
        let waiting = lends.hurried();
        lends.forget_grant("released");
        lends.recheck_grants();
        let woke = tokio::time::timeout(Duration::from_secs(2), waiting).await;
        assert!(woke.is_ok());
        assert_eq!(lends.confirm_wanted("released"), None);
        // Still held: its confirmation waits on, not hurried.
        assert_eq!(lends.confirm_wanted("held"), Some(false));
    }

    #[tokio::test]
    async fn a_wait_ends_when_settled_or_at_its_bound() {
        let lends = Arc::new(Lends::default());
        let until = Instant::now() + Duration::from_secs(60);
        lends.lend("a".into(), until);
        let started = Instant::now();
        lends.settled("a", Duration::from_millis(50)).await;
        assert!(started.elapsed() >= Duration::from_millis(50));
        let other = lends.clone();
        let waiting = tokio::spawn(async move {
            other.settled("a", Duration::from_secs(10)).await;
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        lends.settle("a", Lent::Failed);
        let done = tokio::time::timeout(Duration::from_secs(2), waiting).await;
        assert!(matches!(done, Ok(Ok(()))));
    }
}
