//! The watchdog's refreshes: many locks' TTLs set again in one round trip, and what each
//! lock's answer is. Built while the watchdog's state is locked, sent after, so the batch
//! owns its commands (written once here, as they go out).

use super::scripts;
use crate::core::basics::keys;
use redis::{Cmd, Value};

/// One lock to refresh: its key holds `token`; an ExclusiveLock's owner key also has its
/// `pair`.
pub struct Refresh<'a> {
    pub key: &'a [u8],
    pub token: &'a [u8],
    pub ttl_ms: u32,
    pub fence_retention_ms: u64,
    pub pair: Option<PairRefresh<'a>>,
}

/// The lock key an ExclusiveLock's owner key guards and what it must hold.
pub struct PairRefresh<'a> {
    pub data_key: &'a [u8],
    pub expected: &'a [u8],
    /// The lock key's absolute expiry (ms) as its transaction set it (see same_expiry.lua).
    pub set_at: Option<i64>,
}

/// The commands of one round trip: one `refresh_many` call for every single-key lock, then
/// one `refresh` call per ExclusiveLock pair.
pub struct RefreshBatch {
    commands: Vec<Cmd>,
    singles: usize,
    pairs: usize,
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
        }
    }

    pub fn commands(&self) -> &[Cmd] {
        &self.commands
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
