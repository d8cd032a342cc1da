//! Releasing a lock. When waiters of this process want it, it goes straight to the first of
//! them in one script (`Locker::hand_off`): it never becomes free, nobody races for it, and
//! the waiter needs no request of its own. Otherwise it is deleted, and the release wakes
//! one waiter: one of ours, else the connection that queued first (see wake.rs). A fair
//! lock is only ever deleted, waking the first waiter in its line.

use super::scripts;
use super::store::Store;
use crate::core::backend::link::Replay;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::resp;
use crate::core::basics::token;
use crate::core::wait::wake::{self, Reservation};
use std::sync::Arc;
use std::time::Duration;

/// Deletes (or hands over) the lock if it is still ours, within `bound`. Releasing twice,
/// or after expiry, is a no-op; the answer says whether Redis still had our lock.
pub async fn release(
    store: &Arc<Store>,
    lease: &Lease,
    bound: Duration,
) -> Result<bool, LockError> {
    if lease.is_released() {
        return Ok(false);
    }
    let channel = wake::channel(&lease.redis_key);
    if let Some(to) = store.wakes().reserve(&channel) {
        return hand_off(store, lease, &channel, to, bound).await;
    }
    // Waiters of our own that are already trying go first, woken here; else the queue decides.
    let ours_wait = store.wakes().waiters_at_release(&lease.redis_key);
    let mut invocation = scripts::RELEASE_WAKE.key(&lease.redis_key);
    invocation
        .key(wake::queue_key(&lease.redis_key))
        .arg(&lease.token)
        .arg(&channel)
        .arg(if ours_wait { "1" } else { "0" });
    let reply = store.eval(&invocation, bound, Replay::Safe).await;
    let deleted = outcome(lease, reply)?;
    if deleted && ours_wait {
        store.wakes().wake_local(&channel);
    }
    Ok(deleted)
}

fn handoff_invocation(
    lease: &Lease,
    token: &str,
    ttl: Duration,
) -> redis::ScriptInvocation<'static> {
    let mut invocation = scripts::HANDOFF.key(&lease.redis_key);
    invocation
        .key(keys::fence_key(&lease.redis_key))
        .arg(&lease.token)
        .arg(token)
        .arg(ttl.as_millis() as u64)
        .arg(lease.fence);
    invocation
}

/// Sends again a handover whose waiter already started on our lease (the JS-thread
/// connection broke under it, or Redis refused it there): `true` once Redis names the
/// waiter's `token` with the fence it was given. Safe to run twice (see handoff.lua).
pub async fn confirm_lend(
    store: &Arc<Store>,
    lease: &Lease,
    token: &str,
    ttl: Duration,
    bound: Duration,
) -> Result<bool, LockError> {
    let invocation = handoff_invocation(lease, token, ttl);
    let fence: i64 = store.eval(&invocation, bound, Replay::Safe).await?;
    lease.mark_released();
    Ok(fence > 0 && fence as u64 == lease.fence + 1)
}

/// Hands our lock to the waiter `to` (see handoff.lua).
async fn hand_off(
    store: &Arc<Store>,
    lease: &Lease,
    channel: &[u8],
    to: Reservation,
    bound: Duration,
) -> Result<bool, LockError> {
    let (token, ttl) = (token::new_token(), to.ttl());
    let invocation = handoff_invocation(lease, &token, ttl);
    // The waiter's validity counts from here: no later than Redis set its TTL.
    let sent = Stamp::now();
    let reply: Result<i64, LockError> = store.eval(&invocation, bound, Replay::Safe).await;
    let wakes = store.wakes();
    match reply {
        Ok(fence) if fence > 0 => {
            lease.mark_released();
            let granted = Lease::new(
                lease.key.clone(),
                lease.redis_key.clone(),
                token,
                fence as u64,
                sent,
                ttl,
            );
            if let Some(orphan) = wakes.grant(channel, to, granted) {
                // The waiter left meanwhile: the lock goes on as our own release would.
                let _ignored = Box::pin(release(store, &orphan, bound)).await;
            }
            Ok(true)
        }
        Ok(_) => {
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

/// The release script of a fair lock for `token` (see release_fair.lua).
pub fn fair_invocation(redis_key: &[u8], token: &str) -> redis::ScriptInvocation<'static> {
    let mut invocation = scripts::RELEASE_FAIR.key(redis_key);
    invocation
        .key(wake::line_key(redis_key))
        .key(wake::alive_key(redis_key))
        .arg(token)
        .arg(wake::channel(redis_key));
    invocation
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
    let invocation = fair_invocation(&lease.redis_key, &lease.token);
    let reply = store.eval(&invocation, bound, Replay::Safe).await;
    outcome(lease, reply)
}

/// The reply to a release script, or its lack within the bound: whether Redis still had our
/// lock. A release left unanswered until the lock ran out counts as done.
pub fn outcome(lease: &Lease, reply: Result<redis::Value, LockError>) -> Result<bool, LockError> {
    let deleted: i64 = match reply.and_then(resp::typed) {
        Ok(deleted) => deleted,
        // Redis did not answer before the lock ran out: it is gone either way.
        Err(LockError::Timeout(_)) if lease.remaining().is_zero() => 0,
        Err(err) => return Err(err),
    };
    lease.mark_released();
    Ok(deleted == 1)
}
