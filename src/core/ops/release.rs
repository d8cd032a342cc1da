//! Releasing a lock. When waiters of this process want it, it goes straight to the first of
//! them in one script (`Locker::hand_off`): it never becomes free, nobody races for it, and
//! the waiter needs no request of its own. Otherwise it is deleted, and the release wakes
//! one waiter: one of ours, else the connection that queued first (see wake.rs). A fair
//! lock is only ever deleted, waking the first waiter in its line.

use super::store::Store;
use crate::core::backend::lock_store::LockStore;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::token;
use crate::core::proto::release::{FenceUpkeep, HandOver, Release, ReleaseKind};
use crate::core::proto::ring::{ReleaseGrant, Released, GRANT_BLOCK};
use crate::core::wait::wake::{self, Reservation};
use std::sync::Arc;
use std::time::Duration;

/// Deletes (or hands over) the lock if it is still ours, within `bound`. Releasing twice,
/// or after expiry, is a no-op; the answer says whether Redis still had our lock. A lock
/// handed over keeps its fence counter `window_ms` past the waiter's (when known, see
/// `KeptFences::upkeep`).
pub async fn release(
    store: &Arc<Store>,
    lease: &Lease,
    bound: Duration,
    window_ms: Option<u64>,
) -> Result<bool, LockError> {
    if lease.is_released() {
        return Ok(false);
    }
    let channel = wake::channel(&lease.redis_key);
    if let Some(to) = store.wakes().reserve(&channel) {
        return hand_off(store, lease, &channel, to, (bound, window_ms)).await;
    }
    if store.grants() && store.wakes().chain_capped(&channel) {
        // Ours still wait, asleep: the ring's next connection has it (ours again when nobody
        // else is in the ring, their first waiter trying once it is freed).
        return grant(store, lease, &channel, true, (bound, window_ms)).await;
    }
    // Waiters of our own that are already trying go first, woken here; else the queue decides.
    let ours_wait = store.wakes().waiters_at_release(&lease.redis_key);
    if store.release_quietly(lease) {
        return quietly(store, lease, &channel, ours_wait, (bound, window_ms)).await;
    }
    if store.grants() {
        // Ours that are awake are in the ring too: freeing the lock for their attempt would
        // leave the other processes of the ring to their polls (an orphaned grant, above all).
        return grant(store, lease, &channel, ours_wait, (bound, window_ms)).await;
    }
    delete(store, lease, &channel, (ours_wait, ours_wait), bound).await
}

/// Deletes our lock (release_wake.lua), the wake queue left alone when `leave_queue`, else
/// its first connection woken; our first waiter that sleeps tries once it is deleted when
/// some of ours are awake (`ours_wait`).
async fn delete(
    store: &Arc<Store>,
    lease: &Lease,
    channel: &[u8],
    (ours_wait, leave_queue): (bool, bool),
    bound: Duration,
) -> Result<bool, LockError> {
    let release = Release {
        lock_key: &lease.redis_key,
        token: &lease.token,
        kind: ReleaseKind::Wake {
            ours_wait: leave_queue,
        },
    };
    let deleted = outcome(lease, store.backend().release(&release, bound).await);
    if ours_wait && matches!(deleted, Ok(true)) {
        store.wakes().wake_local(channel);
    }
    deleted
}

/// How long a grant to another process holds unless its grantee confirms it (see
/// release_grant.lua): a grantee that died or was stopped keeps the lock no longer.
pub const GRANT_CLAIM: Duration = Duration::from_millis(1_000);

/// Releases our lock granting it to the next connection of the lock's ring that listens,
/// under a fresh token it learns from the message (release_grant.lua); deleted when none
/// does, and then our first waiter that sleeps tries (`ours_wait`: some of ours are awake).
/// This connection leaves the ring in the same step when nobody here waits.
async fn grant(
    store: &Arc<Store>,
    lease: &Lease,
    channel: &[u8],
    ours_wait: bool,
    (bound, window_ms): (Duration, Option<u64>),
) -> Result<bool, LockError> {
    // A holder's connection stays in the ring, its next waiter waiting for the ring to bring
    // the lock back (silently, see wake.rs `handed_on`); a grant passed on by a connection
    // with nobody waiting takes it out.
    let leave = lease.is_claim_only() && !store.wakes().has_waiters(channel);
    let token = token::new_token();
    let window = window_ms.unwrap_or(token::FENCE_RETENTION_MS);
    let block = GRANT_CLAIM.saturating_mul(GRANT_BLOCK);
    let known = upkeep(store, lease, block, Some(window), Duration::ZERO) == FenceUpkeep::Kept;
    let op = ReleaseGrant {
        lock_key: &lease.redis_key,
        token: &lease.token,
        fence: lease.fence,
        last: 0,
        grant: &token,
        claim: GRANT_CLAIM,
        id: store.id(),
        leave,
        ours_wait,
        fence_retention_ms: window,
        fences_known_kept: known,
    };
    store.tenure_ended();
    let released = store.backend().run(&op, bound).await.map(|released| {
        let wakes = store.wakes();
        if leave {
            wakes.left_ring(channel);
        } else {
            // Yielded to a connection outside the ring: ours wait for the ring as after a
            // grant, rather than take the lock back from it with an attempt.
            let on = matches!(released, Released::Granted { .. } | Released::Yielded);
            wakes.handed_on(channel, on);
        }
        if ours_wait && released == Released::Freed {
            wakes.wake_local(channel);
        }
        released != Released::NotOurs
    });
    outcome(lease, released)
}

/// Frees our lock within our tenure (wait/tenure.rs): no grant to the ring, for this process
/// to take straight back, else to be kicked to the ring shortly after; our first waiter that
/// sleeps tries at once (`ours_wait`: some of ours are awake).
async fn quietly(
    store: &Arc<Store>,
    lease: &Lease,
    channel: &[u8],
    ours_wait: bool,
    (bound, window_ms): (Duration, Option<u64>),
) -> Result<bool, LockError> {
    // The queue is left alone, as when ours wait: the lock stays with the ring's connections.
    let deleted = delete(store, lease, channel, (ours_wait, true), bound).await;
    // Kicked even when not ours any more (it ran out): the ring then hears of a free lock.
    let window = window_ms.unwrap_or(token::FENCE_RETENTION_MS);
    store.freed_quietly(&lease.redis_key, window);
    deleted
}

/// The handover of our `lease` to a waiter's fresh token `to`, for `ttl`.
pub fn hand_over<'a>(
    lease: &'a Lease,
    to: &'a str,
    ttl: Duration,
    upkeep: FenceUpkeep,
) -> HandOver<'a> {
    HandOver {
        lock_key: &lease.redis_key,
        token: &lease.token,
        fence: lease.fence,
        to,
        ttl,
        upkeep,
    }
}

/// What a handover of `lease` sent now for a lock of `ttl`, within `bound`, does for the
/// fence counter (see `KeptFences::upkeep`).
pub fn upkeep(
    store: &Store,
    lease: &Lease,
    ttl: Duration,
    window_ms: Option<u64>,
    bound: Duration,
) -> FenceUpkeep {
    let fence_key = keys::fence_key(&lease.redis_key);
    (store.kept_fences()).upkeep(&fence_key, ttl, window_ms, bound)
}

/// Sends again a handover whose waiter already started on our lease (the JS-thread
/// connection broke under it, or Redis refused it there): `true` once Redis names the
/// waiter's `token` with the fence it was given. Safe to run twice (see handoff.lua).
pub async fn confirm_lend(
    store: &Arc<Store>,
    lease: &Lease,
    token: &str,
    ttl: Duration,
    (bound, window_ms): (Duration, Option<u64>),
) -> Result<bool, LockError> {
    let upkeep = upkeep(store, lease, ttl, window_ms, bound);
    let fence = store
        .backend()
        .hand_over(&hand_over(lease, token, ttl, upkeep), bound)
        .await?;
    lease.mark_released();
    Ok(fence == Some(lease.fence + 1))
}

/// Hands our lock to the waiter `to` (see handoff.lua).
async fn hand_off(
    store: &Arc<Store>,
    lease: &Lease,
    channel: &[u8],
    to: Reservation,
    (bound, window_ms): (Duration, Option<u64>),
) -> Result<bool, LockError> {
    let (token, ttl) = (token::new_token(), to.ttl());
    // The waiter's validity counts from here: no later than Redis set its TTL.
    let sent = Stamp::now();
    let upkeep = upkeep(store, lease, ttl, window_ms, bound);
    let reply = store
        .backend()
        .hand_over(&hand_over(lease, &token, ttl, upkeep), bound)
        .await;
    let wakes = store.wakes();
    match reply {
        Ok(Some(fence)) => {
            lease.mark_released();
            let granted = Lease::new(
                lease.key.clone(),
                lease.redis_key.clone(),
                token,
                fence,
                sent,
                ttl,
            );
            if let Some(orphan) = wakes.grant(channel, to, granted) {
                // The waiter left meanwhile: the lock goes on as our own release would.
                let _ignored = Box::pin(release(store, &orphan, bound, window_ms)).await;
            }
            Ok(true)
        }
        Ok(None) => {
            // Not ours any more (expired, taken): nothing changed; the waiter tries itself.
            wakes.unreserve(to);
            lease.mark_released();
            Ok(false)
        }
        Err(err) => {
            // Redis may have run it: the waiter's token may hold the lock. Freed if it does;
            // the waiter tries on its own, and our own release is reported as it would be.
            wakes.unreserve(to);
            let orphan = Lease::new(
                lease.key.clone(),
                lease.redis_key.clone(),
                token,
                0,
                sent,
                ttl,
            );
            store.release_orphan(orphan);
            outcome(lease, Err(err))
        }
    }
}

/// Deletes a fair lock if it is still ours, and wakes the first in its line, wherever it
/// waits. Never handed over: a waiter of ours may be behind one of another process.
pub async fn release_fair(
    store: &Arc<Store>,
    lease: &Lease,
    bound: Duration,
) -> Result<bool, LockError> {
    if lease.is_released() {
        return Ok(false);
    }
    let release = Release {
        lock_key: &lease.redis_key,
        token: &lease.token,
        kind: ReleaseKind::Fair,
    };
    outcome(lease, store.backend().release(&release, bound).await)
}

/// What a release's answer, or its lack within the bound, means for `lease`: whether Redis
/// still had our lock. A release left unanswered until the lock ran out counts as done.
pub fn outcome(lease: &Lease, deleted: Result<bool, LockError>) -> Result<bool, LockError> {
    let deleted = match deleted {
        Ok(deleted) => deleted,
        // Redis did not answer before the lock ran out: it is gone either way.
        Err(LockError::Timeout(_)) if lease.remaining().is_zero() => false,
        Err(err) => return Err(err),
    };
    lease.mark_released();
    Ok(deleted)
}
