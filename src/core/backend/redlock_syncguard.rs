//! syncguard's layout on a Redlock: what a quorum of nodes says to its release, extend and
//! lookup by lockId or key, and the fence a quorum's acquisition took written back into each
//! node's record and counter. Every decision on a node is its script's (sg_*.lua); this file
//! only counts (docs/plans/redlock.md, "syncguard's layout").

use super::redlock_detached::Detached;
use super::redlock_store::RedlockStore;
use super::redlock_tally::{answered, is_answer, quorum_error, Tally};
use crate::core::basics::error::LockError;
use crate::core::proto::acquire::{AcquireAttempt, Acquired};
use crate::core::proto::syncguard::{
    ExtendById, ReleaseById, ReleasedById, SyncguardFenceRaise, SyncguardLookup,
};
use std::time::Duration;

/// One node's answer to a lookup: the live record's JSON, or none.
type Lookup = Result<Option<Vec<u8>>, LockError>;

impl RedlockStore {
    /// Released when a quorum released; else expired when a quorum released or found it
    /// expired (each such node deleted it); else another's when a node said so, else not
    /// found. Short of a quorum answering, the quorum error.
    pub(super) async fn syncguard_release(
        &self,
        op: &ReleaseById<'_>,
        bound: Duration,
    ) -> Result<ReleasedById, LockError> {
        self.late().end(op.lock_id);
        let released = |r: &ReleasedById| matches!(r, ReleasedById::Released { .. });
        let frees = || Detached::by_id(op.index_key, op.lock_id);
        let replies = self.on_all(op, bound, released, Some(&frees)).await;
        let answers = self
            .tally()
            .answers(replies.into_iter().flatten().collect())?;
        Ok(release_verdict(&self.tally(), answers))
    }

    /// The expiry a quorum of nodes now has (the quorum-th latest, by each node's clock);
    /// `None` when fewer than a quorum extended.
    pub(super) async fn syncguard_extend(
        &self,
        op: &ExtendById<'_>,
        bound: Duration,
    ) -> Result<Option<i64>, LockError> {
        self.note_ttl(op.ttl);
        let answers = self.answers(op, bound, Option::is_some).await?;
        let expiries: Vec<i64> = answers.into_iter().flatten().collect();
        Ok(quorum_latest(expiries, self.tally().quorum))
    }

    /// The record a quorum holds (the same lockId and fence), as the node with the
    /// quorum-th latest expiry has it; `None` when no record can be on a quorum (counting the
    /// nodes that did not answer as holding it); else the quorum error.
    pub(super) async fn syncguard_read(
        &self,
        op: &SyncguardLookup<'_>,
        bound: Duration,
    ) -> Result<Option<Vec<u8>>, LockError> {
        let tally = self.tally();
        let enough = |seen: &[Option<Lookup>]| {
            let records = seen.iter().flatten().flatten();
            let sides: Vec<Option<Vec<u8>>> = records.map(|r| r.as_deref().map(side)).collect();
            (sides.iter()).any(|a| sides.iter().filter(|b| *b == a).count() >= tally.quorum)
        };
        let replies = self.until(op, bound, enough, None).await;
        read_verdict(&tally, replies.into_iter().flatten().collect())
    }

    /// The fence of a quorum `won` with differing fences, once written into each of those
    /// nodes' records and counters (sg_fence_raise.lua) and a quorum confirmed it.
    pub(super) async fn syncguard_write_back(
        &self,
        op: &AcquireAttempt<'_>,
        won: &[(usize, u64)],
        bound: Duration,
    ) -> Result<u64, LockError> {
        let fence = won.iter().map(|&(_, f)| f).max().unwrap_or(0);
        let raise = SyncguardFenceRaise {
            lock_key: op.lock_key,
            fence_key: op.fence_key,
            lock_id: op.token,
            fence,
        };
        let confirms = |after: &Option<u64>| after.is_some_and(|after| after >= fence);
        (self.written_back(&raise, won, fence, bound, confirms)).await
    }
}

/// The record's expiry a won syncguard attempt reports: the quorum-th latest of the won
/// nodes' (each by its own clock), the lock standing as long as a quorum has it.
pub(super) fn won_expiry(
    replies: &[Option<Result<Acquired, LockError>>],
    quorum: usize,
) -> Option<i64> {
    let expiries = (replies.iter().flatten()).filter_map(|r| match r {
        Ok(Acquired::Won { set_at, .. }) => *set_at,
        _ => None,
    });
    quorum_latest(expiries.collect(), quorum)
}

/// The quorum-th latest of `times`, `None` when there are fewer.
fn quorum_latest(mut times: Vec<i64>, quorum: usize) -> Option<i64> {
    times.sort_unstable_by(|a, b| b.cmp(a));
    times.get(quorum.checked_sub(1)?).copied()
}

/// A release by lockId's outcome by the `answers` of at least a quorum of nodes.
pub(super) fn release_verdict(tally: &Tally, answers: Vec<ReleasedById>) -> ReleasedById {
    let count = |f: fn(&ReleasedById) -> bool| answers.iter().filter(|a| f(a)).count();
    let released = count(|a| matches!(a, ReleasedById::Released { .. }));
    let freed = count(|a| a.freed().is_some());
    let lock_key = || {
        (answers.iter().find_map(ReleasedById::freed))
            .unwrap_or_default()
            .to_vec()
    };
    if released >= tally.quorum {
        return ReleasedById::Released {
            lock_key: lock_key(),
        };
    }
    if freed >= tally.quorum {
        return ReleasedById::Expired {
            lock_key: lock_key(),
        };
    }
    match answers.contains(&ReleasedById::NotOwner) {
        true => ReleasedById::NotOwner,
        false => ReleasedById::NotFound,
    }
}

/// What a lookup's `replies` (every node that replied) say: the record of a quorum, none,
/// or the error (see `RedlockStore::syncguard_read`).
pub(super) fn read_verdict(tally: &Tally, replies: Vec<Lookup>) -> Lookup {
    let heard = replies.iter().filter(|r| answered(r)).count();
    let mut failed = None;
    let mut records: Vec<Option<Vec<u8>>> = Vec::with_capacity(replies.len());
    for reply in replies {
        match reply {
            Ok(record) => records.push(record),
            Err(err) if failed.is_none() && is_answer(&err) => failed = Some(err),
            Err(_) => {}
        }
    }
    let unanswered = tally.nodes.saturating_sub(records.len());
    let held: Vec<(Vec<u8>, &Vec<u8>)> = (records.iter().flatten())
        .map(|record| (side(record), record))
        .collect();
    let count = |of: &[u8]| held.iter().filter(|(other, _)| other == of).count();
    let best = held.iter().max_by_key(|(of, _)| count(of));
    let best_count = best.map_or(0, |(of, _)| count(of));
    if let Some((of, _)) = best.filter(|_| best_count >= tally.quorum) {
        // The quorum-th latest expiry among them: the lock stands that long on a quorum.
        let mut on_side: Vec<&Vec<u8>> = (held.iter())
            .filter(|(other, _)| other == of)
            .map(|&(_, record)| record)
            .collect();
        on_side.sort_unstable_by_key(|record| std::cmp::Reverse(expires_at_ms(record)));
        return Ok(on_side.get(tally.quorum - 1).map(|record| record.to_vec()));
    }
    // No record can be on a quorum, even if every silent node held the likeliest.
    if best_count + unanswered < tally.quorum {
        return Ok(None);
    }
    tally.heard(heard)?;
    Err(failed.unwrap_or_else(|| quorum_error(best_count, tally.nodes, tally.quorum, "agreed")))
}

/// What two nodes' records must share to be the same lock: its lockId and fence (the
/// expiries differ, each by its node's clock). A record that names neither is itself.
fn side(record: &[u8]) -> Vec<u8> {
    match (field(record, "lockId"), field(record, "fence")) {
        (Some(id), Some(fence)) => [id, b"/", fence].concat(),
        _ => record.to_vec(),
    }
}

/// The record's expiry (server ms), 0 when it names none.
fn expires_at_ms(record: &[u8]) -> u64 {
    let at = field_start(record, "expiresAtMs").unwrap_or(record.len());
    (record.get(at..).unwrap_or_default().iter())
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |n, &b| {
            n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
        })
}

/// A string field's value in a record as cjson writes it: `"name":"value"`. The pattern
/// cannot start inside another string, where every `"` is escaped.
fn field<'a>(record: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let at = field_start(record, name)?;
    let rest = record.get(at..)?.strip_prefix(b"\"")?;
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    rest.get(..end)
}

/// Where the value of `name` starts in a record as cjson writes it.
fn field_start(record: &[u8], name: &str) -> Option<usize> {
    let pattern = format!("\"{name}\":");
    let pattern = pattern.as_bytes();
    (record.windows(pattern.len()))
        .position(|w| w == pattern)
        .map(|at| at + pattern.len())
}

#[cfg(test)]
#[path = "redlock_syncguard_tests.rs"]
mod tests;
