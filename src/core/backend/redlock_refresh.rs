//! The watchdog's refresh over a Redlock: one batch to every node, each lock's verdict at
//! the quorum. The nodes left behind once a quorum answered are not dropped: their batch
//! may not be on their connection yet (one reopening, say), and a refresh dropped then
//! never reaches the node. They go on where nobody waits (for half their bound), and what
//! they answer is filed as any answer is (`LateBook::heard_refresh`): a node that said a lock is not ours counts
//! against it in the rounds where it is slow again, rather than as unknown, so that a lock
//! gone from a quorum is told lost then, not only at its deadline.
//!
//! A late "refreshed" decides nothing: it vouches for a TTL counted from its own round's
//! send, earlier than the next round's, whose deadline the watchdog counts from its own.

use super::lock_store::LockStore;
use super::redlock_store::RedlockStore;
use super::redlock_tally::{gather_read, Stragglers};
use crate::core::proto::refresh::RefreshBatch;
use futures_util::StreamExt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// One node's answers to a batch, one per lock; `None` for a node not waited for.
type PerNode = Vec<Option<Vec<Option<bool>>>>;

impl RedlockStore {
    /// Per lock: refreshed when a quorum says so, lost when a quorum can no longer say so,
    /// else no answer.
    pub(super) async fn refresh_on_quorum(
        &self,
        batch: &RefreshBatch,
        bound: Duration,
    ) -> Vec<Option<bool>> {
        // The stragglers are dropped at half the bound, before their link's own timeout: a
        // timeout discards a node's connection, which puts every lock of the Redlock in
        // doubt (`NodeListener`), and a paused node would do so at each round for the
        // watchdog's sake alone. By then a reopening connection has carried the batch, or
        // the node is silent and the batch is as good as lost.
        let cutoff = tokio::time::Instant::now() + bound / 2;
        // Owned by the stragglers' task, once they are left to it.
        let owned = Arc::new(batch.clone());
        let calls = self.stores().into_iter().map(|store| {
            let batch = owned.clone();
            async move { store.refresh(&batch, bound).await }
        });
        let quorum = self.tally().quorum;
        let (per_node, mut stragglers) = gather_refresh(calls, quorum, batch.len(), bound).await;
        let late = self.late().clone();
        for (node, answers) in per_node.iter().enumerate() {
            if let Some(answers) = answers {
                late.heard_refresh(node, batch.tokens(), answers);
            }
        }
        let verdicts = verdicts(
            quorum,
            batch,
            &per_node,
            self.late().refusing(batch.tokens()),
        );
        for (token, verdict) in batch.tokens().zip(&verdicts) {
            if *verdict == Some(false) {
                late.forget_refusals(token);
            }
        }
        if !stragglers.is_empty() {
            // On the store's straggler task, as every other call's (redlock_pool.rs).
            self.stragglers().run(Box::pin(async move {
                let filed = async {
                    while let Some((node, answers)) = stragglers.next().await {
                        late.heard_refresh(node, owned.tokens(), &answers);
                    }
                };
                let _dropped = tokio::time::timeout_at(cutoff, filed).await;
            }));
        }
        verdicts
    }
}

/// Each node's answers to a batch of `locks`, as far as the round waits for them, and the
/// calls it left behind. It ends once a quorum refreshed every lock: nothing a pending node
/// says can change that, and waiting for it would only spend the locks' validity (with two
/// of five nodes down, each round waited as long again as its quorum took, past its bound
/// on a loaded machine). Short of that, once a quorum answered anything at all, the others
/// get a grace capped by `bound` (`tally::grace`), so that a round whose quorum answered
/// in time is filed before its locks' deadline.
async fn gather_refresh<F>(
    calls: impl IntoIterator<Item = F>,
    quorum: usize,
    locks: usize,
    bound: Duration,
) -> (PerNode, Stragglers<F>)
where
    F: Future<Output = Vec<Option<bool>>>,
{
    let enough = |seen: &[Option<Vec<Option<bool>>>]| {
        let answering = (seen.iter().flatten()).filter(|a| a.iter().any(Option::is_some));
        answering.count() >= quorum
    };
    let settled = |seen: &[Option<Vec<Option<bool>>>]| confirmed(quorum, locks, seen);
    gather_read(calls, |answers| answers, settled, enough, bound).await
}

/// Whether a quorum of the nodes' answers so far says each of `locks` is refreshed.
fn confirmed(quorum: usize, locks: usize, seen: &[Option<Vec<Option<bool>>>]) -> bool {
    (0..locks).all(|i| {
        let yes = seen
            .iter()
            .flatten()
            .filter(|a| a.get(i) == Some(&Some(true)));
        yes.count() >= quorum
    })
}

/// Each lock's verdict by the nodes' answers, a silent node counted as refusing a lock it
/// is known to have refused (`refusing`, per lock, when any is known).
fn verdicts(
    quorum: usize,
    batch: &RefreshBatch,
    per_node: &PerNode,
    refusing: Option<Vec<Vec<usize>>>,
) -> Vec<Option<bool>> {
    (0..batch.len())
        .map(|i| {
            let known = refusing.as_ref().and_then(|r| r.get(i));
            let says = |node: usize, answers: &Option<Vec<Option<bool>>>| {
                let said = answers.as_ref().and_then(|a| a.get(i).copied().flatten());
                match (said, known) {
                    (None, Some(nodes)) if nodes.contains(&node) => Some(false),
                    _ => said,
                }
            };
            let said: Vec<Option<bool>> = (per_node.iter().enumerate())
                .map(|(node, answers)| says(node, answers))
                .collect();
            let count = |want: Option<bool>| said.iter().filter(|&&s| s == want).count();
            let (yes, unknown) = (count(Some(true)), count(None));
            if yes >= quorum {
                Some(true)
            } else if yes + unknown < quorum {
                Some(false)
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "redlock_refresh_tests.rs"]
mod tests;
