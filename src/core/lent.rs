//! Holders that started on a lease lent to them (see handoff.lua and
//! binding/direct/handoff.rs) whose handover Redis then did not confirm: their handles,
//! plain JS objects, ask here whether they still hold. Rare (the lender's lock must have been
//! taken from it behind its back), so this is almost always empty and cheap to ask.

use super::sync::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Default)]
pub struct Unconfirmed {
    any: AtomicBool,
    /// Token -> until when its handle could think it holds (later, nobody asks).
    tokens: Mutex<HashMap<String, Instant>>,
}

impl Unconfirmed {
    pub fn add(&self, token: String, until: Instant) {
        let mut tokens = lock(&self.tokens);
        let now = Instant::now();
        tokens.retain(|_, until| *until > now);
        tokens.insert(token, until);
        self.any.store(true, Ordering::Release);
    }

    pub fn contains(&self, token: &str) -> bool {
        self.any.load(Ordering::Acquire) && lock(&self.tokens).contains_key(token)
    }

    /// Its handle released it: nobody asks again.
    pub fn remove(&self, token: &str) {
        if self.any.load(Ordering::Acquire) {
            let mut tokens = lock(&self.tokens);
            tokens.remove(token);
            self.any.store(!tokens.is_empty(), Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_token_is_known_until_removed_or_past_its_time() {
        let unconfirmed = Unconfirmed::default();
        assert!(!unconfirmed.contains("a"));
        unconfirmed.add("a".into(), Instant::now() + Duration::from_secs(60));
        unconfirmed.add("b".into(), Instant::now());
        assert!(unconfirmed.contains("a"));
        // Past its time: dropped at the next addition.
        unconfirmed.add("c".into(), Instant::now() + Duration::from_secs(60));
        assert!(!unconfirmed.contains("b"));
        unconfirmed.remove("a");
        assert!(!unconfirmed.contains("a"));
        assert!(unconfirmed.contains("c"));
    }
}
