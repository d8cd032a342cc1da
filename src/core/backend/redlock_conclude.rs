//! How a Redlock acquire attempt ends once its replies are read, whoever read them: the
//! runtime's gather, or (to come, docs/plans/redlock-fast.md) a call that read them one by
//! one. `acquire_verdict` decides; this writes what the decision needs on the nodes (the
//! fence written back, or what the attempt set undone) and names the outcome.

use super::link::Replay;
use super::redlock_detached::late_win;
use super::redlock_store::RedlockStore;
use super::redlock_syncguard::won_expiry;
use super::redlock_tally::{
    acquire_verdict, answered, finish, ignore, is_answer, quorum_error, validity_left, Stragglers,
    Tally, Verdict,
};
use crate::core::basics::error::LockError;
use crate::core::proto::acquire::{AcquireAttempt, Acquired, Layout};
use crate::core::proto::Request;
use futures_util::FutureExt;
use redis::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Each node's reply to an attempt, at its index; `None` for one not waited for.
type Replies = Vec<Option<Result<Acquired, LockError>>>;

impl RedlockStore {
    /// What the attempt `op`, first sent at `started`, comes to by the nodes' `replies`. A
    /// win is ours only with validity left once its fence is settled; anything else frees
    /// what the attempt may have set (every node but those that said held). The write-back
    /// and the undo are bounded by `bound`.
    pub async fn conclude(
        &self,
        op: &AcquireAttempt<'_>,
        replies: Replies,
        started: Instant,
        bound: Duration,
    ) -> Result<Acquired, LockError> {
        let tally = self.tally();
        let won: Vec<(usize, u64)> = (replies.iter().enumerate())
            .filter_map(|(i, reply)| match reply {
                Some(Ok(Acquired::Won { fence, .. })) => Some((i, *fence)),
                _ => None,
            })
            .collect();
        let past_validity = || {
            let ms = started.elapsed().as_millis();
            LockError::Timeout(format!(
                "a quorum of the Redlock nodes took {ms} ms, past the lock's validity (ttl {} ms less the clock drift)",
                op.ttl.as_millis()
            ))
        };
        // syncguard's record states its expiry; the other layouts' replies do not.
        let set_at = match op.layout {
            Layout::Syncguard { .. } => won_expiry(&replies, tally.quorum),
            _ => None,
        };
        let failure = match acquire_verdict(&tally, &replies, started, Instant::now(), op.ttl) {
            Verdict::Won { fence } => return Ok(Acquired::Won { fence, set_at }),
            Verdict::Raise => match self.raised(op, &won, started, bound).await {
                Some(Ok(fence)) => return Ok(Acquired::Won { fence, set_at }),
                Some(Err(err)) => Err(err),
                None => Err(past_validity()),
            },
            // A quorum won, but not within the validity: nothing held; slow nodes, not a
            // holder.
            Verdict::Failed if won.len() >= tally.quorum => Err(past_validity()),
            // A quorum only with nodes that were still silent at the validity's end (the
            // quorum path stops waiting for them there): slow nodes, not unreachable ones,
            // as the runtime, which waits longer, reports once they answer late.
            Verdict::Failed if silent_past_validity(&tally, &replies, started, op.ttl) => {
                Err(LockError::Timeout(format!(
                    "only {} of {} Redlock nodes answered within the lock's validity (ttl {} ms less the clock drift); a quorum is {}",
                    heard(&replies),
                    tally.nodes,
                    op.ttl.as_millis(),
                    tally.quorum
                )))
            }
            Verdict::Held | Verdict::Failed | Verdict::Pending => lost(&tally, &replies, won.len()),
        };
        self.undo(op, &replies, bound).await;
        failure
    }

    /// Lets the attempt's `stragglers` (on the nodes `left`) finish where nobody waits. One
    /// that answers once the token's lock is over (the attempt undone, or released since) ran
    /// after the release or undo went out, maybe on another connection: `free`
    /// (`AcquireAttempt::late_free`) is sent to it again, now behind it. One that answers
    /// before is kept while we hold (the release reaches it); one past its bound is freed by
    /// its own call (`RedisStore::acquire_owned`), as on one server. One the pool drops
    /// (redlock_pool.rs) once the lock is over may have run there after its release: the
    /// free is owed to its node (redlock_owed.rs). Dropped while the lock stands, the
    /// release or undo still to come goes after it on its node's connection, as for one
    /// that answers before.
    pub(super) fn finish_attempt<F>(
        &self,
        op: &AcquireAttempt<'_>,
        (stragglers, left): (Stragglers<F>, Vec<usize>),
        free: Option<Arc<Request>>,
        bound: Duration,
    ) where
        F: Future<Output = Result<Value, LockError>> + Send + 'static,
    {
        // Checked first: most attempts leave no straggler, and `late_win` copies the key.
        if stragglers.is_empty() {
            finish(self.stragglers(), stragglers, left, ignore);
            return;
        }
        let (Some(free), Some(owed)) = (free, late_win(op)) else {
            finish(self.stragglers(), stragglers, left, ignore);
            return;
        };
        // Watched before the conclusion, whose undo marks it over.
        let watch = self.late().watch(op.token);
        let stores = self.stores();
        let (debtors, owed) = (self.debtors().clone(), Arc::new(owed));
        let terms = (self.release_life(), bound);
        finish(
            self.stragglers(),
            stragglers,
            left,
            move |i, reply: Option<Result<Value, LockError>>| match (reply, watch.over()) {
                (Some(Ok(_)), true) => (stores.get(i))
                    .map(|store| store.send_owned(&free, bound, Replay::Safe).map(drop)),
                (None, true) => {
                    debtors.owe(i, &owed, terms.0, terms.1);
                    None
                }
                _ => None,
            },
        );
    }

    /// The fence of a quorum `won` with differing fences, once written back within the
    /// validity left; else why a quorum did not confirm it with validity left (nodes down,
    /// or one said NOFENCE); `None`: the validity ran out on the way.
    async fn raised(
        &self,
        op: &AcquireAttempt<'_>,
        won: &[(usize, u64)],
        started: Instant,
        bound: Duration,
    ) -> Option<Result<u64, LockError>> {
        let left = |now: Instant| validity_left(op.ttl, started, now);
        let room = left(Instant::now())?;
        let window = Some(op.fence_retention_ms);
        let bound = bound.min(room);
        let written = match op.layout {
            // syncguard's fence is in its record too.
            Layout::Syncguard { .. } => self.syncguard_write_back(op, won, bound).await,
            _ => (self.write_back(op.fence_key, won, op.ttl, window, bound)).await,
        };
        match written {
            Ok(fence) if left(Instant::now()).is_some() => Some(Ok(fence)),
            // Cut short by the validity itself (the write-back is bounded by it), it is time.
            Err(err) if !err.is_infrastructure() || left(Instant::now()).is_some() => {
                Some(Err(err))
            }
            _ => None,
        }
    }
}

fn heard(replies: &[Option<Result<Acquired, LockError>>]) -> usize {
    replies.iter().flatten().filter(|r| answered(r)).count()
}

/// Whether fewer than a quorum answered, past the validity, and the nodes that timed out
/// would have made one.
fn silent_past_validity(
    tally: &Tally,
    replies: &[Option<Result<Acquired, LockError>>],
    started: Instant,
    ttl: Duration,
) -> bool {
    let silent = (replies.iter().flatten())
        .filter(|r| matches!(r, Err(LockError::Timeout(_))))
        .count();
    let heard = heard(replies);
    heard < tally.quorum
        && heard + silent >= tally.quorum
        && validity_left(ttl, started, Instant::now()).is_none()
}

/// Why an attempt that no quorum won (`won` nodes did) failed, as its `replies` tell: the
/// quorum error short of a quorum answering; a holder, with the shortest TTL a node told;
/// else the first error a node answered about the lock, else a node's refusal; never an
/// error that is no answer (that is the quorum's).
fn lost(
    tally: &Tally,
    replies: &[Option<Result<Acquired, LockError>>],
    won: usize,
) -> Result<Acquired, LockError> {
    tally
        .heard(heard(replies))
        .map_err(|err| with_quarantined(err, replies))?;
    let held = replies.iter().flatten().filter_map(|r| match r {
        Ok(Acquired::Held { ttl }) => Some(*ttl),
        _ => None,
    });
    let held: Vec<Option<Duration>> = held.collect();
    if !held.is_empty() {
        let ttl = held.into_iter().flatten().min();
        return Ok(Acquired::Held { ttl });
    }
    let mut errors = replies.iter().flatten().filter_map(|r| r.as_ref().err());
    if let Some(err) = errors.find(|err| is_answer(err)) {
        return Err(err.clone());
    }
    let mut oks = replies.iter().flatten().filter_map(|r| r.as_ref().ok());
    match oks.any(|r| !matches!(r, Acquired::Won { .. })) {
        true => Ok(Acquired::Refused),
        false => Err(quorum_error(won, tally.nodes, tally.quorum, "agreed")),
    }
}

/// The quorum error `err`, saying how many nodes were in their restart quarantine, if any:
/// those did not answer, by design, and the user should know the quorum lacked them for that.
fn with_quarantined(err: LockError, replies: &[Option<Result<Acquired, LockError>>]) -> LockError {
    let quarantined = (replies.iter().flatten())
        .filter(|r| matches!(r, Err(LockError::Quarantined { .. })))
        .count();
    match err {
        LockError::Connection(text) if quarantined > 0 => LockError::Connection(format!(
            "{text}; {quarantined} in restart quarantine (restartQuarantineMs)"
        )),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE: Tally = Tally {
        nodes: 5,
        quorum: 3,
    };

    fn won() -> Option<Result<Acquired, LockError>> {
        Some(Ok(Acquired::Won {
            fence: 1,
            set_at: None,
        }))
    }

    fn err(err: LockError) -> Option<Result<Acquired, LockError>> {
        Some(Err(err))
    }

    #[test]
    fn a_node_in_quarantine_is_not_granted_and_named_in_the_quorum_error() {
        let quarantined = || {
            err(LockError::Quarantined {
                restarted_ms_ago: 5,
                quarantine_ms: 1500,
            })
        };
        let down = || err(LockError::Connection("refused".into()));
        // 2 won, the node in quarantine and 2 down: not a win, not held; the quorum error.
        let short = [won(), won(), quarantined(), down(), down()];
        let Err(LockError::Connection(text)) = lost(&FIVE, &short, 2) else {
            panic!("not the quorum error");
        };
        assert_eq!(
            text,
            "only 2 of 5 Redlock nodes answered; a quorum is 3; 1 in restart quarantine (restartQuarantineMs)"
        );
        // The others answered held: held, the node in quarantine counted in neither.
        let held = || Some(Ok(Acquired::Held { ttl: None }));
        let classic = [held(), held(), quarantined(), won(), won()];
        assert_eq!(lost(&FIVE, &classic, 2), Ok(Acquired::Held { ttl: None }));
        // No node in quarantine: the quorum error as before.
        let plain = [won(), won(), down(), down(), down()];
        assert_eq!(
            lost(&FIVE, &plain, 2),
            Err(quorum_error(2, 5, 3, "answered"))
        );
    }

    #[test]
    fn silent_nodes_past_the_validity_are_slow_not_unreachable() {
        let ttl = Duration::from_millis(40);
        let long_ago = Instant::now() - Duration::from_millis(100);
        let silent = || err(LockError::no_reply(ttl));
        let refused = || err(LockError::Connection("refused".into()));
        let slow = [won(), won(), silent(), silent(), silent()];
        assert!(silent_past_validity(&FIVE, &slow, long_ago, ttl));
        // Still within the validity: not yet the validity's doing.
        assert!(!silent_past_validity(
            &FIVE,
            &slow,
            Instant::now(),
            ttl * 100
        ));
        // Refused nodes are the quorum error, past the validity or not.
        let down = [won(), won(), refused(), refused(), refused()];
        assert!(!silent_past_validity(&FIVE, &down, long_ago, ttl));
        // One silent node would have made the quorum: it is the validity's doing.
        let one_short = [won(), won(), refused(), refused(), silent()];
        assert!(silent_past_validity(&FIVE, &one_short, long_ago, ttl));
        // A quorum heard: the verdict is theirs.
        let heard = [won(), won(), won(), silent(), silent()];
        assert!(!silent_past_validity(&FIVE, &heard, long_ago, ttl));
    }
}
