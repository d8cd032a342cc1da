//! Redlock: a lock held by a quorum of independent masters, each a `RedisStore` of its own.
//! Every op goes to every node at once, its per-node reply read by the same `proto` decode;
//! this file only counts: a quorum won, a quorum answered, or the error saying how many
//! nodes answered (never "held" when fewer than a quorum did). docs/plans/redlock.md has the
//! design: validity, fences that still increase, what each method answers.

use super::direct;
use super::endpoint::{Address, Endpoint};
use super::link::Replay;
use super::lock_store::{
    Caps, Fairness, FastPath, Fencing, Handover, Listener, LockStore, ScriptsFor, Subscriptions,
    WakeKind, IDLE_SUBSCRIPTIONS,
};
use super::redis_store::RedisStore;
use super::redlock_book::{NodeBook, NodeListener, NodeSubscriptions};
use super::redlock_detached::{self, Detached};
use super::redlock_late::LateBook;
use super::redlock_owed::Debtors;
use super::redlock_pool::LatePool;
use super::redlock_tally::{
    answered, failed, finish, gather, gather_read, is_answer, quorum_error, release_verdict,
    unheard, validity_left, won, Tally,
};
use crate::core::basics::drops::Drops;
use crate::core::basics::error::LockError;
use crate::core::basics::{background, clock};
use crate::core::proto::acquire::{AcquireAttempt, Acquired, Layout};
use crate::core::proto::extend::Extend;
use crate::core::proto::fence_raise::FenceRaise;
use crate::core::proto::fenced_set::FencedSet;
use crate::core::proto::queue::{Enqueue, LeaveLine, LeaveQueue, WakeNext};
use crate::core::proto::read::{Exists, Inspect, Pttl};
use crate::core::proto::refresh::RefreshBatch;
use crate::core::proto::release::{HandOver, Release};
use crate::core::proto::syncguard::{
    ExtendById, ReleaseById, ReleasedById, SyncguardIsLocked, SyncguardLookup,
};
use crate::core::proto::{Op, Request};
use futures_util::future::join_all;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The fewest nodes of a Redlock that survives one node down.
pub const MIN_NODES: usize = 3;

pub struct RedlockStore {
    endpoint: Endpoint,
    nodes: Vec<Node>,
    quorum: usize,
    lost: Arc<Drops>,
    /// Tokens whose attempts' stragglers are still out (redlock_late.rs).
    late: Arc<LateBook>,
    /// Where the calls' stragglers run.
    stragglers: LatePool,
    /// The frees each node is owed (redlock_owed.rs).
    debtors: Debtors,
    /// The longest TTL, in ms, a lock of this Redlock was set or extended to: how long a
    /// release owed to a node is kept (a release does not say its lock's TTL).
    longest_ttl: AtomicU64,
}

struct Node {
    /// Shared with the releases left to a task of their own (`release_on`).
    store: Arc<RedisStore>,
    book: Arc<NodeBook>,
}

impl Endpoint {
    /// A Redlock over `nodes`, each its own server. Refused (naming `arg`): no node, a
    /// `memory://` or Redlock node, or the same server twice (it would count twice).
    pub fn redlock(nodes: Vec<Endpoint>, arg: &'static str) -> Result<Endpoint, LockError> {
        // One node is a single Redis with extra round trips; two need both for a quorum, so
        // either one down stops every lock: neither tolerates a failure, Redlock's point.
        if nodes.len() < MIN_NODES {
            return Err(LockError::invalid_type(
                arg,
                format!(
                    "{arg} must name at least {MIN_NODES} Redis servers for a Redlock (a quorum of fewer tolerates no failed node; for one server pass it alone, not in an array), got {}",
                    nodes.len()
                ),
            ));
        }
        for (i, node) in nodes.iter().enumerate() {
            if !matches!(node.address, Address::Tcp { .. } | Address::Unix(_)) {
                return Err(LockError::invalid_type(
                    arg,
                    format!("{arg}[{i}] must be a Redis server: a Redlock's nodes are independent masters"),
                ));
            }
            let server = server_of(&node.address);
            if nodes[..i]
                .iter()
                .any(|seen| server_of(&seen.address) == server)
            {
                return Err(LockError::invalid_type(
                    arg,
                    format!("{arg}[{i}] names the same server as an earlier node: each must be an independent master"),
                ));
            }
        }
        let connect_timeout = nodes.iter().map(|n| n.connect_timeout).max();
        // Each node keeps its own gate; this one only says the option is on.
        let restart_quarantine = nodes.iter().map(|n| n.restart_quarantine).max();
        Ok(Endpoint {
            connect_timeout: connect_timeout.unwrap_or(super::endpoint::DEFAULT_CONNECT_TIMEOUT),
            grants: false,
            restart_quarantine: restart_quarantine.unwrap_or_default(),
            address: Address::Redlock(nodes),
            db: 0,
            username: None,
            password: None,
        })
    }
}

/// Where a node's server listens, as far as can be told without connecting or asking DNS:
/// an IP literal in its canonical form (`::ffff:127.0.0.1` is `127.0.0.1`), `localhost`
/// as the loopback it names, other host names by their text; a socket by its resolved path.
#[derive(PartialEq, Debug)]
enum Server {
    Ip(std::net::IpAddr, u16),
    Loopback(u16),
    Name(String, u16),
    Socket(std::path::PathBuf),
    Other,
}

fn server_of(address: &Address) -> Server {
    match address {
        Address::Tcp { host, port, .. } => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let host = host.trim_end_matches('.').to_ascii_lowercase();
            match host.parse::<std::net::IpAddr>() {
                Ok(ip) if is_localhost(&ip) => Server::Loopback(*port),
                Ok(ip) => Server::Ip(ip.to_canonical(), *port),
                Err(_) if host == "localhost" || host.ends_with(".localhost") => {
                    Server::Loopback(*port)
                }
                Err(_) => Server::Name(host, *port),
            }
        }
        Address::Unix(path) => {
            let path = std::path::Path::new(path);
            Server::Socket(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
        }
        _ => Server::Other,
    }
}

/// The addresses `localhost` resolves to (RFC 6761 and every stock hosts file): a server
/// listening on the loopback answers on both.
fn is_localhost(ip: &std::net::IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip == std::net::IpAddr::from([127, 0, 0, 1]) || ip == std::net::Ipv6Addr::LOCALHOST
}

impl RedlockStore {
    /// Opens nothing yet, as each node's store. `endpoint` must be a Redlock's.
    pub fn new(endpoint: Endpoint, listener: Arc<dyn Listener>) -> RedlockStore {
        let lost = Arc::new(Drops::default());
        let nodes: Vec<Node> = match &endpoint.address {
            Address::Redlock(nodes) => nodes
                .iter()
                .enumerate()
                .map(|(n, node)| {
                    let book = Arc::new(NodeBook::default());
                    let heard = Arc::new(NodeListener {
                        inner: listener.clone(),
                        node: n,
                        book: book.clone(),
                        lost: lost.clone(),
                    });
                    Node {
                        store: Arc::new(RedisStore::quorum_node(node.clone(), heard)),
                        book,
                    }
                })
                .collect(),
            _ => Vec::new(),
        };
        let late = Arc::<LateBook>::default();
        let stores = nodes.iter().map(|node| node.store.clone()).collect();
        RedlockStore {
            quorum: nodes.len() / 2 + 1,
            endpoint,
            nodes,
            lost,
            debtors: Debtors::new(stores, late.clone()),
            late,
            stragglers: LatePool::default(),
            longest_ttl: AtomicU64::new(0),
        }
    }

    /// A lock of this Redlock may live `ttl` on a node from now (see `longest_ttl`).
    pub fn note_ttl(&self, ttl: Duration) {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        // A load first: every acquisition notes its TTL, which is rarely a new longest.
        if ms > self.longest_ttl.load(Ordering::Relaxed) {
            self.longest_ttl.fetch_max(ms, Ordering::Relaxed);
        }
    }

    /// How long a released lock's copy may still live on a node that missed the release.
    pub(super) fn release_life(&self) -> Duration {
        Duration::from_millis(self.longest_ttl.load(Ordering::Relaxed))
    }

    /// Each node's store, in the nodes' order.
    pub(super) fn stores(&self) -> Vec<Arc<RedisStore>> {
        self.nodes.iter().map(|node| node.store.clone()).collect()
    }

    /// See redlock_late.rs: what a straggler's win after a decision comes to.
    pub fn late(&self) -> &Arc<LateBook> {
        &self.late
    }

    pub(super) fn stragglers(&self) -> &LatePool {
        &self.stragglers
    }

    /// What each node is owed (redlock_owed.rs).
    pub(super) fn debtors(&self) -> &Debtors {
        &self.debtors
    }

    /// `release` is owed to node `node` (by index): sent on its runtime connection until it
    /// answers, for `ttl` at most, each try bounded by `bound` (redlock_owed.rs).
    pub fn owe(&self, node: usize, release: &Release<'_>, ttl: Duration, bound: Duration) {
        let free = Arc::new(Detached::of(release));
        self.debtors.owe(node, &free, ttl, bound);
    }

    /// How many frees node `node` is owed now.
    pub fn owed(&self, node: usize) -> usize {
        self.debtors.len(node)
    }

    /// Calls' stragglers out now, on every node.
    #[cfg(test)]
    pub fn stragglers_out(&self) -> usize {
        self.stragglers.out()
    }

    pub fn tally(&self) -> Tally {
        Tally {
            nodes: self.nodes.len(),
            quorum: self.quorum,
        }
    }

    /// Every node's answer to `op`, at its index; `None` for a straggler left behind once a
    /// quorum answered `yes` (see `gather`: a release waits for a quorum of releases, not
    /// of any answers, or it could leave our lock on the nodes it did not wait for). A node
    /// that does not answer (`until`) is owed `frees`, when `op` frees.
    pub(super) async fn on_all<O: Op + Sync>(
        &self,
        op: &O,
        bound: Duration,
        yes: impl Fn(&O::Out) -> bool,
        frees: Option<&(dyn Fn() -> Detached + Sync)>,
    ) -> Vec<Option<Result<O::Out, LockError>>>
    where
        O::Out: Send,
    {
        let enough = |seen: &[Option<Result<O::Out, LockError>>]| {
            let agree = seen
                .iter()
                .flatten()
                .filter(|r| matches!(r, Ok(out) if yes(out)));
            agree.count() >= self.quorum
        };
        self.until(op, bound, enough, frees).await
    }

    /// Every node's answer to `op`, at its index, asked until the answers so far are
    /// `enough` (then the stragglers' grace) or every node replied. When `op` frees our
    /// lock (`frees`), a node that fails it or is silent past the bound, in time or as a
    /// straggler, may keep our token: it is owed the free (redlock_owed.rs).
    pub(super) async fn until<O: Op + Sync>(
        &self,
        op: &O,
        bound: Duration,
        enough: impl Fn(&[Option<Result<O::Out, LockError>>]) -> bool,
        frees: Option<&(dyn Fn() -> Detached + Sync)>,
    ) -> Vec<Option<Result<O::Out, LockError>>>
    where
        O::Out: Send,
    {
        // Written once for every node.
        let request = Arc::new(Request::of(op));
        let replay = match O::REPEATABLE {
            true => Replay::Safe,
            false => Replay::Never,
        };
        let calls = (self.nodes.iter()).map(|node| node.store.send_owned(&request, bound, replay));
        let read = |reply: Result<redis::Value, LockError>| reply.and_then(|v| op.decode(v));
        let (replies, stragglers) =
            gather_read(calls, read, |_| false, enough, Duration::MAX).await;
        // Its parts copied only when a node may come to owe it (every node answered in time:
        // the usual case).
        let unanswered = |r: &Result<O::Out, LockError>| matches!(r, Err(e) if !is_answer(e));
        let owes = !stragglers.is_empty() || replies.iter().flatten().any(unanswered);
        let owing = (frees.filter(|_| owes)).map(|free| (self.debtors.clone(), Arc::new(free())));
        let terms = (self.release_life(), bound);
        if let Some((debtors, free)) = &owing {
            for (node, reply) in replies.iter().enumerate() {
                if let Some(reply) = reply {
                    debtors.heard(node, free, reply, terms);
                }
            }
        }
        // Not dropped: a write not yet on its node's connection would never reach it. One
        // the pool drops (reply `None`) may have been written, or may never be: owed.
        let left = unheard(&replies);
        finish(&self.stragglers, stragglers, left, move |node, reply| {
            if let Some((debtors, free)) = &owing {
                match reply {
                    Some(reply) => debtors.heard(node, free, &reply, terms),
                    None => debtors.owe(node, free, terms.0, terms.1),
                }
            }
            None::<std::future::Ready<()>>
        });
        replies
    }

    /// Sends `release` to the nodes `to` (by index), waiting for those in `must`. The others
    /// (they did not answer, or failed) may take their whole bound: theirs is left to a task
    /// of its own, bounded the same, so a failed attempt does not wait for a dead node. A
    /// node that does not answer it (down, or slow past the bound) may keep our token: it is
    /// owed the release for `ttl` (redlock_owed.rs).
    async fn release_on(
        &self,
        release: Detached,
        to: &[usize],
        must: &[usize],
        (ttl, bound): (Duration, Duration),
    ) {
        let (waited, left): (Vec<usize>, Vec<usize>) = to.iter().partition(|i| must.contains(i));
        let release = Arc::new(release);
        for &node in &left {
            let sent = self
                .debtors
                .clone()
                .free_on(node, release.clone(), (ttl, bound));
            let mut sent = Box::pin(sent);
            // Polled once here, so that it is handed to the node's connection now, ahead of
            // the next attempt with this token (a `lock()`'s retries keep theirs), which it
            // would otherwise free there if it went out after it.
            if futures_util::poll!(&mut sent).is_pending() {
                background::spawn(sent);
            }
        }
        join_all(
            (waited.iter())
                .map(|&node| (self.debtors.clone()).free_on(node, release.clone(), (ttl, bound))),
        )
        .await;
    }

    /// The answers of every node that answered, or the quorum error when fewer than a
    /// quorum did (or the first error a node answered, when that is why).
    pub(super) async fn answers<O: Op + Sync>(
        &self,
        op: &O,
        bound: Duration,
        yes: impl Fn(&O::Out) -> bool,
    ) -> Result<Vec<O::Out>, LockError>
    where
        O::Out: Send,
    {
        let replies = self.on_all(op, bound, yes, None).await;
        self.tally()
            .answers(replies.into_iter().flatten().collect())
    }

    /// The quorum-th longest of the nodes' TTLs: how long a quorum still has the lock.
    fn quorum_ttl(&self, ttls: impl Iterator<Item = Duration>) -> Option<Duration> {
        let mut ttls: Vec<Duration> = ttls.collect();
        ttls.sort_unstable_by(|a, b| b.cmp(a));
        ttls.get(self.quorum - 1).copied()
    }

    /// What a quorum of nodes agrees on, by `side` of their answers to a read, with the
    /// answers of that side. Waited for until a quorum agrees (or every node replied), so
    /// that one node's answer never decides the rest left behind; nodes that answered but
    /// agree on nothing with a quorum are the quorum error naming how many agreed.
    pub(super) async fn agreed<O: Op + Sync, K: PartialEq>(
        &self,
        op: &O,
        bound: Duration,
        side: impl Fn(&O::Out) -> K,
    ) -> Result<(K, Vec<O::Out>), LockError>
    where
        O::Out: Send,
    {
        let request = Request::of(op);
        let request = &request;
        let calls = (self.nodes.iter()).map(|node| node.store.run_request(op, request, bound));
        let sides = |seen: &[Option<Result<O::Out, LockError>>]| {
            let sides: Vec<K> = (seen.iter().flatten().flatten()).map(&side).collect();
            most_agreeing(sides)
        };
        let enough = |seen: &[Option<Result<O::Out, LockError>>]| {
            sides(seen).is_some_and(|(_, count)| count >= self.quorum)
        };
        // The nodes left behind are dropped, unlike a write's (`until`) or a refresh's: a
        // read sets nothing, so one never sent changes nothing on its node, and its late
        // answer could only revise a verdict already given (the next read asks again).
        let replies = gather(calls, |_| false, enough).await;
        let answers = self
            .tally()
            .answers(replies.into_iter().flatten().collect())?;
        match most_agreeing(answers.iter().map(&side).collect()) {
            Some((agreed, count)) if count >= self.quorum => {
                let on_side: Vec<O::Out> = (answers.into_iter())
                    .filter(|a| side(a) == agreed)
                    .collect();
                Ok((agreed, on_side))
            }
            other => {
                let count = other.map_or(0, |(_, count)| count);
                let (nodes, quorum) = (self.nodes.len(), self.quorum);
                Err(quorum_error(count, nodes, quorum, "agreed"))
            }
        }
    }

    /// Frees what a failed attempt may have set on every node but those that said held.
    pub(super) async fn undo(
        &self,
        op: &AcquireAttempt<'_>,
        replies: &[Option<Result<Acquired, LockError>>],
        bound: Duration,
    ) {
        self.late.end(op.token);
        let release = redlock_detached::undo(op);
        // Every node but those that said held; waited for, those that won.
        let to: Vec<usize> = (replies.iter().enumerate())
            .filter(|(_, reply)| !matches!(reply, Some(Ok(Acquired::Held { .. }))))
            .map(|(i, _)| i)
            .collect();
        let must: Vec<usize> = (replies.iter().enumerate())
            .filter(|(_, reply)| matches!(reply, Some(Ok(Acquired::Won { .. }))))
            .map(|(i, _)| i)
            .collect();
        self.release_on(release, &to, &must, (op.ttl, bound)).await;
    }

    /// Takes `fence`, the highest a quorum of `won` nodes drew, for the acquisition: those
    /// nodes' counters raised past it first when they differ, so that a later quorum meeting
    /// this one draws more (docs/plans/redlock.md). Whether a quorum confirmed it.
    pub(super) async fn write_back(
        &self,
        fence_key: &[u8],
        won: &[(usize, u64)],
        ttl: Duration,
        window_ms: Option<u64>,
        bound: Duration,
    ) -> Result<u64, LockError> {
        let fence = won.iter().map(|&(_, f)| f).max().unwrap_or(0);
        if won.iter().all(|&(_, f)| f == fence) {
            return Ok(fence);
        }
        let raise = FenceRaise {
            fence_key,
            fence,
            ttl,
            window_ms,
        };
        // The counter ends past the fence: the one after it stays kept for a handover.
        (self.written_back(&raise, won, fence, bound, |&after| after > fence)).await
    }

    /// Runs the write-back `op` of `fence` on the nodes `won`: the fence once a quorum of
    /// them `confirms` it; else a node's own error, or the quorum error.
    pub(super) async fn written_back<O: Op + Sync>(
        &self,
        op: &O,
        won: &[(usize, u64)],
        fence: u64,
        bound: Duration,
        confirms: impl Fn(&O::Out) -> bool,
    ) -> Result<u64, LockError>
    where
        O::Out: Send,
    {
        let request = Request::of(op);
        let request = &request;
        let raised = join_all(won.iter().filter_map(|&(i, _)| {
            (self.nodes.get(i)).map(|node| node.store.run_request(op, request, bound))
        }))
        .await;
        let confirmed = raised
            .iter()
            .filter(|r| matches!(r, Ok(out) if confirms(out)))
            .count();
        if confirmed >= self.quorum {
            return Ok(fence);
        }
        Err(raised
            .into_iter()
            .find_map(|r| r.err().filter(|e| !e.is_infrastructure()))
            .unwrap_or_else(|| {
                quorum_error(
                    confirmed,
                    self.nodes.len(),
                    self.quorum,
                    "confirmed the fence",
                )
            }))
    }
}

/// The side most of `sides` are on, and how many are.
fn most_agreeing<K: PartialEq>(sides: Vec<K>) -> Option<(K, usize)> {
    let count = |k: &K| sides.iter().filter(|other| *other == k).count();
    let best = (0..sides.len()).max_by_key(|&i| sides.get(i).map_or(0, count))?;
    let best_count = sides.get(best).map_or(0, count);
    sides.into_iter().nth(best).map(|k| (k, best_count))
}

/// Layouts a quorum cannot take yet: a fair line per node could order waiters differently
/// on each.
fn refused_layout(op: &AcquireAttempt<'_>) -> Option<LockError> {
    match op.layout {
        Layout::Fair { .. } => Some(LockError::invalid_type(
            "fair",
            "fair locks are not supported over a Redlock of several servers yet",
        )),
        _ => None,
    }
}

impl LockStore for RedlockStore {
    fn caps(&self) -> Caps {
        Caps {
            fencing: Fencing::Quorum,
            handover: Handover::Quorum,
            fairness: Fairness::None,
            // Each node on a JS-thread socket of its own, when every node can have one.
            fast_path: match self
                .nodes
                .iter()
                .all(|node| direct::supports(node.store.endpoint()))
            {
                true => FastPath::Quorum,
                false => FastPath::None,
            },
            wake: WakeKind::Broadcast,
            // The first attempt on the nodes' sockets (ops/fast/quorum_calls.rs).
            transactions: true,
            doubt_unconfirmed: true,
        }
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// An op no method below answers for a quorum (the grants' ring ops, which a Redlock's
    /// store never sends: it grants nothing): the first answer, once a quorum answered.
    async fn run<O: Op + Sync>(&self, op: &O, bound: Duration) -> Result<O::Out, LockError>
    where
        O::Out: Send,
    {
        let mut answers = self.answers(op, bound, |_| true).await?.into_iter();
        answers
            .next()
            .ok_or_else(|| quorum_error(0, self.nodes.len(), self.quorum, "answered"))
    }

    /// On the node that heard the request: no quorum, and one answer.
    async fn run_on<O: Op + Sync>(
        &self,
        node: Option<usize>,
        op: &O,
        bound: Duration,
    ) -> Result<O::Out, LockError>
    where
        O::Out: Send,
    {
        match node.and_then(|n| self.nodes.get(n)) {
            Some(node) => node.store.run(op, bound).await,
            None => self.run(op, bound).await,
        }
    }

    async fn acquire(
        &self,
        op: &AcquireAttempt<'_>,
        bound: Duration,
    ) -> Result<Acquired, LockError> {
        if let Some(refused) = refused_layout(op) {
            return Err(refused);
        }
        let tally = self.tally();
        self.late.begin(op.token);
        self.note_ttl(op.ttl);
        let request = Arc::new(Request::of(op));
        let free = op.late_free().map(Arc::new);
        let attempts = (self.nodes.iter())
            .map(|node| node.store.acquire_owned(&request, &free, bound, op.ttl));
        // The validity counts from the first send; the stragglers' grace leaves most of what
        // is left of it to the winner (see `grace`).
        let room = clock::validity(op.ttl).saturating_sub(op.sent.elapsed());
        let read = |reply: Result<redis::Value, LockError>| reply.and_then(|v| op.decode(v));
        let (replies, stragglers) = gather_read(
            attempts,
            read,
            |seen| failed(&tally, seen),
            |seen| won(&tally, seen),
            room,
        )
        .await;
        self.finish_attempt(op, (stragglers, unheard(&replies)), free, bound);
        self.conclude(op, replies, op.sent, bound).await
    }

    async fn release(&self, op: &Release<'_>, bound: Duration) -> Result<bool, LockError> {
        self.late.end(op.token);
        let frees = || Detached::of(op);
        let replies = self
            .on_all(op, bound, |released| *released, Some(&frees))
            .await;
        let tally = self.tally();
        match release_verdict(&tally, &replies) {
            Some(released) => released,
            // The gather leaves a node behind only once a quorum released (the verdict's
            // first case): what those that answered say.
            None => tally.released(replies.into_iter().flatten().collect()),
        }
    }

    /// The waiter's fence is taken as an acquisition's, within the waiter's validity; short
    /// of a quorum, or of validity, the waiter's token is freed everywhere and it tries for
    /// itself.
    async fn hand_over(
        &self,
        op: &HandOver<'_>,
        bound: Duration,
    ) -> Result<Option<u64>, LockError> {
        let started = Instant::now();
        self.late.end(op.token);
        self.note_ttl(op.ttl);
        let replies = self.on_all(op, bound, Option::is_some, None).await;
        let won: Vec<(usize, u64)> = (replies.iter().enumerate())
            .filter_map(|(i, reply)| match reply {
                Some(Ok(Some(fence))) => Some((i, *fence)),
                _ => None,
            })
            .collect();
        // As an acquisition: the waiter's only while a quorum has it with validity left.
        let left = |now: Instant| validity_left(op.ttl, started, now);
        if let (true, Some(room)) = (won.len() >= self.quorum, left(Instant::now())) {
            let fence_key = crate::core::basics::keys::fence_key(op.lock_key);
            let fence = (self.write_back(&fence_key, &won, op.ttl, None, bound.min(room))).await;
            if let (Ok(fence), Some(_)) = (fence, left(Instant::now())) {
                return Ok(Some(fence));
            }
        }
        let free = Detached::of(&Release::late_win(op.lock_key, op.to, false));
        let every: Vec<usize> = (0..self.nodes.len()).collect();
        let handed: Vec<usize> = won.iter().map(|&(i, _)| i).collect();
        self.release_on(free, &every, &handed, (op.ttl, bound))
            .await;
        let heard = replies.iter().flatten().filter(|r| answered(r)).count();
        self.tally().heard(heard)?;
        Ok(None)
    }

    /// The new TTL a quorum has (the lock stands as long as a quorum does).
    async fn extend(
        &self,
        op: &Extend<'_>,
        bound: Duration,
    ) -> Result<Option<Duration>, LockError> {
        let answers = self.answers(op, bound, Option::is_some).await?;
        if let Some(&longest) = answers.iter().flatten().max() {
            self.note_ttl(longest);
        }
        Ok(self.quorum_ttl(answers.into_iter().flatten()))
    }

    /// Held when a quorum says so, free when a quorum says so, else the quorum error.
    async fn is_locked(&self, op: &Exists<'_>, bound: Duration) -> Result<bool, LockError> {
        Ok(self.agreed(op, bound, |&held| held).await?.0)
    }

    /// As `is_locked`, the quorum-th longest TTL when held.
    async fn holder_ttl(
        &self,
        op: &Pttl<'_>,
        bound: Duration,
    ) -> Result<Option<Duration>, LockError> {
        let (held, ttls) = self.agreed(op, bound, Option::is_some).await?;
        Ok(held
            .then(|| self.quorum_ttl(ttls.into_iter().flatten()))
            .flatten())
    }

    /// The contents a quorum holds, with the quorum-th longest TTL among them; nothing when
    /// a quorum holds nothing; else the quorum error.
    async fn inspect(
        &self,
        op: &Inspect<'_>,
        bound: Duration,
    ) -> Result<(Option<Vec<u8>>, i64), LockError> {
        let (value, answers) = self.agreed(op, bound, |(value, _)| value.clone()).await?;
        if value.is_none() {
            return Ok((None, -2));
        }
        let mut ttls: Vec<i64> = answers.into_iter().map(|(_, ttl)| ttl).collect();
        ttls.sort_unstable_by(|a, b| b.cmp(a));
        let ttl = ttls.get(self.quorum - 1).copied().unwrap_or(-2);
        Ok((value, ttl))
    }

    /// Refused: the value would live on N independent servers, and a read of any one of
    /// them (the user reads with their own client) could see a stale holder's write that
    /// the quorum refused, or miss the one it accepted. A fence is checked by the resource
    /// itself, in one place.
    async fn fenced_write(&self, _op: &FencedSet<'_>, _bound: Duration) -> Result<bool, LockError> {
        Err(LockError::invalid_type(
            "fencedSet",
            "fencedSet is not available over a Redlock of several servers: each server would keep its own copy of the value, and a read of one could see a stale holder's write; check handle.fence in the store you guard (one place that compares fences)",
        ))
    }

    /// Per lock: refreshed when a quorum says so, lost when a quorum can no longer say so,
    /// else no answer (redlock_refresh.rs).
    async fn refresh(&self, batch: &RefreshBatch, bound: Duration) -> Vec<Option<bool>> {
        self.refresh_on_quorum(batch, bound).await
    }

    /// Released when a quorum released (redlock_syncguard.rs).
    async fn release_by_id(
        &self,
        op: &ReleaseById<'_>,
        bound: Duration,
    ) -> Result<ReleasedById, LockError> {
        self.syncguard_release(op, bound).await
    }

    /// The new expiry a quorum has, `None` when fewer extended (redlock_syncguard.rs).
    async fn extend_by_id(
        &self,
        op: &ExtendById<'_>,
        bound: Duration,
    ) -> Result<Option<i64>, LockError> {
        self.syncguard_extend(op, bound).await
    }

    /// Held when a quorum has a live record, free when a quorum has none, else the quorum
    /// error.
    async fn syncguard_is_locked(
        &self,
        op: &SyncguardIsLocked<'_>,
        bound: Duration,
    ) -> Result<bool, LockError> {
        Ok(self.agreed(op, bound, |&held| held).await?.0)
    }

    /// The record a quorum holds (redlock_syncguard.rs).
    async fn syncguard_lookup(
        &self,
        op: &SyncguardLookup<'_>,
        bound: Duration,
    ) -> Result<Option<Vec<u8>>, LockError> {
        self.syncguard_read(op, bound).await
    }

    /// Every node's channel: a release on any of them wakes us; polling covers the rest.
    async fn listen(&self, channel: &[u8], subs: &dyn Subscriptions, bound: Duration) -> bool {
        let listening = join_all(self.nodes.iter().map(|node| async move {
            let book = NodeSubscriptions {
                node: &node.book,
                shared: subs,
            };
            node.store.listen(channel, &book, bound).await
        }))
        .await;
        // Marked here, once: a node subscribed before answers without marking it again.
        let listening = listening.into_iter().any(|yes| yes);
        if listening {
            subs.mark_subscribed(channel);
        }
        listening
    }

    /// The wake table forgets its idle channels here (the nodes' links never ask it: each
    /// node drops what its own book holds that nobody waits on any more).
    async fn drop_idle(&self, subs: &dyn Subscriptions, bound: Duration) {
        let _forgotten = subs.take_idle(IDLE_SUBSCRIPTIONS / 2);
        join_all(self.nodes.iter().map(|node| async move {
            let book = NodeSubscriptions {
                node: &node.book,
                shared: subs,
            };
            node.store.drop_idle(&book, bound).await
        }))
        .await;
    }

    async fn enqueue(&self, op: &Enqueue<'_>, bound: Duration) -> Result<bool, LockError> {
        Ok(self
            .answers(op, bound, |_| true)
            .await?
            .into_iter()
            .any(|free| free))
    }

    async fn wake_next(&self, op: &WakeNext<'_>, bound: Duration) -> Result<bool, LockError> {
        Ok(self
            .answers(op, bound, |_| true)
            .await?
            .into_iter()
            .any(|woke| woke))
    }

    async fn leave_line(&self, op: &LeaveLine<'_>, bound: Duration) -> Result<(), LockError> {
        self.answers(op, bound, |_| true).await.map(|_| ())
    }

    async fn leave_queue(&self, op: &LeaveQueue<'_>, bound: Duration) -> Result<(), LockError> {
        self.answers(op, bound, |_| true).await.map(|_| ())
    }

    async fn prepare(&self, bound: Duration, scripts_for: ScriptsFor) -> Result<(), LockError> {
        let calls = (self.nodes.iter()).map(|node| node.store.prepare(bound, scripts_for));
        let ready = |seen: &[Option<Result<(), LockError>>]| {
            seen.iter().flatten().filter(|r| r.is_ok()).count() >= self.quorum
        };
        let prepared = gather(calls, |_| false, ready).await;
        self.tally()
            .answers(prepared.into_iter().flatten().collect())
            .map(|_| ())
    }

    fn is_prepared(&self) -> bool {
        self.nodes
            .iter()
            .filter(|node| node.store.is_prepared())
            .count()
            >= self.quorum
    }

    fn lost(&self) -> &Drops {
        &self.lost
    }

    /// Open only when no node has a restart quarantine (see `RedisStore::gate_open`).
    fn gate_open(&self) -> bool {
        self.nodes.iter().all(|node| node.store.gate_open())
    }

    fn forget_gate(&self) {
        for node in &self.nodes {
            node.store.forget_gate();
        }
    }

    /// Waits, within `bound`, until a quorum of nodes' gates is open, when that comes within
    /// it: a node in its quarantine grants nothing (its attempt abstains), so going earlier
    /// could only fail. Never refuses: past the bound, or short of a quorum of nodes that
    /// answer, the attempt goes and fails with the quorum error naming what it lacked.
    async fn pass_gate(&self, _key: &[u8], bound: Duration) -> Result<(), LockError> {
        if self.gate_open() {
            return Ok(());
        }
        let deadline = Instant::now() + bound;
        let open_now = |seen: &[Option<Result<Instant, LockError>>]| {
            let now = Instant::now();
            let open = seen.iter().flatten().flatten().filter(|&&at| at <= now);
            open.count() >= self.quorum
        };
        let learned = |seen: &[Option<Result<Instant, LockError>>]| {
            seen.iter().flatten().flatten().count() >= self.quorum
        };
        let calls = (self.nodes.iter()).map(|node| node.store.gate_opens(bound));
        let gates = gather(calls, open_now, learned).await;
        let mut opens: Vec<Instant> = gates.into_iter().flatten().flatten().collect();
        opens.sort_unstable();
        match opens.get(self.quorum - 1) {
            Some(&at) if at > Instant::now() && at <= deadline => {
                tokio::time::sleep_until(at.into()).await;
            }
            _ => {}
        }
        Ok(())
    }

    fn heed_command_timeout(&self, command_timeout: Duration) {
        for node in &self.nodes {
            node.store.heed_command_timeout(command_timeout);
        }
    }

    /// A Redlock has no one clock: the first node's that answers.
    async fn server_time(&self, key: &[u8], bound: Duration) -> Result<SystemTime, LockError> {
        let times = gather(
            self.nodes
                .iter()
                .map(|node| node.store.server_time(key, bound)),
            |seen| seen.iter().flatten().any(Result::is_ok),
            |_| false,
        )
        .await;
        let mut last = None;
        for time in times.into_iter().flatten() {
            match time {
                Ok(time) => return Ok(time),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| quorum_error(0, self.nodes.len(), 1, "answered")))
    }
}
