//! What a Redlock owes one node: a release or an undo whose fate there nobody knows. A call
//! on the nodes' own sockets (ops/fast/quorum.rs) that loses a node's socket after the call
//! was decided cannot send the call again as a whole, yet that node may keep our token: the
//! attempt ran there and its reply was lost, or the release never got there. The runtime's
//! own releases and undos are in the same case when a node fails them or is silent past
//! their bound (`Debtors::free_on`, and a release's stragglers). Such a free is owed to the
//! node, here in the runtime, and sent on the node's own runtime connection until the node
//! answers it (a free that finds nothing of ours answers too), or until the lock it frees is
//! over anyway (`ttl` after it was owed: no copy outlives its TTL), or until another try
//! with the same token starts (syncguard keeps its lockId across tries): that try's own
//! conclusion covers the node, and the old free would take its lock there.
//!
//! One task per node sends what the node is owed while anything is: the oldest first, alone,
//! as a probe; the rest once the node answered it, so a node that stays down costs one
//! request per pause, not one per debt. At most `MAX_OWED` are kept per node; past that the
//! oldest go (the nearest to expiring on their own).

use super::redis_store::RedisStore;
use super::redlock_detached::Detached;
use super::redlock_late::{Late, LateBook, TokenWatch};
use super::redlock_tally::is_answer;
use crate::core::basics::background;
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use futures_util::future::join_all;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Frees kept for one node, at most.
pub const MAX_OWED: usize = 4096;

/// Between two probes of a node that did not answer (the link itself retries a refused
/// connection for 0.3 s within each).
const PAUSE: Duration = Duration::from_millis(100);

/// The frees one node is owed.
#[derive(Default)]
pub struct Owed {
    state: Mutex<Owing>,
}

#[derive(Default)]
struct Owing {
    debts: VecDeque<Debt>,
    /// Taken by the task and not settled yet (still owed, as far as anyone can tell).
    out: usize,
    /// A task is sending them.
    draining: bool,
}

struct Debt {
    free: Arc<Detached>,
    /// Past this the lock it frees is over on the node: nothing left to free.
    until: Instant,
    bound: Duration,
    /// The free's token, watched for another try with it.
    token: TokenWatch,
}

impl Debt {
    fn due(&self, now: Instant) -> bool {
        self.until > now && self.token.late() != Late::Superseded
    }
}

impl Owed {
    /// `free` is owed to the node behind `store`, for `ttl`, each try bounded by `bound`.
    fn owe(
        self: &Arc<Self>,
        store: &Arc<RedisStore>,
        free: Arc<Detached>,
        (ttl, bound): (Duration, Duration),
        token: TokenWatch,
    ) {
        let debt = Debt {
            free,
            until: Instant::now() + ttl,
            bound,
            token,
        };
        let start = {
            let mut owing = lock(&self.state);
            if owing.debts.len() >= MAX_OWED {
                owing.debts.pop_front();
            }
            owing.debts.push_back(debt);
            !std::mem::replace(&mut owing.draining, true)
        };
        if start {
            background::spawn(drain(self.clone(), store.clone()));
        }
    }

    /// How many frees are owed now.
    pub fn len(&self) -> usize {
        let owing = lock(&self.state);
        owing.debts.len() + owing.out
    }

    /// Every debt still due; none: the task ends (a debt owed from now starts another).
    fn take(&self) -> Option<Vec<Debt>> {
        let now = Instant::now();
        let mut owing = lock(&self.state);
        owing.debts.retain(|debt| debt.due(now));
        if owing.debts.is_empty() {
            owing.draining = false;
            return None;
        }
        let taken: Vec<Debt> = owing.debts.drain(..).collect();
        owing.out = taken.len();
        Some(taken)
    }

    /// The debts taken were sent; `debts` were not answered: owed still, ahead of those
    /// owed meanwhile.
    fn keep(&self, debts: Vec<Debt>) {
        let mut owing = lock(&self.state);
        owing.out = 0;
        for debt in debts.into_iter().rev() {
            owing.debts.push_front(debt);
        }
        while owing.debts.len() > MAX_OWED {
            owing.debts.pop_front();
        }
    }
}

/// Each node's store and what it is owed, in the nodes' order: cloned into the tasks that
/// learn that a free went unanswered.
#[derive(Clone)]
pub struct Debtors {
    nodes: Arc<[(Arc<RedisStore>, Arc<Owed>)]>,
    late: Arc<LateBook>,
}

impl Debtors {
    pub(super) fn new(stores: Vec<Arc<RedisStore>>, late: Arc<LateBook>) -> Debtors {
        let nodes = (stores.into_iter()).map(|store| (store, Arc::default()));
        Debtors {
            nodes: nodes.collect(),
            late,
        }
    }

    /// `free` is owed to node `node` (by index), for `ttl` at most, each try bounded by
    /// `bound`.
    pub(super) fn owe(&self, node: usize, free: &Arc<Detached>, ttl: Duration, bound: Duration) {
        if let Some((store, owed)) = self.nodes.get(node) {
            let token = self.late.watch(free.token());
            owed.owe(store, free.clone(), (ttl, bound), token);
        }
    }

    /// Node `node`'s reply to `free` was `reply`: owed still when it is no answer (the node
    /// down, or silent past the bound: it may keep our token).
    pub(super) fn heard<T>(
        &self,
        node: usize,
        free: &Arc<Detached>,
        reply: &Result<T, LockError>,
        (ttl, bound): (Duration, Duration),
    ) {
        if let Err(err) = reply {
            if !is_answer(err) {
                self.owe(node, free, ttl, bound);
            }
        }
    }

    /// Sends `free` to node `node`, owed to it when the node does not answer.
    pub(super) async fn free_on(
        self,
        node: usize,
        free: Arc<Detached>,
        (ttl, bound): (Duration, Duration),
    ) {
        let Some((store, _)) = self.nodes.get(node) else {
            return;
        };
        let sent = free.sent(store, bound).await;
        self.heard(node, &free, &sent, (ttl, bound));
    }

    /// How many frees node `node` is owed now.
    pub fn len(&self, node: usize) -> usize {
        self.nodes.get(node).map_or(0, |(_, owed)| owed.len())
    }
}

/// Sends `debt` to the node behind `store`: whether the node answered it (whatever it
/// freed). Given up at half its bound, before the link's own timeout would discard the
/// node's connection and with it put every lock of the Redlock in doubt (as the refresh's
/// stragglers are, redlock_refresh.rs): a silent node is probed again and again.
async fn answered(store: &RedisStore, debt: &Debt) -> bool {
    let sent = tokio::time::timeout(debt.bound / 2, debt.free.sent(store, debt.bound)).await;
    match sent {
        Ok(Ok(_)) => true,
        Ok(Err(err)) => is_answer(&err),
        Err(_) => false,
    }
}

/// Sends the node its debts until none is left.
async fn drain(owed: Arc<Owed>, store: Arc<RedisStore>) {
    while let Some(mut debts) = owed.take() {
        let probe = debts.remove(0);
        if !answered(&store, &probe).await {
            debts.insert(0, probe);
            owed.keep(debts);
            tokio::time::sleep(PAUSE).await;
            continue;
        }
        let sent = join_all(debts.iter().map(|debt| answered(&store, debt))).await;
        let unanswered: Vec<Debt> = (debts.into_iter().zip(sent))
            .filter(|(_, answered)| !answered)
            .map(|(debt, _)| debt)
            .collect();
        let again = !unanswered.is_empty();
        owed.keep(unanswered);
        if again {
            tokio::time::sleep(PAUSE).await;
        }
    }
}
