//! Counting a Redlock's nodes: who answered, whether a quorum can still be reached, the
//! error naming how many answered when it cannot, and what an attempt's (or a release's)
//! replies so far decide. Nothing here sends anything.

use super::redlock_pool::LatePool;
use crate::core::basics::error::LockError;
use crate::core::basics::{background, clock};
use crate::core::proto::acquire::Acquired;
use futures_util::future::{join, ready, Join, Ready};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;
use tokio::time::Instant;

/// N nodes and the quorum of them (N/2 + 1).
pub struct Tally {
    pub nodes: usize,
    pub quorum: usize,
}

/// Whether a node answered: a reply, or an error Redis itself sent about the lock. Not
/// reached, no reply in time, refused credentials or ACL, or a server not ready to serve
/// (`LockError::Unready`): no answer (it says nothing of who holds a lock).
pub fn answered<T>(reply: &Result<T, LockError>) -> bool {
    match reply {
        Ok(_) => true,
        Err(err) => is_answer(err),
    }
}

/// Whether an error is a node's answer about the lock (e.g. WRONGTYPE, NOFENCE), not one
/// about the server's own state (`LockError::Unready`, decided where the reply was read).
pub fn is_answer(err: &LockError) -> bool {
    !err.is_infrastructure() && !matches!(err, LockError::Unready(_))
}

/// The error of a call that fewer than a quorum of nodes `did` (answered, confirmed):
/// infrastructure, never a lock held by someone.
pub fn quorum_error(count: usize, nodes: usize, quorum: usize, did: &str) -> LockError {
    LockError::Connection(format!(
        "only {count} of {nodes} Redlock nodes {did}; a quorum is {quorum}"
    ))
}

impl Tally {
    /// The quorum error, when only `heard` nodes answered.
    pub fn heard(&self, heard: usize) -> Result<(), LockError> {
        match heard >= self.quorum {
            true => Ok(()),
            false => Err(quorum_error(heard, self.nodes, self.quorum, "answered")),
        }
    }

    /// The nodes' answers, once a quorum answered; else the error a node sent, or the
    /// quorum error.
    pub fn answers<T>(&self, replies: Vec<Result<T, LockError>>) -> Result<Vec<T>, LockError> {
        let heard = replies.iter().filter(|r| answered(r)).count();
        let mut answers = Vec::with_capacity(replies.len());
        let mut failed = None;
        for reply in replies {
            match reply {
                Ok(answer) => answers.push(answer),
                Err(err) if failed.is_none() && is_answer(&err) => failed = Some(err),
                Err(_) => {}
            }
        }
        if answers.len() >= self.quorum {
            return Ok(answers);
        }
        self.heard(heard)?;
        Err(failed
            .unwrap_or_else(|| quorum_error(answers.len(), self.nodes, self.quorum, "agreed")))
    }

    /// Whether a release freed the lock, by the replies of the nodes it waited for: a quorum
    /// said released; else the quorum error (or a node's own), when fewer answered.
    pub fn released(&self, replies: Vec<Result<bool, LockError>>) -> Result<bool, LockError> {
        let answers = self.answers(replies)?;
        Ok(answers.into_iter().filter(|&yes| yes).count() >= self.quorum)
    }
}

/// Whether an attempt's failure is known from the replies `seen` so far (`None`: still
/// pending): a quorum answered and the pending can no longer make one win. Short of that
/// (or a win, and its grace, see `gather`), every node is waited for, so the quorum error
/// counts them all.
pub fn failed(tally: &Tally, seen: &[Option<Result<Acquired, LockError>>]) -> bool {
    let won = (seen.iter().flatten())
        .filter(|r| matches!(r, Ok(Acquired::Won { .. })))
        .count();
    let heard = seen.iter().flatten().filter(|r| answered(r)).count();
    let pending = seen.iter().filter(|r| r.is_none()).count();
    heard >= tally.quorum && won + pending < tally.quorum
}

/// Whether an attempt won on a quorum of the replies so far.
pub fn won(tally: &Tally, seen: &[Option<Result<Acquired, LockError>>]) -> bool {
    fences(seen).count() >= tally.quorum
}

/// The fences of the nodes that won so far.
fn fences(seen: &[Option<Result<Acquired, LockError>>]) -> impl Iterator<Item = u64> + '_ {
    seen.iter().flatten().filter_map(|r| match r {
        Ok(Acquired::Won { fence, .. }) => Some(*fence),
        _ => None,
    })
}

/// Where an acquire attempt stands by its replies so far. One decision for whoever reads
/// the replies (the runtime once its gather ends, a caller reading them one by one), so
/// that `RedlockStore::conclude` ends the attempt the same way for both.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A pending node can still change the outcome, or how many the quorum error counts
    /// (short of a quorum answering, every node is waited for, as in `failed`).
    Pending,
    /// A quorum won, on one fence, with validity left: ours.
    Won { fence: u64 },
    /// A quorum won with validity left, but their fences differ: ours only once the highest
    /// is written back to them (`RedlockStore::write_back`), so a later quorum draws more.
    Raise,
    /// Lost, and a node that answered has a holder.
    Held,
    /// Lost with no holder: a quorum won past the validity, fewer than a quorum answered,
    /// or a node's own error (or refusal) among a quorum's answers.
    Failed,
}

/// The verdict on an attempt `started` at that instant (its first send), for a lock of
/// `ttl`, at `now`, by `seen` so far (`None`: pending; a timeout is an error, no answer).
pub fn acquire_verdict(
    tally: &Tally,
    seen: &[Option<Result<Acquired, LockError>>],
    started: std::time::Instant,
    now: std::time::Instant,
    ttl: Duration,
) -> Verdict {
    let (mut won, mut low, mut high) = (0, u64::MAX, 0);
    for fence in fences(seen) {
        (won, low, high) = (won + 1, low.min(fence), high.max(fence));
    }
    if won >= tally.quorum {
        return match validity_left(ttl, started, now) {
            None => Verdict::Failed,
            Some(_) if low == high => Verdict::Won { fence: high },
            Some(_) => Verdict::Raise,
        };
    }
    if seen.iter().any(Option::is_none) && !failed(tally, seen) {
        return Verdict::Pending;
    }
    let heard = seen.iter().flatten().filter(|r| answered(r)).count();
    let held = (seen.iter().flatten()).any(|r| matches!(r, Ok(Acquired::Held { .. })));
    match heard >= tally.quorum && held {
        true => Verdict::Held,
        false => Verdict::Failed,
    }
}

/// What is left of a lock's validity at `now`, for an attempt `started` then: the TTL less
/// the drift (`clock::validity`, as every lease counts it) less the time the nodes took.
pub fn validity_left(
    ttl: Duration,
    started: std::time::Instant,
    now: std::time::Instant,
) -> Option<Duration> {
    (clock::validity(ttl).checked_sub(now.saturating_duration_since(started)))
        .filter(|left| !left.is_zero())
}

/// A release's outcome by the nodes' replies so far (`None`: pending): released as soon as
/// a quorum released, else once every node replied, as `Tally::released` reads them.
pub fn release_verdict(
    tally: &Tally,
    seen: &[Option<Result<bool, LockError>>],
) -> Option<Result<bool, LockError>> {
    let released = (seen.iter().flatten()).filter(|r| matches!(r, Ok(true)));
    if released.count() >= tally.quorum {
        return Some(Ok(true));
    }
    if seen.iter().any(Option::is_none) {
        return None;
    }
    Some(tally.released(seen.iter().flatten().cloned().collect()))
}

/// How long the stragglers still get once enough nodes replied: as long again as those
/// took, at least `GRACE_MIN`. A node that answers normally lands within it (and holds the
/// lock too, so more may restart empty without a second holder); one that is down, whose
/// connection retries refusals for a while, does not make every call wait for it.
pub const GRACE_MIN: Duration = Duration::from_millis(10);

/// Runs every call at once, each reply at its node's index, until `settled` says the replies
/// so far decide, or the grace after `enough` of them ran out, or all have replied. The
/// calls still pending then are dropped (`None`).
pub async fn gather<F, T>(
    calls: impl IntoIterator<Item = F>,
    settled: impl Fn(&[Option<T>]) -> bool,
    enough: impl Fn(&[Option<T>]) -> bool,
) -> Vec<Option<T>>
where
    F: Future<Output = T>,
{
    gather_within(calls, settled, enough, Duration::MAX).await
}

/// The grace once enough replied after `elapsed`, of a call that has `room` in all (a lock's
/// validity): as long again, at least `GRACE_MIN`, but never more than half the room left,
/// so that a silent node cannot spend the validity of a lock a quorum already won.
pub fn grace(elapsed: Duration, room: Duration) -> Duration {
    (elapsed.max(GRACE_MIN)).min(room.saturating_sub(elapsed) / 2)
}

/// `gather`, its grace capped by `grace` within `room`.
pub async fn gather_within<F, T>(
    calls: impl IntoIterator<Item = F>,
    settled: impl Fn(&[Option<T>]) -> bool,
    enough: impl Fn(&[Option<T>]) -> bool,
    room: Duration,
) -> Vec<Option<T>>
where
    F: Future<Output = T>,
{
    gather_read(calls, |reply| reply, settled, enough, room)
        .await
        .0
}

/// The calls a gather stopped waiting for, each with its node's index.
pub type Stragglers<F> = FuturesUnordered<Join<Ready<usize>, F>>;

/// `gather_within`, each reply `read` as it comes, and the calls still pending at the end
/// handed back rather than dropped: a request started on a node (its connection opening,
/// say) may not be written yet, and a write (a release, an extend) dropped then never
/// reaches that node. The caller lets them finish where nobody waits (`finish`).
pub async fn gather_read<F, R, T>(
    calls: impl IntoIterator<Item = F>,
    read: impl Fn(R) -> T,
    settled: impl Fn(&[Option<T>]) -> bool,
    enough: impl Fn(&[Option<T>]) -> bool,
    room: Duration,
) -> (Vec<Option<T>>, Stragglers<F>)
where
    F: Future<Output = R>,
{
    let started = Instant::now();
    let mut pending: Stragglers<F> = (calls.into_iter().enumerate())
        .map(|(i, call)| join(ready(i), call))
        .collect();
    let mut replies: Vec<Option<T>> = (0..pending.len()).map(|_| None).collect();
    // One timer for the grace, armed once (not one per straggler's reply), polled only
    // once armed.
    let grace = tokio::time::sleep_until(started);
    tokio::pin!(grace);
    let mut graced = false;
    loop {
        let next = tokio::select! {
            biased;
            next = pending.next() => next,
            () = &mut grace, if graced => break,
        };
        let Some((i, reply)) = next else { break };
        if let Some(slot) = replies.get_mut(i) {
            *slot = Some(read(reply));
        }
        if settled(&replies) {
            break;
        }
        if !graced && enough(&replies) {
            let now = Instant::now();
            grace
                .as_mut()
                .reset(now + self::grace(now.duration_since(started), room));
            graced = true;
        }
    }
    (replies, pending)
}

/// Lets `stragglers` run to their end (each call is bounded by its own timeout) in `pool`,
/// each late reply given to `late` with its node's index. What `late` answers is polled
/// once at once, so that it is on its node's connection before anything sent after this
/// reply was read, then left to a task of its own. Nothing is left when no straggler is
/// (the usual case: every node answered within the grace). The pool may drop them before
/// their end (redlock_pool.rs): then `late` is told `None` for each node of `left` (those
/// `stragglers` were called on, `unheard`) that had not replied, so that what such a node
/// may keep is owed like what a node past its bound keeps.
pub(super) fn finish<F, R, G, L>(
    pool: &LatePool,
    stragglers: Stragglers<F>,
    left: Vec<usize>,
    late: L,
) where
    F: Future<Output = R> + Send + 'static,
    R: Send + 'static,
    G: Future<Output = ()> + Send + 'static,
    L: Fn(usize, Option<R>) -> Option<G> + Send + 'static,
{
    if stragglers.is_empty() {
        return;
    }
    let mut out = Out {
        left,
        late,
        replies: PhantomData,
    };
    let mut stragglers = stragglers;
    pool.run(Box::pin(async move {
        while let Some((i, reply)) = stragglers.next().await {
            out.left.retain(|&node| node != i);
            if let Some(work) = (out.late)(i, Some(reply)) {
                let mut work = Box::pin(work);
                if futures_util::poll!(&mut work).is_pending() {
                    background::spawn(work);
                }
            }
        }
    }));
}

/// The nodes a `finish` still waits for, told to its `late` as dropped when it is dropped
/// before they replied.
struct Out<L, R, G>
where
    L: Fn(usize, Option<R>) -> Option<G>,
    G: Future<Output = ()> + Send + 'static,
{
    left: Vec<usize>,
    late: L,
    replies: PhantomData<fn(R) -> G>,
}

impl<L, R, G> Drop for Out<L, R, G>
where
    L: Fn(usize, Option<R>) -> Option<G>,
    G: Future<Output = ()> + Send + 'static,
{
    fn drop(&mut self) {
        for node in std::mem::take(&mut self.left) {
            if let Some(work) = (self.late)(node, None) {
                background::spawn(work);
            }
        }
    }
}

/// The nodes of `replies` that had not replied (each a straggler, `gather_read`).
pub fn unheard<T>(replies: &[Option<T>]) -> Vec<usize> {
    (replies.iter().enumerate())
        .filter(|(_, reply)| reply.is_none())
        .map(|(i, _)| i)
        .collect()
}

/// For `finish`: nothing to do with a late reply, nor with a dropped straggler.
pub fn ignore<R>(_node: usize, _reply: Option<R>) -> Option<std::future::Ready<()>> {
    None
}

#[cfg(test)]
#[path = "redlock_tally_tests.rs"]
mod tests;
