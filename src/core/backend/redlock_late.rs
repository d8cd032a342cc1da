//! A Redlock attempt decided while some nodes had not answered yet: their attempts still run
//! there, and a win that lands after the decision must not outlive the token's lock. While
//! such a straggler is out its token is watched here; every release or undo of the token
//! (`end`) marks it over first, so that a straggler's win read afterwards is freed on its
//! node (its reply says the attempt ran there, so a release sent now goes after it, on any
//! connection). A win read before the mark is kept: the token is still ours (or the
//! conclusion still to come), and the release or undo sent later reaches that node after it.
//! So is one whose node was sent the release on the very connection (`lane`) that carries
//! the straggler (`behind`): the release runs there after it, and an undo would only repeat
//! it (on serial pairs, a third of the stragglers answered after their lock's release).

use crate::core::basics::sync::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The tokens of attempts whose stragglers are still out; and the nodes whose refresh of a
/// held lock said it is not ours there (see `heard_refresh`).
#[derive(Default)]
pub struct LateBook {
    tokens: Mutex<HashMap<String, TokenState>>,
    refused: Mutex<RefreshRefusals>,
}

/// Per token, the nodes that last answered its refresh with "not ours", and when.
#[derive(Default)]
struct RefreshRefusals {
    by_token: HashMap<Vec<u8>, (Vec<usize>, Instant)>,
    /// How many were kept after the last pruning: the next prunes at twice as many.
    kept: usize,
}

/// A refusal not heard of again for this long is forgotten: its lock was let go without a
/// release or a loss told here (a watch stopped, its holder gone).
const REFUSAL_KEPT: Duration = Duration::from_secs(600);

struct TokenState {
    watchers: usize,
    /// The current attempt's.
    state: Arc<AttemptState>,
}

#[derive(Default)]
struct AttemptState {
    /// `LIVE`, `OVER`; an earlier try's is `SUPERSEDED`.
    state: AtomicU8,
    /// (node, lane) of each release of the token written on a node's own connection.
    behind: Mutex<Vec<(usize, u64)>>,
}

const LIVE: u8 = 0;
const OVER: u8 = 1;
const SUPERSEDED: u8 = 2;

/// What a straggler's win comes to, by its token's state when its reply is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Late {
    /// The token's lock stands (or its conclusion is still to come): kept.
    Kept,
    /// Released or undone: freed on the straggler's node.
    Over,
    /// Another try with the same token started since: that try's own conclusion covers
    /// the node (its request there runs after this one, on the same connection).
    Superseded,
}

impl LateBook {
    /// Watches `token` until the `TokenWatch` drops (its stragglers all done).
    pub fn watch(self: &Arc<Self>, token: &str) -> TokenWatch {
        let mut tokens = lock(&self.tokens);
        let entry = tokens
            .entry(token.to_owned())
            .or_insert_with(|| TokenState {
                watchers: 0,
                state: Arc::default(),
            });
        entry.watchers += 1;
        TokenWatch {
            book: self.clone(),
            token: token.to_owned(),
            state: entry.state.clone(),
        }
    }

    /// A release or undo of `token` goes out now: a straggler's win read from now on is
    /// freed. Called before it is sent.
    pub fn end(&self, token: &str) {
        {
            let tokens = lock(&self.tokens);
            if let Some(entry) = tokens.get(token) {
                entry.state.state.store(OVER, Ordering::Release);
            }
        }
        self.forget_refusals(token.as_bytes());
    }

    /// Files `node`'s answers to a refresh of the locks of `tokens`, in time or after its
    /// round was decided. A "not ours" stays true of the token on that node: nothing writes a
    /// held lock's token back (short of its own attempt's straggler landing late, which
    /// leaves the node counted against a lock it holds: a loss told early, never one missed).
    /// A "refreshed" there takes it back.
    pub fn heard_refresh<'a>(
        &self,
        node: usize,
        tokens: impl Iterator<Item = &'a [u8]>,
        answers: &[Option<bool>],
    ) {
        if !answers.contains(&Some(false)) && lock(&self.refused).by_token.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut refused = lock(&self.refused);
        for (token, answer) in tokens.zip(answers) {
            match answer {
                Some(false) => {
                    let (nodes, at) = (refused.by_token)
                        .entry(token.to_vec())
                        .or_insert_with(|| (Vec::new(), now));
                    *at = now;
                    if !nodes.contains(&node) {
                        nodes.push(node);
                    }
                }
                Some(true) => {
                    if let Some((nodes, _)) = refused.by_token.get_mut(token) {
                        nodes.retain(|&n| n != node);
                        if nodes.is_empty() {
                            refused.by_token.remove(token);
                        }
                    }
                }
                None => {}
            }
        }
        refused.prune(now);
    }

    /// For each of `tokens`, the nodes known to have said "not ours"; `None` when no node
    /// refused any lock (the usual case).
    pub fn refusing<'a>(&self, tokens: impl Iterator<Item = &'a [u8]>) -> Option<Vec<Vec<usize>>> {
        let refused = lock(&self.refused);
        if refused.by_token.is_empty() {
            return None;
        }
        let nodes = |token: &[u8]| refused.by_token.get(token).map(|(n, _)| n.clone());
        Some(
            tokens
                .map(|token| nodes(token).unwrap_or_default())
                .collect(),
        )
    }

    /// The lock of `token` is released or lost: what its refreshes said is of no use now.
    pub fn forget_refusals(&self, token: &[u8]) {
        let mut refused = lock(&self.refused);
        if !refused.by_token.is_empty() {
            refused.by_token.remove(token);
        }
    }

    /// A release of `token` was written to node `node` on connection `lane` (after `end`):
    /// a straggler of the token's attempt on that same connection needs no undo.
    pub fn behind(&self, token: &str, node: usize, lane: u64) {
        let tokens = lock(&self.tokens);
        if let Some(entry) = tokens.get(token) {
            lock(&entry.state.behind).push((node, lane));
        }
    }

    /// An attempt with `token` starts again (syncguard keeps a lockId across its tries):
    /// an earlier try's straggler read from now on frees nothing (it would free this try's
    /// lock); this try is watched afresh.
    pub fn begin(&self, token: &str) {
        let mut tokens = lock(&self.tokens);
        if let Some(entry) = tokens.get_mut(token) {
            entry.state.state.store(SUPERSEDED, Ordering::Release);
            entry.state = Arc::default();
        }
    }
}

impl RefreshRefusals {
    /// Drops the refusals not heard of for `REFUSAL_KEPT`, once their number doubled since
    /// the last time: each costs O(1) over the inserts.
    fn prune(&mut self, now: Instant) {
        if self.by_token.len() <= (2 * self.kept).max(1024) {
            return;
        }
        (self.by_token).retain(|_, (nodes, at)| {
            !nodes.is_empty() && now.saturating_duration_since(*at) < REFUSAL_KEPT
        });
        self.kept = self.by_token.len();
    }
}

/// A token watched while an attempt's stragglers are out.
pub struct TokenWatch {
    book: Arc<LateBook>,
    token: String,
    state: Arc<AttemptState>,
}

impl TokenWatch {
    /// What a straggler's win read now comes to.
    pub fn late(&self) -> Late {
        match self.state.state.load(Ordering::Acquire) {
            LIVE => Late::Kept,
            OVER => Late::Over,
            _ => Late::Superseded,
        }
    }

    /// Whether a straggler's win read now is to be freed.
    pub fn over(&self) -> bool {
        self.late() == Late::Over
    }

    /// Whether a release of the token went to node `node` on connection `lane`, behind a
    /// straggler there.
    pub fn released_behind(&self, node: usize, lane: u64) -> bool {
        lock(&self.state.behind).contains(&(node, lane))
    }

    /// The attempt lost: its stragglers' wins are freed.
    pub fn end(&self) {
        self.book.end(&self.token);
    }
}

impl Drop for TokenWatch {
    fn drop(&mut self) {
        let mut tokens = lock(&self.book.tokens);
        if let Some(entry) = tokens.get_mut(&self.token) {
            entry.watchers = entry.watchers.saturating_sub(1);
            if entry.watchers == 0 {
                tokens.remove(&self.token);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_over_once_ended_while_watched_and_forgotten_after() {
        let book = Arc::new(LateBook::default());
        book.end("t");
        let first = book.watch("t");
        assert!(!first.over());
        let second = book.watch("t");
        book.end("t");
        assert!(first.over() && second.over());
        // A new try with the token: the earlier ones' stragglers free nothing any more.
        book.begin("t");
        assert_eq!(first.late(), Late::Superseded);
        let third = book.watch("t");
        assert_eq!(third.late(), Late::Kept);
        drop(first);
        second.end();
        assert_eq!(second.late(), Late::Superseded);
        assert!(third.over());
        drop((second, third));
        assert!(lock(&book.tokens).is_empty());
        // Not watched: nothing kept for it.
        book.end("t");
        assert!(!book.watch("t").over());
    }

    #[test]
    fn a_release_behind_a_straggler_is_known_by_node_and_lane_until_a_new_try() {
        let book = Arc::new(LateBook::default());
        // Not watched: nothing recorded.
        book.behind("t", 0, 7);
        let watch = book.watch("t");
        assert!(!watch.released_behind(0, 7));
        book.end("t");
        book.behind("t", 0, 7);
        book.behind("t", 2, 9);
        assert!(watch.released_behind(0, 7) && watch.released_behind(2, 9));
        // Another node, or another connection to the node: not behind.
        assert!(!watch.released_behind(1, 7) && !watch.released_behind(0, 8));
        book.begin("t");
        assert!(!book.watch("t").released_behind(0, 7));
    }
}
