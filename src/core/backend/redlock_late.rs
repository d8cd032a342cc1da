//! A Redlock attempt decided while some nodes had not answered yet: their attempts still run
//! there, and a win that lands after the decision must not outlive the token's lock. While
//! such a straggler is out its token is watched here; every release or undo of the token
//! (`end`) marks it over first, so that a straggler's win read afterwards is freed on its
//! node (its reply says the attempt ran there, so a release sent now goes after it, on any
//! connection). A win read before the mark is kept: the token is still ours (or the
//! conclusion still to come), and the release or undo sent later reaches that node after it.

use crate::core::basics::sync::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The tokens of attempts whose stragglers are still out.
#[derive(Default)]
pub struct LateBook {
    tokens: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    watchers: usize,
    over: Arc<AtomicBool>,
}

impl LateBook {
    /// Watches `token` until the `Watch` drops (its stragglers all done).
    pub fn watch(self: &Arc<Self>, token: &str) -> Watch {
        let mut tokens = lock(&self.tokens);
        let entry = tokens.entry(token.to_owned()).or_insert_with(|| Entry {
            watchers: 0,
            over: Arc::new(AtomicBool::new(false)),
        });
        entry.watchers += 1;
        Watch {
            book: self.clone(),
            token: token.to_owned(),
            over: entry.over.clone(),
        }
    }

    /// A release or undo of `token` goes out now: a straggler's win read from now on is
    /// freed. Called before it is sent.
    pub fn end(&self, token: &str) {
        let tokens = lock(&self.tokens);
        if let Some(entry) = tokens.get(token) {
            entry.over.store(true, Ordering::Release);
        }
    }

    /// An attempt with `token` starts again (syncguard keeps a lockId across its tries): a
    /// win of an earlier try's straggler is now this one's, whose own conclusion decides.
    pub fn begin(&self, token: &str) {
        let tokens = lock(&self.tokens);
        if let Some(entry) = tokens.get(token) {
            entry.over.store(false, Ordering::Release);
        }
    }
}

/// A token watched while an attempt's stragglers are out.
pub struct Watch {
    book: Arc<LateBook>,
    token: String,
    over: Arc<AtomicBool>,
}

impl Watch {
    /// Whether the token's lock is over (released, or the attempt undone): a straggler's win
    /// is to be freed.
    pub fn over(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    /// The attempt lost: its stragglers' wins are freed.
    pub fn end(&self) {
        self.book.end(&self.token);
    }
}

impl Drop for Watch {
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
        book.begin("t");
        assert!(!first.over());
        drop(first);
        second.end();
        assert!(second.over());
        drop(second);
        assert!(lock(&book.tokens).is_empty());
        // Not watched: nothing kept for it.
        book.end("t");
        assert!(!book.watch("t").over());
    }
}
