//! The lock operations: one attempt, retries with backoff, waiting with a deadline, release,
//! extend and the held check. Contention is an answer here, not an error; only the caller's
//! policy (retries used up, deadline passed) turns it into `LockError::Locked`.

use super::scripts;
use super::store::Store;
pub use crate::core::backend::direct::AttemptForm;
use crate::core::backend::link::{Connection, Replay};
use crate::core::basics::backoff;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::resp;
use crate::core::basics::token;
use crate::core::wait::owner::Owner;
use crate::core::wait::wake::{self, Caller, Ticket};
use redis::Cmd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Slack on bounds derived from a deadline, so a call that starts just before it can finish.
/// Half the 50 ms we promise: the rest is for the hop back to the JS thread.
const GRACE: Duration = Duration::from_millis(25);

/// Locks under one key prefix, on one shared connection.
pub struct Locker {
    store: Arc<Store>,
    prefix: Vec<u8>,
    command_timeout: Duration,
    /// Waiters get the lock in the order they asked for it (see acquire_fair.lua).
    fair: bool,
    /// On whose behalf its calls run: once it is gone, waits end and what they win is
    /// released (see owner.rs).
    owner: Owner,
}

/// What one attempt found.
pub enum Attempt {
    Acquired(Lease),
    /// Someone else holds it; `ttl` is the holder's remaining time when it has one.
    Held {
        ttl: Option<Duration>,
    },
}

impl Locker {
    pub fn new(store: Arc<Store>, prefix: impl Into<Vec<u8>>, command_timeout: Duration) -> Self {
        Locker {
            store,
            prefix: prefix.into(),
            command_timeout,
            fair: false,
            owner: Owner::new(),
        }
    }

    /// Runs every call of this locker on behalf of `owner`.
    pub fn owned_by(mut self, owner: Owner) -> Self {
        self.owner = owner;
        self
    }

    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Makes every lock of this locker fair: its waiters line up in Redis, a release wakes
    /// the first in line, and no attempt (a waiter's or a plain one) gets ahead of the line.
    pub fn fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }

    pub fn is_fair(&self) -> bool {
        self.fair
    }

    pub fn redis_key(&self, key: &str) -> Vec<u8> {
        let mut full = Vec::with_capacity(self.prefix.len() + key.len());
        full.extend_from_slice(&self.prefix);
        full.extend_from_slice(key.as_bytes());
        full
    }

    /// One SET NX PX attempt with a fresh token, numbered with the next fencing token when
    /// it wins.
    pub async fn attempt(&self, key: &str, ttl: Duration) -> Result<Attempt, LockError> {
        self.attempt_within(key, ttl, self.command_timeout).await
    }

    async fn attempt_within(
        &self,
        key: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempt_bounded(key, ttl, timeout, None).await
    }

    /// An attempt by a waiter: a failed one keeps its connection queued for a wake-up.
    async fn attempt_waiting(
        &self,
        key: &str,
        ttl: Duration,
        timeout: Duration,
        ticket: &Ticket,
    ) -> Result<Attempt, LockError> {
        self.attempt_bounded(key, ttl, timeout, Some(ticket)).await
    }

    async fn attempt_bounded(
        &self,
        key: &str,
        ttl: Duration,
        timeout: Duration,
        waiting: Option<&Ticket>,
    ) -> Result<Attempt, LockError> {
        self.attempt_with(key, token::new_token(), ttl, timeout, waiting)
            .await
    }

    /// An attempt with `token`: fresh, or the token of an attempt that may have run already
    /// (the script then grants it again, see acquire.lua).
    async fn attempt_with(
        &self,
        key: &str,
        token: String,
        ttl: Duration,
        timeout: Duration,
        waiting: Option<&Ticket>,
    ) -> Result<Attempt, LockError> {
        let redis_key = self.redis_key(key);
        let ttl_ms = ttl.as_millis() as u64;
        // Only a connection that listens on the lock's channel may queue: a wake popped for
        // one that does not would be lost to every waiter. (A fair lock's line is another
        // matter: every waiter takes its place there, heard or not.)
        let queueing = waiting.filter(|ticket| !self.fair && ticket.is_subscribed());
        let company = queueing.is_some_and(Ticket::has_company);
        let mut invocation = match queueing {
            _ if self.fair => scripts::ACQUIRE_FAIR.key(&redis_key),
            Some(_) => scripts::ACQUIRE_QUEUED.key(&redis_key),
            None => scripts::ACQUIRE.key(&redis_key),
        };
        invocation
            .key(keys::fence_key(&redis_key))
            .arg(&token)
            .arg(ttl_ms);
        if self.fair {
            let member = waiting.map(|ticket| ticket.member(self.store.id()));
            invocation
                .key(wake::line_key(&redis_key))
                .key(wake::alive_key(&redis_key))
                .arg(member.unwrap_or_default())
                .arg(wake::FAIR_PLACE.as_millis() as u64)
                .arg(wake::QUEUE_LIFETIME.as_millis() as u64);
            // Whatever comes of it, the attempt may have given the waiter a place.
            waiting.inspect(|ticket| ticket.set_in_line(true));
        }
        if queueing.is_some() {
            invocation
                .key(wake::queue_key(&redis_key))
                .arg(self.store.id())
                .arg(wake::queue_score())
                .arg(if company { "1" } else { "0" })
                .arg(wake::QUEUE_LIFETIME.as_millis() as u64);
        }
        let sent = Stamp::now();
        let reply = self
            .store
            .eval_tracked::<(i64, i64)>(&invocation, timeout)
            .await;
        if let (Some(ticket), Ok((won, _))) = (queueing, &reply) {
            let wakes = ticket.wakes();
            wakes.mark_queued(ticket.channel(), *won != 1 || company);
        }
        if let (Some(ticket), Ok((1, _))) = (waiting, &reply) {
            // Winning took it out of the fair lock's line.
            ticket.set_in_line(false);
        }
        match reply {
            Ok((1, fence)) => Ok(Attempt::Acquired(Lease::new(
                key.to_owned(),
                redis_key,
                token,
                fence_of(fence)?,
                sent,
                ttl,
            ))),
            Ok((_, holder_ttl)) => Ok(Attempt::Held {
                ttl: u64::try_from(holder_ttl).ok().map(Duration::from_millis),
            }),
            Err((err, Some(connection))) => {
                // The SET may still run after we stopped waiting; free it so the key does not
                // sit locked by a token nobody holds until its TTL runs out.
                self.forget(connection, redis_key, token, ttl);
                Err(err)
            }
            Err((err, None)) => Err(err),
        }
    }

    /// Sent on the connection the timed-out attempt went out on, so it runs after that
    /// attempt whenever it runs; worth waiting for only as long as the lock could live.
    fn forget(&self, connection: Connection, redis_key: Vec<u8>, token: String, ttl: Duration) {
        let store = self.store.clone();
        let fair = self.fair;
        tokio::spawn(async move {
            let invocation = if fair {
                super::release::fair_invocation(&redis_key, &token)
            } else {
                let mut plain = scripts::RELEASE.key(&redis_key);
                plain.arg(&token);
                plain
            };
            let _ignored: Result<i64, _> = store.eval_on(&connection, &invocation, ttl).await;
        });
    }

    /// One attempt plus up to `max_retries` more after `base`, `2 x base`, ... of sleep.
    pub async fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        max_retries: u32,
        base_delay: Duration,
        cancel: &CancellationToken,
    ) -> Result<Lease, LockError> {
        self.check(cancel)?;
        if self.fair && max_retries > 0 {
            // A fair lock's first attempt already takes a place in its line.
            return self
                .retries(key, ttl, max_retries, base_delay, cancel, None, true)
                .await;
        }
        match self.attempt(key, ttl).await? {
            Attempt::Acquired(lease) => self.unless_cancelled(lease, cancel).await,
            Attempt::Held { .. } => self.retry(key, ttl, max_retries, base_delay, cancel).await,
        }
    }

    /// The retries of `acquire`, after a first attempt found the lock held.
    pub async fn retry(
        &self,
        key: &str,
        ttl: Duration,
        max_retries: u32,
        base_delay: Duration,
        cancel: &CancellationToken,
    ) -> Result<Lease, LockError> {
        self.retry_as(key, ttl, max_retries, base_delay, cancel, None)
            .await
    }

    /// As `retry`, for `caller`: a release of this process may answer it directly, and the
    /// retries then end with `LockError::Aborted` (nobody listens any more).
    pub async fn retry_as(
        &self,
        key: &str,
        ttl: Duration,
        max_retries: u32,
        base_delay: Duration,
        cancel: &CancellationToken,
        caller: Option<Caller>,
    ) -> Result<Lease, LockError> {
        self.retries(key, ttl, max_retries, base_delay, cancel, caller, false)
            .await
    }

    /// The retries of `acquire`, after its first attempt, or (`first`) with it.
    #[allow(clippy::too_many_arguments)]
    async fn retries(
        &self,
        key: &str,
        ttl: Duration,
        max_retries: u32,
        base_delay: Duration,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        first: bool,
    ) -> Result<Lease, LockError> {
        let mut retries = 0;
        let mut ticket = None;
        // Whether this pass starts with an attempt: a retry, or a fair lock's first attempt.
        let mut attempt = first;
        loop {
            if attempt {
                let ticket = ticket.get_or_insert_with(|| self.join(key, ttl, caller));
                let timeout = self.command_timeout;
                if let Attempt::Acquired(lease) =
                    self.attempt_waiting(key, ttl, timeout, ticket).await?
                {
                    return self.unless_cancelled(lease, cancel).await;
                }
            }
            if retries == max_retries {
                return Err(LockError::Locked {
                    key: key.to_owned(),
                    retries,
                });
            }
            let ticket = ticket.get_or_insert_with(|| self.join(key, ttl, caller));
            let due = Instant::now() + backoff::retry_delay(base_delay, retries);
            if let Some(lease) = self
                .attempts_on_release(key, ttl, ticket, due, cancel)
                .await?
            {
                return self.unless_cancelled(lease, cancel).await;
            }
            retries += 1;
            self.check(cancel)?;
            attempt = true;
        }
    }

    /// Attempts until `timeout` has passed, polling every `poll` (sooner when the holder's
    /// TTL runs out first). The last attempt is made at the deadline.
    pub async fn wait(
        &self,
        key: &str,
        ttl: Duration,
        timeout: Duration,
        poll: Duration,
        cancel: &CancellationToken,
    ) -> Result<Lease, LockError> {
        self.wait_as(key, ttl, timeout, poll, cancel, None).await
    }

    /// As `wait`, for `caller`: a release of this process may answer it directly, and the
    /// wait then ends with `LockError::Aborted` (nobody listens any more).
    pub async fn wait_as(
        &self,
        key: &str,
        ttl: Duration,
        timeout: Duration,
        poll: Duration,
        cancel: &CancellationToken,
        caller: Option<Caller>,
    ) -> Result<Lease, LockError> {
        let deadline = Instant::now() + timeout;
        let ticket = self.join(key, ttl, caller);
        self.wait_joined(ticket, key, ttl, deadline, poll, cancel, WaitStart::Attempt)
            .await
    }

    /// As `wait_as`, until `deadline`, for a waiter that joined already: on its caller's
    /// thread, so a release made there can hand it the lock before this even runs.
    #[allow(clippy::too_many_arguments)]
    pub async fn wait_joined(
        &self,
        ticket: Ticket,
        key: &str,
        ttl: Duration,
        deadline: Instant,
        poll: Duration,
        cancel: &CancellationToken,
        start: WaitStart,
    ) -> Result<Lease, LockError> {
        // Answered by a release that handed it the lock before this ran.
        if ticket.is_settled() {
            return Err(LockError::Aborted);
        }
        let timeout = deadline.saturating_duration_since(Instant::now());
        // Attempts made; the first is not a retry.
        let mut retries: u32 = 0;
        // The first attempt went out elsewhere and found the lock held: straight to the pause,
        // which ends when the holder's TTL runs out if that comes first. A transaction does
        // not tell the TTL (asking costs every wait on a free key a command): it is asked now.
        let (mut tried_elsewhere, mut first_holder_ttl) = match start {
            WaitStart::Attempt => (false, None),
            WaitStart::Held {
                holder_ttl: Some(ttl),
            } => (true, Some(ttl)),
            WaitStart::Held { holder_ttl: None } => (true, self.holder_ttl(key, deadline).await),
        };
        if tried_elsewhere {
            retries = 1;
        }
        // Its turn comes from waiters of this process (a waiter's task can start late, first
        // in line by then while the lock moves between them): wait to be handed the lock, or
        // woken in turn (or for the poll).
        let mut pause = None;
        if !tried_elsewhere && ticket.turn_comes_from_others() {
            let due = Instant::now() + poll.min(timeout);
            pause = Some(self.pause_until(&ticket, due, cancel).await?);
        }
        loop {
            // Whether this pass tries: not when only the poll timer ended the pause of a
            // waiter behind others of this process (their turns come first, handed over or
            // woken, and the attempt would find the lock held: only the first in line
            // polls), nor while the lock moves between them.
            let attempt = match pause.take() {
                None if tried_elsewhere => {
                    tried_elsewhere = false;
                    false
                }
                None | Some(Pause::Woken) => true,
                Some(Pause::Granted(lease)) => return self.unless_cancelled(lease, cancel).await,
                Some(Pause::Due) => ticket.is_fair() || !ticket.is_behind_others(),
                Some(Pause::Moving) => false,
            };
            self.check(cancel)?;
            // Known on the first pass only, when the attempt went elsewhere.
            let mut holder_ttl = first_holder_ttl.take();
            if attempt {
                // No attempt may outlive the wait by more than a little grace.
                let left = deadline.saturating_duration_since(Instant::now()) + GRACE;
                let bound = self.command_timeout.min(left);
                match self.attempt_waiting(key, ttl, bound, &ticket).await? {
                    Attempt::Acquired(lease) => return self.unless_cancelled(lease, cancel).await,
                    Attempt::Held { ttl } => holder_ttl = ttl,
                }
                retries += 1;
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                // A lock handed over in the last instant is still ours to take.
                if let Some(lease) = ticket.take_grant() {
                    return self.unless_cancelled(lease, cancel).await;
                }
                return Err(LockError::Locked {
                    key: key.to_owned(),
                    retries: retries.saturating_sub(1),
                });
            }
            let due = Instant::now() + backoff::poll_delay(poll, holder_ttl, remaining);
            // A release cuts the poll short; the next attempt is the loop's own.
            pause = Some(self.pause_until(&ticket, due, cancel).await?);
        }
    }

    /// Attempts until `max_wait` has passed, sleeping `delay(n)` after the n-th
    /// failure (never past the deadline). `None` when the lock stayed held.
    /// `cancel` ends the wait with `LockError::Aborted`; a lock won meanwhile is released.
    pub async fn acquire_within(
        &self,
        key: &str,
        ttl: Duration,
        max_wait: Duration,
        delay: impl Fn(u32) -> Duration,
        cancel: &CancellationToken,
    ) -> Result<Option<Lease>, LockError> {
        let ticket = self.join(key, ttl, None);
        let deadline = Instant::now() + max_wait;
        let start = WaitStart::Attempt;
        self.within_joined(ticket, key, ttl, deadline, delay, cancel, start)
            .await
    }

    /// As `acquire_within`, until `deadline`, for a waiter that joined already.
    #[allow(clippy::too_many_arguments)]
    pub async fn within_joined(
        &self,
        ticket: Ticket,
        key: &str,
        ttl: Duration,
        deadline: Instant,
        delay: impl Fn(u32) -> Duration,
        cancel: &CancellationToken,
        start: WaitStart,
    ) -> Result<Option<Lease>, LockError> {
        let won = self
            .wait_within(ticket, key, ttl, deadline, delay, cancel, start)
            .await?;
        match won {
            Some(lease) => self.unless_cancelled(lease, cancel).await.map(Some),
            None => Ok(None),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn wait_within(
        &self,
        ticket: Ticket,
        key: &str,
        ttl: Duration,
        deadline: Instant,
        delay: impl Fn(u32) -> Duration,
        cancel: &CancellationToken,
        start: WaitStart,
    ) -> Result<Option<Lease>, LockError> {
        self.check(cancel)?;
        let mut failures = 0;
        // The first attempt went out elsewhere and found the lock held: straight to the pause.
        let mut tried = matches!(start, WaitStart::Held { .. });
        if tried {
            failures = 1;
        } else if ticket.turn_comes_from_others() {
            let max_wait = deadline.saturating_duration_since(Instant::now());
            let due = Instant::now() + delay(0).min(max_wait);
            if let Pause::Granted(lease) = self.pause_until(&ticket, due, cancel).await? {
                return Ok(Some(lease));
            }
        }
        loop {
            if !tried {
                let timeout = self.command_timeout;
                if let Attempt::Acquired(lease) =
                    self.attempt_waiting(key, ttl, timeout, &ticket).await?
                {
                    return Ok(Some(lease));
                }
                failures += 1;
            }
            tried = false;
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Ok(ticket.take_grant());
            }
            let due = Instant::now() + delay(failures).min(remaining);
            let won = self
                .attempts_on_release(key, ttl, &ticket, due, cancel)
                .await?;
            if won.is_some() {
                return Ok(won);
            }
            self.check(cancel)?;
        }
    }

    /// The whole acquisition by `plan`, from its first attempt. `None`: not acquired, and
    /// the plan does not make that an error.
    pub async fn pursue(
        &self,
        plan: Plan,
        key: &str,
        ttl: Duration,
        cancel: &CancellationToken,
    ) -> Result<Option<Lease>, LockError> {
        let start = WaitStart::Attempt;
        match plan {
            Plan::Once => match self.attempt(key, ttl).await? {
                Attempt::Acquired(lease) => Ok(Some(lease)),
                Attempt::Held { .. } => Ok(None),
            },
            // Only a first attempt made on the caller's thread leaves retries a caller to
            // answer (see `after_held`).
            Plan::Retries { retries, delay, .. } => self
                .acquire(key, ttl, retries, delay, cancel)
                .await
                .map(Some),
            plan => self.wait_by(plan, key, ttl, cancel, start).await,
        }
    }

    /// Goes on with `plan` after a first attempt, sent elsewhere (the JS thread's
    /// connection), found `key` held (for `holder_ttl`, when the reply told it). `None`:
    /// not acquired, and the plan does not make that an error.
    pub async fn after_held(
        &self,
        plan: Plan,
        key: &str,
        ttl: Duration,
        holder_ttl: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<Option<Lease>, LockError> {
        let start = WaitStart::Held { holder_ttl };
        match plan {
            Plan::Once => Ok(None),
            Plan::Retries { retries: 0, .. } => Err(LockError::Locked {
                key: key.to_owned(),
                retries: 0,
            }),
            Plan::Retries {
                retries,
                delay,
                caller,
            } => self
                .retry_as(key, ttl, retries, delay, cancel, caller)
                .await
                .map(Some),
            plan => self.wait_by(plan, key, ttl, cancel, start).await,
        }
    }

    /// The waits of a plan (`Until`, `Backoff`), begun as `start` says; the other plans do
    /// not wait, and answer as a lock not won.
    async fn wait_by(
        &self,
        plan: Plan,
        key: &str,
        ttl: Duration,
        cancel: &CancellationToken,
        start: WaitStart,
    ) -> Result<Option<Lease>, LockError> {
        match plan {
            Plan::Until {
                ticket,
                deadline,
                poll,
            } => self
                .wait_joined(ticket, key, ttl, deadline, poll, cancel, start)
                .await
                .map(Some),
            Plan::Backoff {
                ticket,
                deadline,
                base,
                cap,
            } => {
                let delay = |n| backoff::maestro_delay(base, cap, n, backoff::unit_random());
                self.within_joined(ticket, key, ttl, deadline, delay, cancel, start)
                    .await
            }
            Plan::Once | Plan::Retries { .. } => Ok(None),
        }
    }

    /// A first attempt sent elsewhere whose outcome is unknown (its connection broke, or
    /// the server refused it there): the same token again, then `plan` if the lock is held.
    pub async fn again(
        &self,
        request: AttemptRequest,
        timeout: Duration,
        plan: Plan,
        cancel: &CancellationToken,
    ) -> Result<Option<Lease>, LockError> {
        self.check(cancel)?;
        let AttemptRequest {
            key, token, ttl, ..
        } = request;
        match self.attempt_with(&key, token, ttl, timeout, None).await? {
            Attempt::Acquired(lease) => self.unless_cancelled(lease, cancel).await.map(Some),
            Attempt::Held { ttl: holder_ttl } => {
                self.after_held(plan, &key, ttl, holder_ttl, cancel).await
            }
        }
    }

    /// The refresh target of a lease: its key holds the token, nothing beside it.
    pub fn target(&self, lease: &Lease, every: Duration) -> super::watched::Target {
        super::watched::Target {
            key: lease.redis_key.clone(),
            name_at: self.prefix.len(),
            token: lease.token.clone(),
            pair: None,
            ttl: lease.ttl(),
            every,
        }
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// A lock won after the caller gave up (or its owner went away) is released at once,
    /// not handed out.
    async fn unless_cancelled(
        &self,
        lease: Lease,
        cancel: &CancellationToken,
    ) -> Result<Lease, LockError> {
        if self.is_cancelled(cancel) {
            let _ignored = self.release(&lease).await;
            return Err(LockError::Aborted);
        }
        Ok(lease)
    }

    /// Deletes the lock if it is still ours, or hands it to a waiter of this process (see
    /// release.rs). Releasing twice, or after expiry, is a no-op; the answer says whether
    /// Redis still had our lock.
    pub async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let bound = self.bound_for(lease);
        if self.fair {
            return super::release::release_fair(&self.store, lease, bound).await;
        }
        super::release::release(&self.store, lease, bound).await
    }

    /// Adds `extra` to the lock's remaining TTL, if the lock is still ours.
    pub async fn extend(&self, lease: &Lease, extra: Duration) -> Result<(), LockError> {
        if lease.is_released() {
            return Err(LockError::NotHeld {
                key: lease.key.clone(),
            });
        }
        let mut invocation = scripts::EXTEND.key(&lease.redis_key);
        invocation.arg(&lease.token).arg(extra.as_millis() as u64);
        self.store.ensure_scripts(self.bound_for(lease)).await?;
        let sent = Stamp::now();
        let new_ttl: i64 = self
            .store
            .eval(&invocation, self.bound_for(lease), Replay::Never)
            .await?;
        Self::extended(lease, sent, new_ttl)
    }

    /// What extend.lua's answer (the new TTL, 0 when not ours) means for `lease`, sent at
    /// `sent`, wherever it was carried.
    pub(crate) fn extended(lease: &Lease, sent: Stamp, new_ttl: i64) -> Result<(), LockError> {
        if new_ttl <= 0 {
            lease.mark_released();
            return Err(LockError::NotHeld {
                key: lease.key.clone(),
            });
        }
        lease.extended(sent, Duration::from_millis(new_ttl as u64));
        Ok(())
    }

    /// `extend` written to `out` (one reply, read by `extended`).
    pub(crate) fn write_extend(out: &mut Vec<u8>, lease: &Lease, extra: Duration) {
        let extra = resp::decimal(extra.as_millis() as u64);
        write_script(
            out,
            &scripts::EXTEND,
            &[&lease.redis_key],
            &[lease.token.as_bytes(), extra.as_bytes()],
        );
    }

    /// Queues a waiter (wanting `key` for `ttl`, for `caller`) for its releases.
    pub fn join(&self, key: &str, ttl: Duration, caller: Option<Caller>) -> Ticket {
        let wakes = self.store.wakes();
        let owner = Some(self.owner.clone());
        if self.fair {
            return wakes.join_fair(&self.redis_key(key), ttl, owner);
        }
        wakes.join_as(&self.redis_key(key), ttl, caller, owner)
    }

    /// Sleeps until `due` or until a release wakes this waiter, whichever comes first, and
    /// says which; a release of this process may have handed it the lock meanwhile. The
    /// first time, the connection subscribes and queues for the lock in the background
    /// (best effort: the sleep is the safety net, so a wait never fails or lingers for want
    /// of a subscription).
    async fn pause_until(
        &self,
        ticket: &Ticket,
        due: Instant,
        cancel: &CancellationToken,
    ) -> Result<Pause, LockError> {
        if let Some(lease) = ticket.take_grant() {
            return Ok(Pause::Granted(lease));
        }
        if ticket.is_settled() {
            return Err(LockError::Aborted);
        }
        if ticket.needs_preparing() {
            let fair = ticket.is_fair();
            self.store
                .prepare_wake(ticket.lock_key(), self.command_timeout, fair);
        }
        let handoffs = ticket.handoffs();
        let mut left = due.saturating_duration_since(Instant::now());
        // A fair waiter's place in line lives only as long as it keeps trying.
        let beat = ticket.is_fair() && left > wake::FAIR_HEARTBEAT;
        if beat {
            left = wake::FAIR_HEARTBEAT;
        }
        let pause = tokio::select! {
            _ = ticket.woken() => Pause::Woken,
            result = self.sleep(left, cancel) => {
                result?;
                match () {
                    _ if beat => Pause::Woken,
                    _ if ticket.handoffs() != handoffs => Pause::Moving,
                    _ => Pause::Due,
                }
            }
        };
        if let Some(lease) = ticket.take_grant() {
            return Ok(Pause::Granted(lease));
        }
        // Its caller was answered by the release that handed it the lock.
        if ticket.is_settled() {
            return Err(LockError::Aborted);
        }
        // From here on, a release announced is news for this waiter again.
        ticket.rearm();
        Ok(pause)
    }

    /// Until `due` (a retry's scheduled time), tries again whenever a release is announced.
    /// Those tries are extra: a failed one leaves the retry count and its schedule as they
    /// were, so the caller's backoff stays the original package's.
    async fn attempts_on_release(
        &self,
        key: &str,
        ttl: Duration,
        ticket: &Ticket,
        due: Instant,
        cancel: &CancellationToken,
    ) -> Result<Option<Lease>, LockError> {
        loop {
            match self.pause_until(ticket, due, cancel).await? {
                Pause::Granted(lease) => return Ok(Some(lease)),
                // A retry is due on its schedule, moving lock or not.
                Pause::Due | Pause::Moving => return Ok(None),
                Pause::Woken => {}
            }
            let timeout = self.command_timeout;
            if let Attempt::Acquired(lease) =
                self.attempt_waiting(key, ttl, timeout, ticket).await?
            {
                return Ok(Some(lease));
            }
        }
    }

    /// Waiting on a release or extend past the lock's own validity helps nobody: by then the
    /// lock has expired either way.
    pub(crate) fn bound_for(&self, lease: &Lease) -> Duration {
        self.command_timeout.min(lease.remaining() + GRACE)
    }

    /// Writes `value` to the hash at `redis_key` unless a higher fence already wrote there.
    pub async fn fenced_set(
        &self,
        redis_key: &[u8],
        value: &str,
        fence: &str,
    ) -> Result<bool, LockError> {
        if fence.len() != 15 || !fence.bytes().all(|b| b.is_ascii_digit()) {
            return Err(LockError::invalid_range(
                "fence",
                "fence must be a fencing token: 15 decimal digits, as handle.fence gives it",
            ));
        }
        let mut invocation = scripts::FENCED_SET.key(redis_key);
        invocation.arg(value).arg(fence);
        let written: i64 = self
            .store
            .eval(&invocation, self.command_timeout, Replay::Safe)
            .await?;
        Ok(written == 1)
    }

    /// How long `key`'s holder still has, when Redis tells it before `deadline` (with a
    /// little grace): `None` when the lock is free, has no TTL, or the answer did not come
    /// (a poll is the safety net).
    async fn holder_ttl(&self, key: &str, deadline: Instant) -> Option<Duration> {
        let left = deadline.saturating_duration_since(Instant::now()) + GRACE;
        let mut cmd = Cmd::new();
        cmd.arg("PTTL").arg(self.redis_key(key));
        let pttl: i64 = self
            .store
            .query(&cmd, self.command_timeout.min(left))
            .await
            .ok()?;
        u64::try_from(pttl).ok().map(Duration::from_millis)
    }

    /// Whether anyone holds `key`. An unreachable Redis is an error, never `false`.
    pub async fn is_locked(&self, key: &str) -> Result<bool, LockError> {
        let mut cmd = Cmd::new();
        cmd.arg("EXISTS").arg(self.redis_key(key));
        let count: i64 = self.store.query(&cmd, self.command_timeout).await?;
        Ok(count > 0)
    }
}

/// What an acquisition does once an attempt found the lock held: the one plan every API's
/// acquire is made of (a fair lock's waits excepted, which keep their place in line).
pub enum Plan {
    /// That was the one attempt (`tryAcquire`, ExclusiveLock).
    Once,
    /// Up to `retries` more after `delay`, doubling, for `caller` (`acquire`).
    Retries {
        retries: u32,
        delay: Duration,
        caller: Option<Caller>,
    },
    /// Until `deadline`, polling every `poll`, already queued (`waitForLock`).
    Until {
        ticket: Ticket,
        deadline: Instant,
        poll: Duration,
    },
    /// Until `deadline` with maestro's capped backoff, already queued; not won by then is
    /// no error (DistributedLockService).
    Backoff {
        ticket: Ticket,
        deadline: Instant,
        base: Duration,
        cap: Duration,
    },
}

impl Plan {
    /// The bound of an attempt made for this plan, as the plan's own attempts through the
    /// runtime have it: `waitForLock`'s never outlives its wait by more than a little grace;
    /// maestro's gets the command timeout, whatever its wait (`acquire(ttl, 0)` still makes
    /// its one attempt in full).
    pub fn attempt_bound(&self, command_timeout: Duration) -> Duration {
        match self {
            Plan::Until { deadline, .. } => {
                let left = deadline.saturating_duration_since(Instant::now()) + GRACE;
                command_timeout.min(left)
            }
            Plan::Once | Plan::Retries { .. } | Plan::Backoff { .. } => command_timeout,
        }
    }
}

/// How a wait begins: with an attempt of its own, or after a first attempt sent elsewhere
/// (the JS thread's connection) found the lock held.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum WaitStart {
    Attempt,
    /// With the holder's remaining TTL when the reply told it: the first pause ends then.
    Held {
        holder_ttl: Option<Duration>,
    },
}

enum Pause {
    Woken,
    Due,
    /// Due, while the lock was handed between waiters of this process: it is not stuck, and
    /// this waiter's turn comes the same way.
    Moving,
    /// A release of this process handed the lock to this waiter.
    Granted(Lease),
}

impl Locker {
    /// The caller gave up, or its owner went away.
    fn is_cancelled(&self, cancel: &CancellationToken) -> bool {
        cancel.is_cancelled() || self.owner.is_gone()
    }

    fn check(&self, cancel: &CancellationToken) -> Result<(), LockError> {
        if self.is_cancelled(cancel) {
            Err(LockError::Aborted)
        } else {
            Ok(())
        }
    }

    async fn sleep(&self, delay: Duration, cancel: &CancellationToken) -> Result<(), LockError> {
        tokio::select! {
            _ = tokio::time::sleep(delay) => Ok(()),
            _ = cancel.cancelled() => Err(LockError::Aborted),
            _ = self.owner.gone() => Err(LockError::Aborted),
        }
    }
}

/// An acquire attempt sent on a connection of its own (the JS thread's, see carried.rs), and
/// what its reply means.
pub struct AttemptRequest {
    pub key: String,
    pub redis_key: Vec<u8>,
    pub token: String,
    pub ttl: Duration,
    pub sent: Stamp,
}

impl AttemptRequest {
    /// Appends the attempt to `out`; the answer is how many replies it gets (the last one
    /// is what `won` reads). Only the script tells a held lock's remaining TTL: a waiter
    /// whose transaction found the lock held asks it then (see `Locker::holder_ttl`), so a
    /// free lock costs nothing more.
    pub fn write(&self, out: &mut Vec<u8>, form: AttemptForm) -> usize {
        let fence_key = keys::fence_key(&self.redis_key);
        let ttl = resp::decimal(self.ttl.as_millis() as u64);
        match form {
            AttemptForm::Transaction | AttemptForm::Untried => {
                resp::write_command(out, &[b"MULTI"]);
                resp::write_command(
                    out,
                    &[
                        b"SET",
                        &self.redis_key,
                        self.token.as_bytes(),
                        b"NX",
                        b"PX",
                        ttl.as_bytes(),
                    ],
                );
                resp::write_command(out, &[b"INCRBY", &fence_key, b"2"]);
                resp::write_command(out, &[b"EXEC"]);
                4
            }
            AttemptForm::Script => {
                write_script(
                    out,
                    &scripts::ACQUIRE,
                    &[&self.redis_key, &fence_key],
                    &[self.token.as_bytes(), ttl.as_bytes()],
                );
                1
            }
        }
    }

    /// The fence it drew when the reply says it won, `None` when the lock was held. Reads
    /// both forms: EXEC's `[OK or nil, counter]` and the script's `[1 or 0, fence or pttl]`.
    /// A win without a usable fence is an error (see `needs_script`, which catches the
    /// transaction's before this is asked).
    pub fn won(&self, reply: redis::Value) -> Result<Option<u64>, LockError> {
        use redis::Value;
        let reply = reply.extract_error()?;
        if let Value::Array(items) = &reply {
            if let [set @ (Value::Okay | Value::SimpleString(_) | Value::Nil), Value::Int(counter), ..] =
                items.as_slice()
            {
                if matches!(set, Value::Nil) {
                    return Ok(None);
                }
                fence_of(*counter)?;
                return fence_of(*counter - 1).map(Some);
            }
        }
        match resp::typed::<(i64, i64)>(reply)? {
            (1, fence) => fence_of(fence).map(Some),
            _ => Ok(None),
        }
    }

    /// Whether the reply must be settled by the acquire script instead: a server error (in
    /// the transaction's answer too), or a transaction that set the lock but whose counter
    /// gave no usable fence. The script, sent with the same token, finds its own lock and
    /// either reads its fence or takes the lock back and fails (see fence.lua).
    pub fn needs_script(reply: &redis::Value) -> bool {
        use redis::Value;
        match reply {
            Value::ServerError(_) => true,
            Value::Array(items) => match items.as_slice() {
                [Value::Nil, ..] => false,
                // The script's own answer (`[1, fence]` or `[0, pttl]`) is read by `won`.
                [Value::Int(_), Value::Int(_)] => false,
                // Drawn two at a time: the counter is the kept one, which must be a fence too.
                [_, Value::Int(counter), ..] => fence_of(*counter).is_err() || *counter < 2,
                _ => items
                    .iter()
                    .any(|item| matches!(item, Value::ServerError(_))),
            },
            _ => false,
        }
    }

    /// The holder's remaining TTL, when the reply to a failed attempt tells it: the
    /// script's `[0, pttl]`.
    pub fn holder_ttl(reply: &redis::Value) -> Option<Duration> {
        use redis::Value;
        let Value::Array(items) = reply else {
            return None;
        };
        match items.as_slice() {
            [Value::Int(0), Value::Int(pttl)] => {
                u64::try_from(*pttl).ok().map(Duration::from_millis)
            }
            _ => None,
        }
    }

    /// Whether the reply says the attempt set the lock, with or without a fence: what a late
    /// reply must know to free it.
    pub fn took_it(reply: &redis::Value) -> bool {
        use redis::Value;
        match reply {
            Value::Array(items) => matches!(
                items.first(),
                Some(Value::Okay | Value::SimpleString(_)) | Some(Value::Int(1))
            ),
            _ => false,
        }
    }

    pub fn into_lease(self, fence: u64) -> Lease {
        Lease::new(
            self.key,
            self.redis_key,
            self.token,
            fence,
            self.sent,
            self.ttl,
        )
    }
}

impl Locker {
    /// A first attempt (as `attempt`) to send elsewhere; `sent` is now.
    pub fn attempt_request(&self, key: &str, ttl: Duration) -> AttemptRequest {
        AttemptRequest {
            key: key.to_owned(),
            redis_key: self.redis_key(key),
            token: token::new_token(),
            ttl,
            sent: Stamp::now(),
        }
    }

    /// The bound of a release sent elsewhere (written by `write_release`). `None` when it
    /// must go through `release`: already released, or waiters of this process are to be
    /// woken by it.
    pub fn release_request(&self, lease: &Lease) -> Option<Duration> {
        let channel = wake::channel(&lease.redis_key);
        if self.fair || lease.is_released() || self.store.wakes().has_waiters(&channel) {
            return None;
        }
        Some(self.bound_for(lease))
    }

    /// The bound of a release (or handover) of `lease` sent elsewhere.
    pub fn release_bound(&self, lease: &Lease) -> Duration {
        self.bound_for(lease)
    }

    /// Frees a lock an attempt may have won after its caller stopped waiting, through the
    /// tokio connection (the attempt's own connection is gone), bounded by the lock's TTL.
    pub async fn abandon(&self, request: &AttemptRequest) {
        let mut invocation = scripts::RELEASE_WAKE.key(&request.redis_key);
        invocation
            .key(wake::queue_key(&request.redis_key))
            .arg(&request.token)
            .arg(wake::channel(&request.redis_key))
            .arg("0");
        let _ignored: Result<i64, _> = self
            .store
            .eval(&invocation, request.ttl, Replay::Safe)
            .await;
    }

    /// The reply to `write_release`'s command, or its lack within the bound.
    pub fn release_outcome(
        lease: &Lease,
        reply: Result<redis::Value, LockError>,
    ) -> Result<bool, LockError> {
        super::release::outcome(lease, reply)
    }

    /// `is_locked` written to `out` (one reply).
    pub fn write_exists(&self, out: &mut Vec<u8>, key: &str) {
        resp::write_command(out, &[b"EXISTS", &self.redis_key(key)]);
    }
}

/// A fence as a script or transaction gave it: 1 to `token::FENCE_MAX`. Anything else means
/// no fence could be drawn; an acquisition never resolves with such a fence.
pub fn fence_of(fence: i64) -> Result<u64, LockError> {
    match u64::try_from(fence) {
        Ok(fence @ 1..=token::FENCE_MAX) => Ok(fence),
        _ => Err(LockError::no_fence()),
    }
}

/// The release script for a lock and token, with no local waiters to wake (one reply): also
/// what frees a lock an attempt won after its caller stopped waiting.
pub fn write_release(out: &mut Vec<u8>, redis_key: &[u8], token: &str) {
    write_script(
        out,
        &scripts::RELEASE_WAKE,
        &[redis_key, &wake::queue_key(redis_key)],
        &[token.as_bytes(), &wake::channel(redis_key), b"0"],
    );
}

/// The handover script (see release.rs): our lock (`lease`), to a waiter's fresh token for
/// `ttl`.
pub fn write_handoff(out: &mut Vec<u8>, lease: &Lease, theirs: &str, ttl: Duration) {
    let ttl = resp::decimal(ttl.as_millis() as u64);
    let fence = resp::decimal(lease.fence);
    write_script(
        out,
        &scripts::HANDOFF,
        &[&lease.redis_key, &keys::fence_key(&lease.redis_key)],
        &[
            lease.token.as_bytes(),
            theirs.as_bytes(),
            ttl.as_bytes(),
            fence.as_bytes(),
        ],
    );
}

/// `EVALSHA` of `script` with `keys` and `args`.
pub(crate) fn write_script(
    out: &mut Vec<u8>,
    script: &redis::Script,
    keys: &[&[u8]],
    args: &[&[u8]],
) {
    let count = resp::decimal(keys.len() as u64);
    let mut parts: Vec<&[u8]> = Vec::with_capacity(3 + keys.len() + args.len());
    parts.extend([
        b"EVALSHA".as_slice(),
        script.get_hash().as_bytes(),
        count.as_bytes(),
    ]);
    parts.extend(keys.iter().chain(args).copied());
    resp::write_command(out, &parts);
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn pair(a: Value, b: Value) -> Value {
        Value::Array(vec![a, b])
    }

    #[test]
    fn the_scripts_answer_is_read_as_it_is_even_for_the_first_fence() {
        // `[1, 1]`: the script won the key's very first fence; nothing to settle again.
        assert!(!AttemptRequest::needs_script(&pair(
            Value::Int(1),
            Value::Int(1)
        )));
        assert!(!AttemptRequest::needs_script(&pair(
            Value::Int(0),
            Value::Int(250)
        )));
        // The transaction's counter is the kept fence: below 2 it gave no usable pair.
        assert!(AttemptRequest::needs_script(&pair(
            Value::Okay,
            Value::Int(1)
        )));
        assert!(!AttemptRequest::needs_script(&pair(
            Value::Okay,
            Value::Int(2)
        )));
        assert!(!AttemptRequest::needs_script(&pair(
            Value::Nil,
            Value::Int(7)
        )));
    }

    #[test]
    fn only_the_scripts_held_answer_tells_the_holders_ttl() {
        let ttl = AttemptRequest::holder_ttl(&pair(Value::Int(0), Value::Int(250)));
        assert_eq!(ttl, Some(Duration::from_millis(250)));
        // No TTL on the key (-1) or a transaction's answer: unknown.
        assert_eq!(
            AttemptRequest::holder_ttl(&pair(Value::Int(0), Value::Int(-1))),
            None
        );
        assert_eq!(
            AttemptRequest::holder_ttl(&pair(Value::Nil, Value::Int(9))),
            None
        );
        assert_eq!(
            AttemptRequest::holder_ttl(&pair(Value::Int(1), Value::Int(9))),
            None
        );
    }

    #[test]
    fn the_transaction_asks_nothing_a_free_lock_does_not_need() {
        let request = AttemptRequest {
            key: "k".into(),
            redis_key: b"lock:k".to_vec(),
            token: "t".into(),
            ttl: Duration::from_millis(1000),
            sent: Stamp::now(),
        };
        let mut out = Vec::new();
        assert_eq!(request.write(&mut out, AttemptForm::Transaction), 4);
        assert!(!out.windows(4).any(|w| w == b"PTTL"));
        assert_eq!(
            request.won(pair(Value::Okay, Value::Int(8))).ok(),
            Some(Some(7))
        );
        assert_eq!(
            request.won(pair(Value::Nil, Value::Int(8))).ok(),
            Some(None)
        );
    }
}
