//! Wake-up on release, one waiter per release across every process. A connection with
//! waiters for a lock subscribes to the lock's channel (RESP3 carries pushes beside replies
//! on the ordinary connection) and queues itself in Redis, in a sorted set beside the lock.
//! A release pops the connection that queued first and publishes its id; only that
//! connection reacts, waking its own first waiter (in the order they joined). Everyone else sleeps
//! on, so a release never sets off a herd. Polling stays as the safety net for what sends no
//! message: a lock that expires, or a message lost with a connection.

use super::chores::{Chore, Chores};
use super::lent::Lends;
use super::owner::Owner;
use super::releases::{Mark, Releases};
use crate::core::backend::link::IDLE_SUBSCRIPTIONS;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a queue outlives the last connection that joined it. A connection that waits
/// longer rejoins with its next failed attempt.
pub const QUEUE_LIFETIME: Duration = Duration::from_secs(60);

/// How often a waiter of a fair lock (`fair: true`) tries at the least, so its place in the
/// lock's line stays alive (see acquire_fair.lua): a poll or retry scheduled later gets
/// extra attempts in between, which count as neither.
pub const FAIR_HEARTBEAT: Duration = Duration::from_millis(500);

/// How long a fair waiter's place outlives its last attempt. A waiter whose process went away
/// holds up the line (the lock stays free for it) for at most this long.
pub const FAIR_PLACE: Duration = Duration::from_millis(2_000);

pub use keys::{alive_key, line_key, queue_key, released_channel as channel};

/// A connection's place in a lock's queue: microseconds of its wall clock (clocks of
/// different hosts differ a little; the order is a courtesy, never a safety property).
/// Every way into the queue uses it, so all places compare alike.
pub fn queue_score() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_micros() as u64)
        .unwrap_or(0)
}

struct Waiter {
    notify: Notify,
    /// Told of a release it has not acted on yet; the next wake goes to the next waiter.
    woken: AtomicBool,
    /// The TTL it asks for: what a handoff grants it.
    ttl: Duration,
    /// A release of this process is handing the lock to it right now.
    reserved: AtomicBool,
    /// The lock handed to it, until it takes it.
    grant: Mutex<Option<Lease>>,
    /// Who waits, when the releaser may answer them itself (see `Caller`).
    caller: Option<Caller>,
    /// The caller was answered by whoever handed it the lock: the wait is over.
    settled: AtomicBool,
    /// Its number on this connection: a fair lock's release names the waiter it wakes.
    seq: u64,
    /// It waits for a fair lock: woken by name, in the line's order, never handed a lock.
    fair: bool,
    /// It has a place in the fair lock's line, to give up when it stops waiting.
    in_line: AtomicBool,
    /// On whose behalf it waits: once that owner is gone, nobody is handed the lock through
    /// it, and its wait ends (see owner.rs).
    owner: Option<Owner>,
}

/// The caller of a wait, as the binding knows it: a call (`id`) of one JS thread
/// (`thread`). A release made on that same thread may hand the lock over and answer the
/// caller itself, with no trip through the runtime (see binding/js/socket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub thread: usize,
    pub id: u32,
    /// It opted in to starting on its releaser's lease, before Redis confirms the handover
    /// (`lendOnHandover`).
    pub lent_start: bool,
}

impl Waiter {
    fn new(
        ttl: Duration,
        caller: Option<Caller>,
        seq: u64,
        fair: bool,
        owner: Option<Owner>,
    ) -> Self {
        Waiter {
            notify: Notify::new(),
            woken: AtomicBool::new(false),
            ttl,
            reserved: AtomicBool::new(false),
            grant: Mutex::new(None),
            caller,
            settled: AtomicBool::new(false),
            seq,
            fair,
            in_line: AtomicBool::new(false),
            owner,
        }
    }

    /// Its owner ended: whatever its wait would win goes to the next in line.
    fn is_orphaned(&self) -> bool {
        self.owner.as_ref().is_some_and(Owner::is_gone)
    }
}

/// The waiter a release of this process hands the lock to (see release.rs). Dropped
/// unused, it lets the waiter be picked again.
pub struct Reservation {
    waiter: Arc<Waiter>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.waiter.reserved.store(false, Ordering::Release);
    }
}

impl Reservation {
    /// The TTL the waiter asked for.
    pub fn ttl(&self) -> Duration {
        self.waiter.ttl
    }

    /// Who waits, when its caller may be answered directly.
    pub fn caller(&self) -> Option<Caller> {
        self.waiter.caller
    }
}

struct Channel {
    lock_key: Vec<u8>,
    /// In the order they joined: request order for those that join before their first
    /// attempt, the order their attempts were answered for those that join after it.
    waiters: VecDeque<Arc<Waiter>>,
    subscribed: bool,
    /// A background task is subscribing and queueing this connection for the lock.
    preparing: bool,
    /// Whether this connection is in the lock's queue as far as we know (a wake for us took
    /// us off it; so may a lost connection or an expired queue, which the next failed
    /// attempt repairs).
    queued: Option<Instant>,
    /// Handoffs of the lock between waiters of this connection so far: while it moves, the
    /// first waiter's turn comes by handoff, and its poll would only find the lock held.
    handoffs: u64,
    /// Turns announced to this connection so far: each took it off the lock's queue.
    turns: u64,
}

impl Channel {
    /// Nobody waits on it, and we neither listen to it nor queue for it (nor are about to):
    /// nothing would be lost with it. Kept, every key ever waited on would stay for good.
    fn is_forgettable(&self) -> bool {
        self.waiters.is_empty() && !self.subscribed && !self.preparing && self.queued.is_none()
    }
}

/// `Wakes::channels`, locked: how many locks it holds is written to `remembered` when the
/// lock is let go, still under the mutex, whatever changed them.
struct Table<'a> {
    channels: MutexGuard<'a, HashMap<Vec<u8>, Channel>>,
    remembered: &'a AtomicUsize,
}

impl Drop for Table<'_> {
    fn drop(&mut self) {
        self.remembered.store(self.channels.len(), Ordering::SeqCst);
    }
}

impl Deref for Table<'_> {
    type Target = HashMap<Vec<u8>, Channel>;

    fn deref(&self) -> &Self::Target {
        &self.channels
    }
}

impl DerefMut for Table<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.channels
    }
}

/// Every waiter of one connection, by channel.
#[derive(Default)]
pub struct Wakes {
    channels: Mutex<HashMap<Vec<u8>, Channel>>,
    /// How many locks `channels` remembers (kept by `Table`), read without its mutex: while it is none, a
    /// waiter need not join before its first attempt, nor a release look for waiters.
    remembered: AtomicUsize,
    /// Releases that looked for waiters, for the waiters that join late (see releases.rs).
    releases: Releases,
    /// Who carries out what a departing waiter leaves to do (the connection's store), from
    /// where no caller is waiting.
    chores: OnceLock<Weak<dyn Chores>>,
    /// The last waiter's number.
    seq: AtomicU64,
    /// Waiters answered by a release before Redis ran its handover.
    lends: Lends,
    /// Locks still subscribed whose last waiter left since idle subscriptions were last
    /// looked at (`take_idle`): after a burst of waiters with no SUBSCRIBE to follow, they
    /// are dropped once there are enough of them, not left on the server for good.
    left_idle: AtomicUsize,
}

/// What a wake addressed to this connection asks of it.
pub enum Turn {
    /// A waiter was woken. Its attempt keeps the connection queued if others here wait.
    Woke,
    /// Nobody here waits any more: pass the wake on to the next connection (lock key).
    PassOn(Vec<u8>),
}

impl Wakes {
    /// Names who carries out this table's chores, once.
    pub fn hire(&self, chores: Weak<dyn Chores>) {
        let _first = self.chores.set(chores);
    }

    fn chore(&self, chore: Chore) {
        if let Some(chores) = self.chores.get().and_then(Weak::upgrade) {
            chores.carry_out(chore);
        }
    }

    pub fn lends(&self) -> &Lends {
        &self.lends
    }

    /// Queues a waiter for `lock_key` (wanting it for `ttl`), behind those of this
    /// connection already waiting.
    pub fn join(self: &Arc<Self>, lock_key: &[u8], ttl: Duration) -> Ticket {
        self.join_as(lock_key, ttl, None, None)
    }

    /// As `join`, for `caller` (see `Caller`), on behalf of `owner`.
    pub fn join_as(
        self: &Arc<Self>,
        lock_key: &[u8],
        ttl: Duration,
        caller: Option<Caller>,
        owner: Option<Owner>,
    ) -> Ticket {
        self.join_with(lock_key, ttl, caller, false, owner)
    }

    /// Queues a waiter for a fair lock: it is woken by name when its turn in the lock's line
    /// comes, and a release of ours never hands it the lock out of turn.
    pub fn join_fair(
        self: &Arc<Self>,
        lock_key: &[u8],
        ttl: Duration,
        owner: Option<Owner>,
    ) -> Ticket {
        self.join_with(lock_key, ttl, None, true, owner)
    }

    fn join_with(
        self: &Arc<Self>,
        lock_key: &[u8],
        ttl: Duration,
        caller: Option<Caller>,
        fair: bool,
        owner: Option<Owner>,
    ) -> Ticket {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let waiter = Arc::new(Waiter::new(ttl, caller, seq, fair, owner));
        let name = channel(lock_key);
        let mut channels = self.table();
        // Looked up before it is inserted: the name is copied only for a new channel.
        let entry = match channels.get_mut(&name) {
            Some(entry) => entry,
            None => channels.entry(name.clone()).or_insert_with(|| Channel {
                lock_key: lock_key.to_vec(),
                waiters: VecDeque::new(),
                subscribed: false,
                preparing: false,
                queued: None,
                handoffs: 0,
                turns: 0,
            }),
        };
        entry.waiters.push_back(waiter.clone());
        let handoffs_at_join = entry.handoffs;
        drop(channels);
        Ticket {
            wakes: self.clone(),
            channel: name,
            waiter,
            handoffs_at_join,
        }
    }

    /// The table, locked. However it is changed, `remembered` follows as it is let go.
    fn table(&self) -> Table<'_> {
        Table {
            channels: lock(&self.channels),
            remembered: &self.remembered,
        }
    }

    /// Whether this connection remembers the lock at `lock_key` (someone of ours waits for
    /// it, listens to it or queues for it): a new waiter then joins before its first attempt,
    /// to keep its place behind ours and have that attempt queue for wakes. `lock_key` is
    /// only worked out when any lock is remembered at all.
    pub fn remembers(&self, lock_key: impl FnOnce() -> Vec<u8>) -> bool {
        if self.remembered.load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.table().contains_key(&channel(&lock_key()))
    }

    /// Read before the first attempt of a waiter that does not join yet (`key_parts`, its
    /// lock key in pieces), for `join_late`.
    pub fn mark(&self, key_parts: &[&[u8]]) -> Mark {
        self.releases.mark(key_parts)
    }

    /// As `join_as`, for a waiter whose first attempt (made after `mark`) found the lock
    /// held; `true` beside it when a release of ours may have missed it meanwhile: its
    /// attempt is stale, and it should try again at once.
    pub fn join_late(
        self: &Arc<Self>,
        lock_key: &[u8],
        ttl: Duration,
        caller: Option<Caller>,
        owner: Option<Owner>,
        mark: Mark,
    ) -> (Ticket, bool) {
        let ticket = self.join_with(lock_key, ttl, caller, false, owner);
        let missed = self.releases.since(mark);
        (ticket, missed)
    }

    /// A release of ours of the lock at `lock_key` asks whether waiters of this connection
    /// wait for it; counted first, so that a waiter joining late learns of it (releases.rs).
    pub fn waiters_at_release(&self, lock_key: &[u8]) -> bool {
        self.releases.count(&[lock_key]);
        if self.remembered.load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.has_waiters(&channel(lock_key))
    }

    fn with<T>(&self, channel: &[u8], read: impl FnOnce(&mut Channel) -> T) -> Option<T> {
        self.table().get_mut(channel).map(read)
    }

    pub(crate) fn is_subscribed(&self, channel: &[u8]) -> bool {
        self.with(channel, |entry| entry.subscribed)
            .unwrap_or(false)
    }

    /// Whether this connection should queue for the lock: nobody waiting any more, a place in
    /// its queue would only have the next release's wake passed on through us.
    pub(crate) fn needs_queueing(&self, channel: &[u8]) -> bool {
        self.with(channel, |entry| {
            entry.queued.is_none() && !entry.waiters.is_empty()
        })
        .unwrap_or(false)
    }

    /// Claims the job of making a lock's waiters wakeable (subscribed, queued); `false` when
    /// there is nothing to do or another task is at it.
    pub(crate) fn begin_preparing(&self, channel: &[u8]) -> bool {
        self.with(channel, |entry| {
            let needed = !entry.subscribed || entry.queued.is_none();
            let claim = needed && !entry.preparing && !entry.waiters.is_empty();
            entry.preparing |= claim;
            claim
        })
        .unwrap_or(false)
    }

    pub(crate) fn end_preparing(&self, channel: &[u8]) {
        let mut channels = self.table();
        if let Some(entry) = channels.get_mut(channel) {
            entry.preparing = false;
            // Its last waiter may have left meanwhile, and the subscription failed.
            if entry.is_forgettable() {
                channels.remove(channel);
            }
        }
    }

    pub(crate) fn mark_subscribed(&self, channel: &[u8]) {
        self.with(channel, |entry| entry.subscribed = true);
    }

    #[cfg(test)]
    pub(crate) fn mark_queued(&self, channel: &[u8], queued: bool) {
        self.with(channel, |entry| {
            entry.queued = queued.then(Instant::now);
        });
    }

    /// How many turns were announced to this connection for the lock so far (see
    /// `mark_queued_after`).
    pub(crate) fn turns(&self, channel: &[u8]) -> u64 {
        self.with(channel, |entry| entry.turns).unwrap_or(0)
    }

    /// As `mark_queued`, for a queueing sent when `turns` turns had been announced. A turn
    /// announced since popped us off the queue, and its message is read before the reply that
    /// queued us is acted on; marked queued after it, we would count as queued for good, and
    /// the lock's subscription would not be dropped. Taken as not queued then: at worst, a
    /// wake is passed on from a lock we forgot. Replies are acted on in no set order, so the
    /// last waiter may have left meanwhile (see `Ticket`'s drop): we leave the queue again.
    pub(crate) fn mark_queued_after(&self, channel: &[u8], queued: bool, turns: u64) {
        let leave = self
            .with(channel, |entry| {
                let queued = queued && entry.turns == turns;
                let leave = queued && entry.waiters.is_empty();
                entry.queued = (queued && !leave).then(Instant::now);
                leave.then(|| entry.lock_key.clone())
            })
            .flatten();
        if let Some(lock_key) = leave {
            self.chore(Chore::LeaveQueue(lock_key));
        }
    }

    /// Whether waiters of this connection wait for the lock behind `channel`.
    pub fn has_waiters(&self, channel: &[u8]) -> bool {
        self.with(channel, |entry| !entry.waiters.is_empty())
            .unwrap_or(false)
    }

    /// Picks the waiter a release of ours hands the lock to: the first in order that
    /// is neither woken (about to try on its own) nor already being handed one, and whose
    /// owner is still there.
    pub fn reserve(&self, channel: &[u8]) -> Option<Reservation> {
        self.with(channel, |entry| {
            let waiter = entry.waiters.iter().find(|waiter| {
                !waiter.fair
                    && !waiter.is_orphaned()
                    && !waiter.woken.load(Ordering::Acquire)
                    && !waiter.reserved.swap(true, Ordering::AcqRel)
            })?;
            Some(Reservation {
                waiter: waiter.clone(),
            })
        })
        .flatten()
    }

    /// The handoff to `to` happened: it holds `lease` now. The lease comes back when the
    /// waiter left meanwhile (timed out, cancelled, its owner gone): the caller frees it.
    #[must_use]
    pub fn grant(&self, channel: &[u8], to: Reservation, lease: Lease) -> Option<Lease> {
        let mut channels = self.table();
        let entry = channels
            .get_mut(channel)
            .filter(|_| !to.waiter.is_orphaned())
            .filter(|entry| entry.waiters.iter().any(|w| Arc::ptr_eq(w, &to.waiter)));
        let Some(entry) = entry else {
            return Some(lease);
        };
        entry.handoffs += 1;
        *lock(&to.waiter.grant) = Some(lease);
        to.waiter.woken.store(true, Ordering::Release);
        to.waiter.reserved.store(false, Ordering::Release);
        to.waiter.notify.notify_one();
        None
    }

    /// The handoff to `to` happened (or was sent, the waiter starting on a lent lease), and
    /// its caller was answered by the one who handed it over: its wait is over. `false` when
    /// the waiter left meanwhile (the lock is then the caller's to free).
    pub fn settle(&self, channel: &[u8], to: Reservation) -> bool {
        let mut channels = self.table();
        let Some(entry) = channels.get_mut(channel) else {
            return false;
        };
        let before = entry.waiters.len();
        entry.waiters.retain(|w| !Arc::ptr_eq(w, &to.waiter));
        if entry.waiters.len() == before {
            return false;
        }
        entry.handoffs += 1;
        to.waiter.settled.store(true, Ordering::Release);
        to.waiter.woken.store(false, Ordering::Release);
        to.waiter.reserved.store(false, Ordering::Release);
        to.waiter.notify.notify_one();
        true
    }

    /// The handoff to `to` did not happen: it tries on its own, at once.
    pub fn unreserve(&self, to: Reservation) {
        let _channels = self.table();
        to.waiter.reserved.store(false, Ordering::Release);
        to.waiter.woken.store(true, Ordering::Release);
        to.waiter.notify.notify_one();
    }

    /// Our own release freed the lock: the first of our waiters not already woken goes
    /// next, without a round trip through the queue.
    pub fn wake_local(&self, channel: &[u8]) {
        self.with(channel, wake_next);
    }

    /// A fair lock's release (or a waiter leaving its line) named waiter `seq` of this
    /// connection as next in line: it tries at once. Nothing happens when it left meanwhile
    /// (leaving, it told the next in line itself).
    pub fn wake_member(&self, channel: &[u8], seq: u64) {
        self.with(channel, |entry| {
            if let Some(waiter) = entry.waiters.iter().find(|waiter| waiter.seq == seq) {
                waiter.woken.store(true, Ordering::Release);
                waiter.notify.notify_one();
            }
        });
    }

    /// A release was announced to this connection: it is off the queue, and its first waiter
    /// not already woken goes next.
    pub fn take_turn(&self, channel: &[u8]) -> Turn {
        let mut channels = self.table();
        let Some(entry) = channels.get_mut(channel) else {
            // Forgotten here, yet still in the lock's queue (a place kept across a lost
            // connection): the next connection in it gets the turn.
            let lock_key = keys::lock_key_of_channel(channel, keys::RELEASED).unwrap_or_default();
            return Turn::PassOn(lock_key);
        };
        entry.queued = None;
        entry.turns += 1;
        if wake_next(entry) {
            Turn::Woke
        } else {
            Turn::PassOn(entry.lock_key.clone())
        }
    }

    /// The connection dropped or was abandoned: subscriptions, queue places and any message
    /// in flight may be gone. Each channel's first waiter tries again at once, and waiters
    /// subscribe and queue anew.
    pub fn connection_lost(&self) {
        let mut channels = self.table();
        for entry in channels.values_mut() {
            entry.subscribed = false;
            entry.queued = None;
            if let Some(first) = entry.waiters.front() {
                first.woken.store(true, Ordering::Release);
                first.notify.notify_one();
            }
        }
        channels.retain(|_, entry| !entry.is_forgettable());
    }

    /// Once more than `keep` channels nobody waits on are still subscribed, forgets them all
    /// and returns them for one UNSUBSCRIBE (called while no other SUBSCRIBE or UNSUBSCRIBE is
    /// under way, see backend/link.rs).
    pub(crate) fn take_idle(&self, keep: usize) -> Vec<Vec<u8>> {
        let mut channels = self.table();
        self.left_idle.store(0, Ordering::SeqCst);
        let idle = channels
            .values()
            .filter(|entry| entry.waiters.is_empty())
            .count();
        if idle <= keep {
            return Vec::new();
        }
        let mut names = Vec::with_capacity(idle);
        channels.retain(|name, entry| {
            // A connection still queued keeps the lock key, to pass on a wake that comes; a
            // subscription under way must find its entry to be recorded (and undone later).
            let queued = entry.queued.is_some_and(|at| at.elapsed() < QUEUE_LIFETIME);
            let keep = !entry.waiters.is_empty() || queued || entry.preparing;
            if !keep && entry.subscribed {
                names.push(name.clone());
            }
            keep
        });
        names
    }
}

/// Wakes the first waiter not already woken (or being handed the lock), whose owner is
/// still there; `false` when there is none.
fn wake_next(entry: &mut Channel) -> bool {
    let next = entry.waiters.iter().find(|waiter| {
        !waiter.reserved.load(Ordering::Acquire)
            && !waiter.is_orphaned()
            && !waiter.woken.swap(true, Ordering::AcqRel)
    });
    if let Some(next) = next {
        next.notify.notify_one();
    }
    next.is_some()
}

/// A fair waiter's name in its lock's line: its connection's id and its number there.
pub fn member(connection_id: &str, seq: u64) -> String {
    format!("{connection_id}:{seq}")
}

/// One waiter's place in its connection's queue for a lock.
pub struct Ticket {
    wakes: Arc<Wakes>,
    channel: Vec<u8>,
    waiter: Arc<Waiter>,
    handoffs_at_join: u64,
}

impl Ticket {
    /// Resolves when a release was announced for this waiter.
    pub async fn woken(&self) {
        self.waiter.notify.notified().await;
    }

    /// Whether it waits for a fair lock.
    pub fn is_fair(&self) -> bool {
        self.waiter.fair
    }

    /// Its name in a fair lock's line: the connection's and its own number.
    pub fn member(&self, connection_id: &str) -> String {
        member(connection_id, self.waiter.seq)
    }

    /// Whether it holds a place in the fair lock's line (a failed attempt gives it one, a
    /// winning attempt takes it away).
    pub fn set_in_line(&self, in_line: bool) {
        self.waiter.in_line.store(in_line, Ordering::Release);
    }

    /// Its next pause ends at once. Unlike a wake, this is news for this waiter only: no
    /// release picks another over it, and should it leave, it owes nobody a wake.
    pub fn nudge(&self) {
        self.waiter.notify.notify_one();
    }

    /// About to try: a wake from now on is news for this waiter.
    pub fn rearm(&self) {
        self.waiter.woken.store(false, Ordering::Release);
    }

    /// Whether this waiter's caller was answered by the one who handed it the lock: the
    /// wait is over, with nothing left to do.
    pub fn is_settled(&self) -> bool {
        self.waiter.settled.load(Ordering::Acquire)
    }

    /// The lock a release of this process handed to this waiter, if one did. Taking it is
    /// acting on the wake that came with it.
    pub fn take_grant(&self) -> Option<Lease> {
        let granted = lock(&self.waiter.grant).take();
        if granted.is_some() {
            self.waiter.woken.store(false, Ordering::Release);
        }
        granted
    }

    /// Whether others of this connection were already waiting for the lock when this waiter
    /// joined: a newcomer that tries at once would jump the queue (and usually lose to the
    /// waiter the release woke, at the cost of a failed attempt).
    pub fn is_behind_others(&self) -> bool {
        self.wakes
            .table()
            .get(&self.channel)
            .and_then(|entry| entry.waiters.front())
            .is_some_and(|first| !Arc::ptr_eq(first, &self.waiter))
    }

    pub fn is_subscribed(&self) -> bool {
        self.wakes.is_subscribed(&self.channel)
    }

    /// Whether the connection still has to subscribe or queue before a wake can reach this
    /// waiter.
    pub fn needs_preparing(&self) -> bool {
        let fair = self.waiter.fair;
        self.wakes
            .with(&self.channel, |entry| {
                !entry.subscribed || (!fair && entry.queued.is_none())
            })
            .unwrap_or(true)
    }

    /// How many times the lock was handed between waiters of this connection so far.
    pub fn handoffs(&self) -> u64 {
        self.wakes
            .with(&self.channel, |entry| entry.handoffs)
            .unwrap_or(0)
    }

    /// Whether this waiter's turn comes from the waiters of its connection (handed over, or
    /// woken in turn) rather than from an attempt of its own: it queues behind them, or the
    /// lock was handed between them since it joined (one of them holds it, and its release
    /// hands it on to the first in line). Never for a fair lock, whose attempts keep its
    /// place in line.
    pub fn turn_comes_from_others(&self) -> bool {
        self.route_view().1
    }

    /// `is_subscribed` and `turn_comes_from_others` at once, as a first attempt's route
    /// asks them.
    pub fn route_view(&self) -> (bool, bool) {
        let fair = self.waiter.fair;
        self.wakes
            .with(&self.channel, |entry| {
                let behind = entry
                    .waiters
                    .front()
                    .is_some_and(|first| !Arc::ptr_eq(first, &self.waiter));
                let turn = !fair && (entry.handoffs != self.handoffs_at_join || behind);
                (entry.subscribed, turn)
            })
            .unwrap_or((false, false))
    }

    /// Whether other waiters of this connection wait for the same lock.
    pub fn has_company(&self) -> bool {
        self.wakes
            .with(&self.channel, |entry| entry.waiters.len() > 1)
            .unwrap_or(false)
    }

    pub fn wakes(&self) -> &Arc<Wakes> {
        &self.wakes
    }

    pub fn channel(&self) -> &[u8] {
        &self.channel
    }

    pub fn lock_key(&self) -> Vec<u8> {
        self.wakes
            .with(&self.channel, |entry| entry.lock_key.clone())
            .unwrap_or_default()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut channels = self.wakes.table();
        let Some(entry) = channels.get_mut(&self.channel) else {
            return;
        };
        entry.waiters.retain(|w| !Arc::ptr_eq(w, &self.waiter));
        let mut owed = self.owed_on_leaving(entry);
        // Nobody here waits for the lock any more: a place in its queue would only have the
        // next release's wake passed on through us, and keep its subscription for a minute.
        if owed.is_none() && entry.waiters.is_empty() && entry.queued.take().is_some() {
            owed = Some(Chore::LeaveQueue(entry.lock_key.clone()));
        }
        let left_idle = entry.waiters.is_empty() && entry.subscribed;
        if entry.is_forgettable() {
            channels.remove(&self.channel);
        }
        drop(channels);
        if let Some(chore) = owed {
            self.wakes.chore(chore);
        }
        if left_idle
            && self.wakes.left_idle.fetch_add(1, Ordering::SeqCst) + 1 == IDLE_SUBSCRIPTIONS
        {
            self.wakes.chore(Chore::DropIdle);
        }
    }
}

impl Ticket {
    /// What a departing waiter leaves for the store to do, if anything.
    fn owed_on_leaving(&self, entry: &mut Channel) -> Option<Chore> {
        // A fair waiter gives up its place in the line, telling the next in line if the
        // lock is free and it was first (see leave_fair.lua).
        if self.waiter.fair {
            let in_line = self.waiter.in_line.load(Ordering::Acquire);
            return in_line.then(|| Chore::LeaveLine {
                lock_key: entry.lock_key.clone(),
                seq: self.waiter.seq,
            });
        }
        // Answered by the release that handed it the lock: nothing is owed to anyone.
        if self.waiter.settled.load(Ordering::Acquire) {
            return None;
        }
        // A lock handed to us that we will never use: freed (and passed on) by the store.
        if let Some(orphan) = lock(&self.waiter.grant).take() {
            return Some(Chore::ReleaseOrphan(orphan));
        }
        // A wake meant for us that we will never act on belongs to the next in line: here,
        // or with nobody left here, the next connection in the lock's queue.
        if !self.waiter.woken.load(Ordering::Acquire) || wake_next(entry) || entry.queued.is_some()
        {
            return None;
        }
        Some(Chore::PassOn(entry.lock_key.clone()))
    }
}

#[cfg(test)]
#[path = "wake_tests.rs"]
mod tests;
