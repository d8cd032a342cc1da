//! An acquisition, from its first attempt to its end: one state machine for every API's
//! acquire. A `Plan` says what happens once an attempt finds the lock held (`tryAcquire`
//! stops; `acquire` retries with backoff; `waitForLock` polls until a deadline; maestro backs
//! off until a deadline), and a `Start` where the machine picks up (with its own attempt,
//! or after a first attempt carried elsewhere). Between attempts a waiter sleeps until its
//! next attempt is due, woken early by releases; a release of this process may hand it the
//! lock instead (pause.rs).

use super::attempt::{Attempt, PlainRequest};
use super::key_scheme::KeyScheme;
use super::lock::{Locker, GRACE};
use super::pause::Pause;
use crate::core::basics::backoff;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::pace::{GaveUp, Pace};
use crate::core::wait::releases::Mark;
use crate::core::wait::wake::{Caller, Ticket};
use std::time::{Duration, Instant};

/// What an acquisition does once an attempt found the lock held: when its next attempts
/// are due, and where its waiter stands in its connection's wake table meanwhile.
pub struct Plan {
    pub attempts: Attempts,
    pub place: Place,
}

/// When an acquisition's attempts are due, and how it ends when they run out.
pub enum Attempts {
    /// That was the one attempt (`tryAcquire`, ExclusiveLock).
    Once,
    /// Up to `max` more after `base`, doubling (`acquire`).
    Retries { max: u32, base: Duration },
    /// Until `deadline`, polling every `poll` (`waitForLock`).
    Until { deadline: Instant, poll: Duration },
    /// Until `deadline` with maestro's capped backoff; not won by then is no error
    /// (DistributedLockService).
    Backoff {
        deadline: Instant,
        base: Duration,
        cap: Duration,
    },
    /// syncguard's `lock()`: scheduled attempts by `pace`, counted from `started`; an
    /// attempt a release woke is extra (it never counts, nor moves the schedule).
    Paced { pace: Pace, started: Instant },
}

/// Where a waiter stands in its connection's wake table before its first attempt.
pub enum Place {
    /// Joined: waiters of ours were there first (it queues behind them), or the lock is fair.
    Joined(Ticket),
    /// Joins once an attempt finds the lock held, which on a free lock never happens; a
    /// release of ours that looked for waiters before it joined is caught by `mark` (see
    /// wait/releases.rs), when one was read. A release on `caller`'s thread may answer it
    /// directly.
    Later {
        caller: Option<Caller>,
        mark: Option<Mark>,
    },
}

impl Plan {
    /// `tryAcquire`: one attempt, never a waiter.
    pub fn once() -> Plan {
        Plan {
            attempts: Attempts::Once,
            place: Place::Later {
                caller: None,
                mark: None,
            },
        }
    }

    /// `acquire`: up to `max` retries after `base`, doubling. It joins the wake table once
    /// its first attempt failed; `mark`, read before that attempt when there are retries,
    /// catches a release that missed it. Only a first attempt made on `caller`'s thread
    /// leaves a caller to answer there.
    pub fn retries(max: u32, base: Duration, caller: Option<Caller>, mark: Option<Mark>) -> Plan {
        Plan {
            attempts: Attempts::Retries { max, base },
            place: Place::Later { caller, mark },
        }
    }

    /// `waitForLock`: until `deadline`, polling every `poll`, from `place`.
    pub fn until(place: Place, deadline: Instant, poll: Duration) -> Plan {
        let attempts = Attempts::Until { deadline, poll };
        Plan { attempts, place }
    }

    /// maestro: until `deadline` with a backoff from `base` capped at `cap`, from `place`.
    pub fn backoff(place: Place, deadline: Instant, base: Duration, cap: Duration) -> Plan {
        let attempts = Attempts::Backoff {
            deadline,
            base,
            cap,
        };
        Plan { attempts, place }
    }

    /// The ticket of a waiter that joined before its first attempt.
    pub fn ticket(&self) -> Option<&Ticket> {
        match &self.place {
            Place::Joined(ticket) => Some(ticket),
            Place::Later { .. } => None,
        }
    }

    /// The plan of a waiter whose first attempt found the lock held, joined now if it had
    /// not and it waits (`acquire`'s retries join as they pause): a release of its thread
    /// made from here on can hand it the lock. `true` beside it when a release of ours may
    /// have missed it before it joined: that attempt is stale, and the next one is due at
    /// once.
    pub fn joined(self, locker: &Locker, key: &str, ttl: Duration) -> (Plan, bool) {
        let Plan { attempts, place } = self;
        if !matches!(attempts, Attempts::Until { .. } | Attempts::Backoff { .. }) {
            return (Plan { attempts, place }, false);
        }
        let (ticket, missed) = locker.ticket(place, &locker.redis_key(key), ttl);
        let place = Place::Joined(ticket);
        (Plan { attempts, place }, missed)
    }
}

/// What a winner stops waiting with: its ticket, the plan holding it, or nothing.
pub(super) trait StopsWaiting {
    /// Leaves the wake table; `false` when the caller was answered already by a release
    /// that handed it the lock (see `Ticket::leave`).
    fn leave(self) -> bool;
}

impl StopsWaiting for () {
    fn leave(self) -> bool {
        true
    }
}

impl StopsWaiting for Option<Ticket> {
    fn leave(self) -> bool {
        self.is_none_or(Ticket::leave)
    }
}

impl StopsWaiting for Plan {
    fn leave(self) -> bool {
        match self.place {
            Place::Joined(ticket) => ticket.leave(),
            Place::Later { .. } => true,
        }
    }
}

/// `bound`, cut to what is left until `deadline` and a little grace.
fn within(deadline: Instant, bound: Duration) -> Duration {
    bound.min(deadline.saturating_duration_since(Instant::now()) + GRACE)
}

/// Where an acquisition picks up.
pub enum Start {
    /// With an attempt of its own.
    Attempt,
    /// After a first attempt sent elsewhere (the caller's own connection) found the lock
    /// held; with the holder's remaining TTL when the reply told it.
    Held { holder_ttl: Option<Duration> },
    /// After a first attempt sent elsewhere whose outcome is unknown (its connection broke,
    /// or the server refused it there): the same token again, within `timeout`.
    Again {
        request: PlainRequest,
        timeout: Duration,
    },
}

impl Start {
    /// Where a plan that goes on picks up after its first attempt, sent elsewhere, found the
    /// lock held: with an attempt at once when a release of ours may have missed its waiter
    /// before it joined (`Plan::joined`), otherwise with the pause that follows that attempt.
    pub fn after_held(missed: bool, holder_ttl: Option<Duration>) -> Start {
        match missed {
            true => Start::Attempt,
            false => Start::Held { holder_ttl },
        }
    }
}

impl Attempts {
    /// When the next attempt is due after `failed` attempts found the lock held (`holder_ttl`
    /// left, when known); `Err` when the plan has run out, with syncguard's ending for its.
    /// `in_ring`: the waiter's connection is in the lock's ring (see `backoff::ring_poll`).
    fn next(
        &self,
        failed: u32,
        holder_ttl: Option<Duration>,
        in_ring: bool,
    ) -> Result<Instant, Option<GaveUp>> {
        let now = Instant::now();
        if let Attempts::Paced { pace, started } = self {
            let elapsed = elapsed_ms(*started);
            let unit = backoff::unit_random();
            let delay = pace.after_failure(u64::from(failed), elapsed, unit)?;
            return Ok(now + delay);
        }
        self.next_ours(now, failed, holder_ttl, in_ring).ok_or(None)
    }

    /// Syncguard's rule before scheduled attempt `attempt` (from 1): the time may be up.
    fn before(&self, attempt: u32) -> Result<(), LockError> {
        if let Attempts::Paced { pace, started } = self {
            let elapsed = elapsed_ms(*started);
            pace.before(u64::from(attempt), elapsed)
                .map_err(LockError::GaveUp)?;
        }
        Ok(())
    }

    fn next_ours(
        &self,
        now: Instant,
        failed: u32,
        holder_ttl: Option<Duration>,
        in_ring: bool,
    ) -> Option<Instant> {
        match *self {
            Attempts::Once | Attempts::Paced { .. } => None,
            Attempts::Retries { max, base } => {
                let retried = failed.saturating_sub(1);
                (retried < max).then(|| now + backoff::retry_delay(base, retried))
            }
            Attempts::Until { deadline, poll } => {
                let left = deadline.saturating_duration_since(now);
                let poll = match in_ring {
                    true => backoff::ring_poll(poll, failed),
                    false => poll,
                };
                (!left.is_zero()).then(|| now + backoff::poll_delay(poll, holder_ttl, left))
            }
            Attempts::Backoff {
                deadline,
                base,
                cap,
            } => {
                let left = deadline.saturating_duration_since(now);
                let delay = backoff::maestro_delay(base, cap, failed, backoff::unit_random());
                (!left.is_zero()).then(|| now + delay.min(left))
            }
        }
    }

    /// How a plan ends once its first attempt, sent elsewhere, found the lock held, when it
    /// ends there: `tryAcquire`'s answer and that of `acquire` without retries, the ones
    /// `pursue` would give, answered where the reply was read. `None`: it goes on.
    pub fn ended_by_held(&self, key: &str) -> Option<Result<Option<Lease>, LockError>> {
        match self {
            Attempts::Once => Some(Ok(None)),
            Attempts::Retries { max: 0, .. } => Some(Err(LockError::Locked {
                key: key.to_owned(),
                retries: 0,
            })),
            _ => None,
        }
    }

    /// How an acquisition that ran out without the lock ends.
    fn run_out(
        &self,
        key: &str,
        failed: u32,
        gave_up: Option<GaveUp>,
    ) -> Result<Option<Lease>, LockError> {
        if let Some(gave_up) = gave_up {
            return Err(LockError::GaveUp(gave_up));
        }
        match self {
            // Paced always says how it gave up.
            Attempts::Paced { .. } => Ok(None),
            Attempts::Once | Attempts::Backoff { .. } => Ok(None),
            // The first attempt is not a retry.
            Attempts::Retries { .. } | Attempts::Until { .. } => Err(LockError::Locked {
                key: key.to_owned(),
                retries: failed.saturating_sub(1),
            }),
        }
    }

    /// The bound of an attempt made for these attempts: `waitForLock`'s never outlives its
    /// wait by more than a little grace; the others get the command timeout (maestro's
    /// `acquire(ttl, 0)` still makes its one attempt in full).
    pub fn bound(&self, command_timeout: Duration) -> Duration {
        match *self {
            Attempts::Until { deadline, .. } => within(deadline, command_timeout),
            _ => command_timeout,
        }
    }

    /// How long an attempt may wait at the restart quarantine's gate: its `bound`, and for
    /// maestro's no longer than its `maxWaitTime` either (its attempt proper still gets the
    /// command timeout, but a gate closed past the wait is a wait that failed).
    pub fn gate_bound(&self, command_timeout: Duration) -> Duration {
        match *self {
            Attempts::Backoff { deadline, .. } => within(deadline, command_timeout),
            _ => self.bound(command_timeout),
        }
    }

    /// Whether an attempt a release woke counts as the next one, the schedule going on from
    /// it (`waitForLock`'s polls). Otherwise it is extra: a failed one leaves the count and
    /// the schedule as they were, so the caller's backoff stays the original package's.
    fn woken_attempt_counts(&self) -> bool {
        matches!(self, Attempts::Until { .. })
    }
}

/// Milliseconds since `started`, as syncguard's `Date.now() - startTime` reads them.
fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What comes after a pause.
enum Next {
    Attempt,
    Pause,
    Won(Lease),
}

impl Locker {
    /// The whole acquisition of `key` for `ttl` by `plan`, from `start`. `Ok(None)`: not
    /// won, and the plan does not make that an error. `cancel` ends it with
    /// `LockError::Aborted`; a lock won meanwhile is released.
    pub async fn pursue(
        &self,
        plan: Plan,
        key: &str,
        ttl: Duration,
        cancel: &Cancel,
        start: Start,
    ) -> Result<Option<Lease>, LockError> {
        (self.pursue_in(plan, KeyScheme::Ours(key), ttl, cancel, start)).await
    }

    /// `pursue`, at the keys `scheme` names.
    pub async fn pursue_in(
        &self,
        plan: Plan,
        scheme: KeyScheme<'_>,
        ttl: Duration,
        cancel: &Cancel,
        start: Start,
    ) -> Result<Option<Lease>, LockError> {
        let lock_key = self.scheme_key(&scheme);
        let Plan { attempts, place } = plan;
        let (mut ticket, mark, caller) = match place {
            Place::Joined(ticket) => (Some(ticket), None, None),
            // Only a first attempt made on the caller's thread leaves a caller to answer.
            Place::Later { caller, mark } if matches!(attempts, Attempts::Retries { .. }) => {
                let caller = caller.filter(|_| !matches!(start, Start::Attempt));
                (None, mark, caller)
            }
            Place::Later { caller, mark } => (None, mark, caller),
        };
        // Answered by a release that handed it the lock before this ran.
        if ticket.as_ref().is_some_and(|ticket| ticket.view().settled) {
            return Err(LockError::Aborted);
        }
        let mut failed = 0;
        let mut holder_ttl = None;
        let mut next = Next::Attempt;
        let held_before = match start {
            Start::Attempt => {
                self.check(cancel)?;
                // A fair lock's first attempt of a retrying acquisition takes its place in line.
                if self.is_fair() && matches!(attempts, Attempts::Retries { max: 1.., .. }) {
                    ticket = Some(self.join_at(&lock_key, ttl, caller));
                }
                if let Some(pause) = self
                    .first_pause(&attempts, ticket.as_ref(), scheme.name(), cancel)
                    .await?
                {
                    next = pause;
                }
                None
            }
            Start::Held { holder_ttl } => Some(holder_ttl),
            Start::Again { request, timeout } => {
                self.check(cancel)?;
                match (self.attempt_again(request, timeout, ticket.as_ref(), cancel)).await? {
                    Attempt::Acquired(lease) => {
                        return self.won(lease, cancel, ticket, scheme).await
                    }
                    Attempt::Held { ttl } => {
                        self.stats().contended(scheme.name());
                        Some(ttl)
                    }
                }
            }
        };
        if let Some(told) = held_before {
            failed = 1;
            next = Next::Pause;
            holder_ttl = match (told, &attempts) {
                // A transaction does not tell the TTL (asking would cost every attempt on a
                // free key a command): a wait whose first pause ends with it asks now.
                (None, Attempts::Until { deadline, .. }) => {
                    self.holder_ttl(&lock_key, *deadline).await
                }
                (told, _) => told,
            };
        }
        loop {
            if let Next::Won(lease) = next {
                return self.won(lease, cancel, ticket, scheme).await;
            }
            self.check(cancel)?;
            match next {
                Next::Won(_) | Next::Pause => {}
                Next::Attempt => {
                    attempts.before(failed + 1)?;
                    let bound = attempts.bound(self.command_timeout());
                    let gate_bound = attempts.gate_bound(self.command_timeout());
                    self.pass_gate(scheme, gate_bound, cancel).await?;
                    match self
                        .attempt_bounded(scheme, ttl, bound, ticket.as_ref())
                        .await?
                    {
                        Attempt::Acquired(lease) => {
                            return self.won(lease, cancel, ticket, scheme).await
                        }
                        Attempt::Held { ttl } => {
                            self.stats().contended(scheme.name());
                            holder_ttl = ttl;
                        }
                    }
                    failed += 1;
                }
            }
            let in_ring = ticket.as_ref().is_some_and(|ticket| ticket.view().in_ring);
            let due = match attempts.next(failed, holder_ttl.take(), in_ring) {
                Ok(due) => due,
                Err(gave_up) => {
                    // A lock handed over in the last instant is still ours to take.
                    if let Some(lease) = ticket.as_ref().and_then(Ticket::take_grant) {
                        if let Some(lease) = self.confirm_grant(lease, scheme.name()).await {
                            return self.won(lease, cancel, ticket, scheme).await;
                        }
                    }
                    return attempts.run_out(scheme.name(), failed, gave_up);
                }
            };
            let ticket =
                ticket.get_or_insert_with(|| self.join_after(mark, &lock_key, ttl, caller));
            next = if attempts.woken_attempt_counts() {
                // A release cuts the poll short; the next attempt is the loop's own.
                let pause = self.pause_until(ticket, due, scheme.name(), cancel).await?;
                self.after_pause(&attempts, ticket, pause)
            } else {
                match self
                    .attempts_on_release(scheme, ttl, ticket, due, cancel)
                    .await?
                {
                    Some(lease) => Next::Won(lease),
                    None => Next::Attempt,
                }
            };
        }
    }

    /// A waiter whose turn comes from waiters of this process (its task can start late,
    /// first in line by then while the lock moves between them) waits to be handed the
    /// lock, or woken in turn, or for its first poll, before its first attempt.
    async fn first_pause(
        &self,
        attempts: &Attempts,
        ticket: Option<&Ticket>,
        name: &str,
        cancel: &Cancel,
    ) -> Result<Option<Next>, LockError> {
        let (deadline, first) = match *attempts {
            Attempts::Until { deadline, poll } => (deadline, poll),
            Attempts::Backoff {
                deadline,
                base,
                cap,
            } => (
                deadline,
                backoff::maestro_delay(base, cap, 0, backoff::unit_random()),
            ),
            Attempts::Once | Attempts::Retries { .. } | Attempts::Paced { .. } => return Ok(None),
        };
        let Some(ticket) = ticket.filter(|ticket| ticket.view().turn_from_others) else {
            return Ok(None);
        };
        // In the lock's ring its turn comes by grant, after the tenures of the connections
        // before it: its poll is only a safety net, as long as a ring's polls ever get. A
        // first poll at `retryDelayMs` would be a round trip, and a wake of the runtime's
        // thread, on every wait longer than it: most waits of (c16).
        let first = match attempts {
            Attempts::Until { .. } if ticket.view().in_ring => backoff::ring_poll(first, u32::MAX),
            _ => first,
        };
        let due = deadline.min(Instant::now() + first);
        let pause = self.pause_until(ticket, due, name, cancel).await?;
        Ok(Some(self.after_pause(attempts, ticket, pause)))
    }

    /// Whether a pause leads to an attempt. Not when only the poll timer ended the pause of
    /// a waiter behind others of this process (their turns come first, handed over or
    /// woken, and the attempt would find the lock held: only the first in line polls), nor
    /// while the lock moves between them.
    fn after_pause(&self, attempts: &Attempts, ticket: &Ticket, pause: Pause) -> Next {
        match pause {
            Pause::Granted(lease) => Next::Won(lease),
            _ if !attempts.woken_attempt_counts() => Next::Attempt,
            Pause::Woken => Next::Attempt,
            Pause::Due if ticket.is_fair() || !ticket.view().behind_others => Next::Attempt,
            Pause::Due | Pause::Moving => Next::Pause,
        }
    }

    /// A won lock is the caller's, unless the caller gave up meanwhile (or its owner went
    /// away), or was answered already by a release of its thread that handed it the lock
    /// while this attempt was on its way (its handle may even have released that lock, which
    /// let this attempt win): it is then released at once, not handed out, and the caller
    /// answered `Aborted` once it is (nobody hears it in the second case), so a caller who
    /// cancelled finds nothing held, and no lock is won for a caller that has one. `leaving`
    /// (the waiter's ticket, or the plan holding it) goes first: our release would otherwise
    /// hand the lock to this very waiter, leaving it held until the orphan it became was
    /// freed. The one place of this rule: the JS thread's first attempts (fast/acquire.rs
    /// `won`, fast/syncguard.rs `won`) and a Redlock's attempt there (fast/quorum_calls.rs)
    /// end here too.
    pub(super) async fn won<T: StopsWaiting>(
        &self,
        lease: Lease,
        cancel: &Cancel,
        leaving: T,
        scheme: KeyScheme<'_>,
    ) -> Result<Option<Lease>, LockError> {
        let answered = !leaving.leave();
        if answered || self.is_cancelled(cancel) {
            let _ignored = match scheme {
                KeyScheme::Ours(_) => self.release(&lease).await,
                KeyScheme::Syncguard(keys) => self.sg_release_won(keys, &lease).await.map(|_| true),
            };
            return Err(LockError::Aborted);
        }
        Ok(Some(lease))
    }

    /// `acquire`: one attempt plus up to `max_retries` more after `base`, `2 x base`, ... of
    /// sleep.
    pub async fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        max_retries: u32,
        base_delay: Duration,
        cancel: impl Into<Cancel>,
    ) -> Result<Lease, LockError> {
        let mark = (max_retries > 0).then(|| self.mark(key));
        let plan = Plan::retries(max_retries, base_delay, None, mark);
        let cancel = cancel.into();
        let won = self.pursue(plan, key, ttl, &cancel, Start::Attempt).await?;
        won.ok_or_else(|| LockError::Locked {
            key: key.to_owned(),
            retries: max_retries,
        })
    }

    /// `waitForLock`: attempts until `timeout` has passed, polling every `poll` (sooner when
    /// the holder's TTL runs out first). The last attempt is made at the deadline.
    pub async fn wait(
        &self,
        key: &str,
        ttl: Duration,
        timeout: Duration,
        poll: Duration,
        cancel: impl Into<Cancel>,
    ) -> Result<Lease, LockError> {
        let deadline = Instant::now() + timeout;
        let plan = Plan::until(self.place(key, ttl, None), deadline, poll);
        let cancel = cancel.into();
        let won = self.pursue(plan, key, ttl, &cancel, Start::Attempt).await?;
        won.ok_or_else(|| LockError::Locked {
            key: key.to_owned(),
            retries: 0,
        })
    }

    /// Where a new waiter for `key` (wanting it for `ttl`, for `caller`) stands before its
    /// first attempt: joined at once where its connection remembers the lock (waiters of
    /// ours are there first, or it listens or queues for it), or at a fair lock (whose line
    /// its attempts keep). Elsewhere it joins only if its attempt finds the lock held.
    pub fn place(&self, key: &str, ttl: Duration, caller: Option<Caller>) -> Place {
        let wakes = self.store().wakes();
        if self.is_fair() || wakes.remembers(|| self.redis_key(key)) {
            return Place::Joined(self.join(key, ttl, caller));
        }
        let mark = Some(self.mark(key));
        Place::Later { caller, mark }
    }

    /// Read before a first attempt at `key` by one who joins the wake table only if it
    /// fails (see wait/releases.rs).
    pub fn mark(&self, key: &str) -> Mark {
        (self.store().wakes()).mark(&[self.prefix(), key.as_bytes()])
    }

    /// `mark`, for the lock at `lock_key` named whole (syncguard's keys).
    pub fn mark_at(&self, lock_key: &[u8]) -> Mark {
        (self.store().wakes()).mark(&[lock_key])
    }

    /// Joins a waiter whose first attempt found the lock held; with the `mark` read before
    /// that attempt, a release of ours that may have missed it ends its first pause at once.
    fn join_after(
        &self,
        mark: Option<Mark>,
        lock_key: &[u8],
        ttl: Duration,
        caller: Option<Caller>,
    ) -> Ticket {
        let (ticket, missed) = self.ticket(Place::Later { caller, mark }, lock_key, ttl);
        if missed {
            ticket.nudge();
        }
        ticket
    }

    /// The ticket of a waiter at `place`, joining now if it has not; `true` beside it as
    /// `Wakes::join_late` says.
    fn ticket(&self, place: Place, lock_key: &[u8], ttl: Duration) -> (Ticket, bool) {
        match place {
            Place::Joined(ticket) => (ticket, false),
            // A fair lock's waiter keeps its place in the line, not here: never late.
            Place::Later { caller, mark: None } => (self.join_at(lock_key, ttl, caller), false),
            Place::Later { caller, .. } if self.is_fair() => {
                (self.join_at(lock_key, ttl, caller), false)
            }
            Place::Later {
                caller,
                mark: Some(mark),
            } => {
                let (owner, counters) = (Some(self.owner().clone()), Some(self.stats().clone()));
                (self.store().wakes()).join_late(lock_key, ttl, (caller, counters), owner, mark)
            }
        }
    }
}

#[cfg(test)]
#[path = "acquire_tests.rs"]
mod tests;
