//! A link's side of the restart quarantine (proto/epoch.rs): the gate learned on the current
//! connection, forgotten when it drops, and learned again (one EVAL of epoch.lua) before the
//! next attempt. Off (`restartQuarantineMs: 0`), it sends nothing. A Redlock's node abstains
//! at a closed gate rather than waiting there: the quorum is counted without it (see
//! `RedlockStore::pass_gate`, which does the waiting for the quorum).

use super::wire::{packed, trace_named};
use crate::core::basics::drops::Drops;
use crate::core::basics::sync::lock;
use crate::core::proto::epoch::{self, Admit, Gate};
use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, RedisResult, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) struct Quarantine {
    length: Duration,
    /// A closed gate refuses an attempt at once, whatever its bound (a Redlock's node).
    abstains: bool,
    /// Each gate, by the cluster slot it was learned for (`None`: the connection's one
    /// server), and when the request that learned it was sent: a drop since then may have put
    /// another incarnation behind the connection.
    learned: Mutex<HashMap<Option<u16>, (Instant, Gate)>>,
    /// Bumped by every `forget`: a learner that started before one keeps nothing it learned.
    generation: AtomicU64,
    /// One learner at a time per gate: the attempts of a burst after a reconnect share its
    /// answer, and a slot whose master hangs holds up no other slot's learning.
    learning: Mutex<HashMap<Option<u16>, Arc<tokio::sync::Mutex<()>>>>,
}

impl Quarantine {
    pub(super) fn new(length: Duration) -> Self {
        Quarantine {
            length,
            abstains: false,
            learned: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
            learning: Mutex::new(HashMap::new()),
        }
    }

    /// The same quarantine, abstaining at a closed gate (a Redlock's node).
    pub(super) fn abstaining(self) -> Self {
        Quarantine {
            abstains: true,
            ..self
        }
    }

    /// What an attempt made at `now`, bounded by `deadline`, does at `gate`.
    pub(super) fn admit(&self, gate: &Gate, now: Instant, deadline: Instant) -> Admit {
        gate.admit(now, if self.abstains { now } else { deadline })
    }

    pub(super) fn is_off(&self) -> bool {
        self.length.is_zero()
    }

    /// The connection was replaced by one the drops may not tell of.
    pub(super) fn forget(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        lock(&self.learned).clear();
    }

    /// The gate of the current connection (on a cluster, of `slot`'s master), if learned
    /// since its last drop.
    pub(super) fn known(&self, drops: &Drops, slot: Option<u16>) -> Option<Gate> {
        let (sent, gate) = *lock(&self.learned).get(&slot)?;
        (!drops.since(sent)).then_some(gate)
    }

    /// Whether an attempt could go now without asking Redis first.
    pub(super) fn is_open(&self, drops: &Drops, slot: Option<u16>) -> bool {
        self.is_off()
            || self
                .known(drops, slot)
                .is_some_and(|gate| gate.is_open(Instant::now()))
    }

    /// The gate of the connection `con` (on a cluster, of `slot`'s master), asked of Redis
    /// unless known.
    pub(super) async fn gate<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        drops: &Drops,
        slot: Option<u16>,
    ) -> RedisResult<Gate> {
        if let Some(gate) = self.known(drops, slot) {
            return Ok(gate);
        }
        let learner = lock(&self.learning).entry(slot).or_default().clone();
        let _learning = learner.lock().await;
        // Learned again while a drop or a `forget` came during the learning: the answer may
        // describe a server the connection no longer leads to. The caller's bound ends it.
        loop {
            if let Some(gate) = self.known(drops, slot) {
                return Ok(gate);
            }
            let generation = self.generation.load(Ordering::SeqCst);
            let sent = Instant::now();
            let stamp = epoch::stamp(slot);
            let asked = Instant::now();
            let reply = stamp.query_async::<Value>(con).await;
            trace_named(|| packed(&stamp), asked, &reply, epoch::name_of);
            let reply = reply?;
            let stamp = epoch::read_stamp(&reply.extract_error()?)
                .ok_or_else(|| unreadable("epoch.lua answered no { born, now }"))?;
            let gate = Gate::new(Instant::now(), stamp, self.length);
            let mut learned = lock(&self.learned);
            if drops.since(sent) || self.generation.load(Ordering::SeqCst) != generation {
                continue;
            }
            learned.insert(slot, (sent, gate));
            return Ok(gate);
        }
    }
}

fn unreadable(what: &'static str) -> RedisError {
    RedisError::from((ErrorKind::UnexpectedReturnType, what))
}
