//! The watchdog's refreshes: many locks' TTLs set again in one round trip, and what each
//! lock's answer is. Built while the watchdog's state is locked, sent after, so the batch
//! owns its commands (written once here, as they go out).

use super::scripts;
use crate::core::basics::keys;
use redis::{Cmd, Value};
use std::collections::BTreeMap;

/// One lock to refresh: its key holds `token`; an ExclusiveLock's owner key also has its
/// `pair`.
#[derive(Clone, Copy)]
pub struct Refresh<'a> {
    pub key: &'a [u8],
    pub token: &'a [u8],
    pub ttl_ms: u32,
    pub fence_retention_ms: u64,
    pub pair: Option<PairRefresh<'a>>,
}

/// The lock key an ExclusiveLock's owner key guards and what it must hold.
#[derive(Clone, Copy)]
pub struct PairRefresh<'a> {
    pub data_key: &'a [u8],
    pub expected: &'a [u8],
    /// The lock key's absolute expiry (ms) as its transaction set it (see same_expiry.lua).
    pub set_at: Option<i64>,
}

/// The commands of one round trip: one `refresh_many` call for every single-key lock, then
/// one `refresh` call per ExclusiveLock pair.
#[derive(Clone)]
pub struct RefreshBatch {
    commands: Vec<Cmd>,
    singles: usize,
    pairs: usize,
    /// Its locks, singles then pairs, kept so that a cluster can cut it by slot (`split`)
    /// without the watchdog knowing of slots.
    locks: Vec<KeptRefresh>,
}

/// A `Refresh` owning its bytes.
#[derive(Clone)]
struct KeptRefresh {
    key: Vec<u8>,
    token: Vec<u8>,
    ttl_ms: u32,
    fence_retention_ms: u64,
    pair: Option<(Vec<u8>, Vec<u8>, Option<i64>)>,
}

impl KeptRefresh {
    fn of(r: &Refresh<'_>) -> KeptRefresh {
        KeptRefresh {
            key: r.key.to_vec(),
            token: r.token.to_vec(),
            ttl_ms: r.ttl_ms,
            fence_retention_ms: r.fence_retention_ms,
            pair: r
                .pair
                .map(|p| (p.data_key.to_vec(), p.expected.to_vec(), p.set_at)),
        }
    }

    fn view(&self) -> Refresh<'_> {
        Refresh {
            key: &self.key,
            token: &self.token,
            ttl_ms: self.ttl_ms,
            fence_retention_ms: self.fence_retention_ms,
            pair: self
                .pair
                .as_ref()
                .map(|(data_key, expected, set_at)| PairRefresh {
                    data_key,
                    expected,
                    set_at: *set_at,
                }),
        }
    }
}

impl RefreshBatch {
    /// The batch refreshing `singles` (locks without a pair) and `pairs`, answered in that
    /// order by `answers`.
    pub fn new(singles: &[Refresh<'_>], pairs: &[Refresh<'_>]) -> RefreshBatch {
        let mut commands = Vec::with_capacity(1 + pairs.len());
        if !singles.is_empty() {
            commands.push(refresh_many(singles));
        }
        commands.extend(pairs.iter().map(refresh_one));
        RefreshBatch {
            commands,
            singles: singles.len(),
            pairs: pairs.len(),
            locks: singles.iter().chain(pairs).map(KeptRefresh::of).collect(),
        }
    }

    /// This batch cut by slot (`by_slot`), for a store whose keys live on several nodes.
    pub fn split(&self) -> SlotBatches {
        let views: Vec<Refresh<'_>> = self.locks.iter().map(KeptRefresh::view).collect();
        let (singles, pairs) = views.split_at(self.singles);
        RefreshBatch::by_slot(singles, pairs)
    }

    pub fn commands(&self) -> &[Cmd] {
        &self.commands
    }

    /// Each lock's token, in the order of `answers`.
    pub fn tokens(&self) -> impl Iterator<Item = &[u8]> {
        self.locks.iter().map(|lock| &lock.token[..])
    }

    /// Locks refreshed by the batch.
    pub fn len(&self) -> usize {
        self.singles + self.pairs
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Per lock, singles then pairs: refreshed (`true`), gone (`false`), or no answer (its
    /// command's reply is `None`: an error, or nothing came back).
    pub fn answers(&self, replies: Vec<Option<Value>>) -> Vec<Option<bool>> {
        let mut replies = replies.into_iter();
        let mut out = Vec::with_capacity(self.len());
        if self.singles > 0 {
            match replies.next() {
                Some(Some(Value::BulkString(flags))) if flags.len() == self.singles => {
                    out.extend(flags.iter().map(|flag| Some(*flag == b'1')));
                }
                _ => out.extend(std::iter::repeat_n(None, self.singles)),
            }
        }
        for _ in 0..self.pairs {
            out.push(match replies.next() {
                Some(Some(Value::Int(done))) => Some(done == 1),
                _ => None,
            });
        }
        out
    }
}

/// One batch per hash slot, for Redis Cluster (a script's keys must share a slot), and where
/// each lock's answer goes back in the caller's order (singles, then pairs).
pub struct SlotBatches {
    batches: Vec<(u16, RefreshBatch)>,
    /// Per batch, the caller's index of each of its locks, in the batch's answer order.
    places: Vec<Vec<usize>>,
}

impl RefreshBatch {
    /// `new`'s batch cut by slot: each slot's singles in one `refresh_many`, its pairs after
    /// (a pair's owner and lock keys share the lock key's slot, see keys.rs). Slots ascend;
    /// within one, locks keep the caller's order.
    pub fn by_slot(singles: &[Refresh<'_>], pairs: &[Refresh<'_>]) -> SlotBatches {
        let mut groups: BTreeMap<u16, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
        for (index, r) in singles.iter().enumerate() {
            groups.entry(keys::slot(r.key)).or_default().0.push(index);
        }
        for (index, r) in pairs.iter().enumerate() {
            groups.entry(keys::slot(r.key)).or_default().1.push(index);
        }
        let mut batches = Vec::with_capacity(groups.len());
        let mut places = Vec::with_capacity(groups.len());
        for (slot, (ones, twos)) in groups {
            let batch = RefreshBatch::new(&picked(singles, &ones), &picked(pairs, &twos));
            batches.push((slot, batch));
            places.push(
                ones.into_iter()
                    .chain(twos.into_iter().map(|i| singles.len() + i))
                    .collect(),
            );
        }
        SlotBatches { batches, places }
    }
}

/// The locks of `from` at the indices `at` (each drawn from `from`'s own enumeration).
fn picked<'a>(from: &[Refresh<'a>], at: &[usize]) -> Vec<Refresh<'a>> {
    at.iter().map(|&index| from[index]).collect()
}

impl SlotBatches {
    /// Each slot with its batch, to be sent where that slot lives.
    pub fn batches(&self) -> &[(u16, RefreshBatch)] {
        &self.batches
    }

    /// Per lock, in the caller's order, what `RefreshBatch::answers` says, from `replies`
    /// (one entry per batch, as `batches` lists them; a missing entry answers nothing).
    pub fn answers(&self, replies: Vec<Vec<Option<Value>>>) -> Vec<Option<bool>> {
        let mut replies = replies.into_iter();
        let answers = self
            .batches
            .iter()
            .map(|(_, batch)| batch.answers(replies.next().unwrap_or_default()))
            .collect();
        self.merge(answers)
    }

    /// Per lock, in the caller's order, from each batch's own answers (as `batches` lists
    /// them; a missing batch or answer is no answer).
    pub fn merge(&self, answers: Vec<Vec<Option<bool>>>) -> Vec<Option<bool>> {
        let total = self.places.iter().map(Vec::len).sum();
        let mut out = vec![None; total];
        for (places, answers) in self.places.iter().zip(answers) {
            for (&place, answer) in places.iter().zip(answers) {
                out[place] = answer;
            }
        }
        out
    }
}

/// refresh_many.lua over every single-key lock, each with its fence counter kept past it
/// (see fence.lua).
fn refresh_many(singles: &[Refresh<'_>]) -> Cmd {
    let bytes: usize = singles
        .iter()
        .map(|r| r.key.len() + r.token.len() + 16)
        .sum();
    let mut many = Cmd::with_capacity(3 + 5 * singles.len(), 64 + 2 * bytes);
    many.arg("EVALSHA")
        .arg(scripts::REFRESH_MANY.get_hash())
        .arg(2 * singles.len());
    for r in singles {
        many.arg(r.key);
    }
    for r in singles {
        many.arg(keys::fence_key(r.key));
    }
    for r in singles {
        many.arg(r.token);
    }
    for r in singles {
        many.arg(r.ttl_ms);
    }
    for r in singles {
        many.arg(r.fence_retention_ms);
    }
    many
}

/// refresh.lua for one lock alone.
fn refresh_one(r: &Refresh<'_>) -> Cmd {
    // Sized up front: a command grown argument by argument reallocates its buffers a few
    // times, for every lock, at every tick.
    let expected = r
        .pair
        .as_ref()
        .map_or(0, |p| p.data_key.len() + p.expected.len());
    let mut cmd = Cmd::with_capacity(8, 64 + r.key.len() + r.token.len() + expected);
    cmd.arg("EVALSHA").arg(scripts::REFRESH.get_hash());
    match &r.pair {
        None => cmd
            .arg(2)
            .arg(r.key)
            .arg(keys::fence_key(r.key))
            .arg(r.token)
            .arg(r.ttl_ms)
            .arg(r.fence_retention_ms),
        Some(pair) => cmd
            .arg(3)
            .arg(r.key)
            .arg(pair.data_key)
            .arg(keys::fence_key(pair.data_key))
            .arg(r.token)
            .arg(r.ttl_ms)
            .arg(pair.expected)
            .arg(set_at_arg(pair.set_at))
            .arg(r.fence_retention_ms),
    };
    cmd
}

/// `set_at` as the scripts take it: empty when none.
pub fn set_at_arg(set_at: Option<i64>) -> String {
    set_at.map(|at| at.to_string()).unwrap_or_default()
}
