//! The sorted set itself, ordered by (score, member) as in Redis: apart from its commands
//! (zset.rs) so the keyspace that holds it need not know them.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

/// A score: never NaN (every way in refuses it), so the order is total.
#[derive(Debug, Clone, Copy)]
struct Score(f64);

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZSet {
    scores: HashMap<Vec<u8>, f64>,
    order: BTreeSet<(Score, Vec<u8>)>,
}

impl ZSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    pub fn insert(&mut self, member: &[u8], score: f64) {
        if let Some(old) = self.scores.insert(member.to_vec(), score) {
            self.order.remove(&(Score(old), member.to_vec()));
        }
        self.order.insert((Score(score), member.to_vec()));
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove(member) {
            Some(score) => {
                self.order.remove(&(Score(score), member.to_vec()));
                true
            }
            None => false,
        }
    }

    /// Members in order, with their scores.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        self.order
            .iter()
            .map(|(score, member)| (member.as_slice(), score.0))
    }

    pub fn pop_first(&mut self) -> Option<(Vec<u8>, f64)> {
        let (score, member) = self.order.pop_first()?;
        self.scores.remove(&member);
        Some((member, score.0))
    }
}
