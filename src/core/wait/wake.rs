//! Wake-up on release, one waiter per release across every process. A connection with
//! waiters for a lock subscribes to the lock's channel (RESP3 carries pushes beside replies
//! on the ordinary connection) and queues itself in Redis, in a sorted set beside the lock.
//! A release pops the connection that queued first and publishes its id; only that
//! connection reacts, waking its own first waiter (in the order they joined). Everyone else sleeps
//! on, so a release never sets off a herd. Polling stays as the safety net for what sends no
//! message: a lock that expires, or a message lost with a connection.

use super::cleanup::{Cleaner, Cleanup};
use super::lent::Lends;
use super::owner::Owner;
use super::releases::{Mark, Releases};
use super::tenure::{KickStep, Tenure, TenureTerms};
pub use super::waiter::{Caller, ClaimedTask, Parking, Parks};
use super::waiter::{Effect, Event, Leaving, Waiter};
use crate::core::backend::lock_store::{LostScope, IDLE_SUBSCRIPTIONS};
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::stats::CallCounters;
use crate::core::basics::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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

/// The waiter a release of this process hands the lock to (see release.rs). Dropped
/// unused, it lets the waiter be picked again, and wakes it if it was refused an attempt
/// meanwhile (see `WaiterState::Reserved`).
pub struct Reservation {
    wakes: Arc<Wakes>,
    channel: Vec<u8>,
    seq: u64,
    ttl: Duration,
    counters: Option<Arc<CallCounters>>,
    /// Not yet used by `grant`, `settle` or `unreserve`: dropping it gives the waiter back.
    armed: bool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.armed {
            let (seq, channel) = (self.seq, &self.channel);
            self.wakes
                .with(channel, |entry| entry.apply(seq, Event::DropReservation));
        }
    }
}

impl Reservation {
    /// The TTL the waiter asked for.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The counters of the object the waiter waits for, when it joined through one.
    pub fn counters(&self) -> Option<&Arc<CallCounters>> {
        self.counters.as_ref()
    }

    /// Used up: the waiter's number, for the event that ends the reservation.
    fn spend(mut self) -> u64 {
        self.armed = false;
        self.seq
    }
}

struct Channel {
    lock_key: Vec<u8>,
    /// In the order they joined: request order for those that join before their first
    /// attempt, the order their attempts were answered for those that join after it.
    /// By `seq`: numbers are drawn under the table's lock, as waiters join.
    waiters: VecDeque<Waiter>,
    subscribed: bool,
    /// A background task is subscribing and queueing this connection for the lock.
    preparing: bool,
    /// The subscription was lost, or a node dropped it, while `preparing`: what that task
    /// made may be on the node that dropped it (a subscription confirmed just before, or a
    /// queue place whose wake would go unheard), and a waiter woken by the loss found the
    /// task under way and left it to it. The task runs once more (`end_preparing`).
    relisten: bool,
    /// Whether this connection is in the lock's queue as far as we know (a wake for us took
    /// us off it; so may a lost connection or an expired queue, which the next failed
    /// attempt repairs).
    queued: Option<Instant>,
    /// Handoffs of the lock between waiters of this connection so far: while it moves, the
    /// first waiter's turn comes by handoff, and its poll would only find the lock held.
    handoffs: u64,
    /// Turns announced to this connection so far: each took it off the lock's queue.
    turns: u64,
    /// The channel subscribed for it: its released channel, or (a store that grants) this
    /// connection's grant channel of the lock.
    heard_on: Option<Vec<u8>>,
    /// Also subscribed on this connection's own wake channel of the lock (`keys::wake_channel`,
    /// named here): it queues under its marked name, and a release tells it there, skipping
    /// it once nobody hears (see announce.lua's `wake_first`). Lost with `subscribed`.
    own: Option<Vec<u8>>,
    /// Subscribed on this connection's grant channel of the lock: it takes the lock by grant
    /// from the lock's ring, and stays in the ring (`queued`) after its last waiter leaves.
    ring: bool,
    /// In the ring, and our last release granted the lock to another connection of it: the
    /// ring brings it back, so a new waiter here waits for that with no attempt of its own.
    handed_on: bool,
    /// How long this process keeps the lock before its release grants it on (tenure.rs).
    tenure: Tenure,
    /// Hand-overs between waiters of this connection in a row since the lock last came from,
    /// or went to, another connection (see `HANDOVER_CHAIN`).
    chain: u32,
}

/// In a ring, how many hand-overs in a row between waiters of this connection a release
/// makes before it grants the lock across instead: a process that always has a waiter of
/// its own would otherwise keep the lock from the ring's other processes for as long as it
/// has one. The next in the ring then has it within this many sections of ours.
pub const HANDOVER_CHAIN: u32 = 8;

impl Channel {
    /// In the ring with `HANDOVER_CHAIN` hand-overs between ours in a row: the next release
    /// grants across (`chain_capped`), none of ours is handed it (`reserve`).
    fn chain_full(&self) -> bool {
        self.ring && self.chain >= HANDOVER_CHAIN
    }

    fn new(lock_key: &[u8]) -> Channel {
        Channel {
            lock_key: lock_key.to_vec(),
            waiters: VecDeque::new(),
            subscribed: false,
            preparing: false,
            relisten: false,
            queued: None,
            handoffs: 0,
            turns: 0,
            heard_on: None,
            own: None,
            ring: false,
            handed_on: false,
            tenure: Tenure::default(),
            chain: 0,
        }
    }

    /// Applies `event` to waiter `seq` and carries out what the answer asks of the table:
    /// the one way a waiter changes. `None` when the waiter is not here (it left, or was
    /// settled).
    fn apply(&mut self, seq: u64, event: Event) -> Option<Effect> {
        let at = self.waiters.binary_search_by_key(&seq, |w| w.seq).ok()?;
        let waiter = &mut self.waiters[at];
        let effect = waiter.apply(event);
        match effect {
            Effect::Done { notify: true } => waiter.notify.notify_one(),
            Effect::Handed => {
                self.handoffs += 1;
                waiter.notify.notify_one();
            }
            Effect::Settled { notify } => {
                self.handoffs += 1;
                if notify {
                    waiter.notify.notify_one();
                }
                self.waiters.remove(at);
            }
            Effect::Left(_) => {
                self.waiters.remove(at);
            }
            Effect::Done { notify: false } | Effect::Refused(_) | Effect::Took(_) => {}
        }
        Some(effect)
    }

    fn has(&self, seq: u64) -> bool {
        self.waiters.binary_search_by_key(&seq, |w| w.seq).is_ok()
    }

    fn is_reserved(&self, seq: u64) -> bool {
        let at = self.waiters.binary_search_by_key(&seq, |w| w.seq);
        at.is_ok_and(|at| self.waiters[at].is_reserved())
    }

    /// Wakes the first waiter that sleeps and whose owner is still there; `false` when
    /// there is none.
    fn wake_next(&mut self) -> bool {
        let Some(next) = self.waiters.iter().find(|w| w.is_wakeable()) else {
            return false;
        };
        let seq = next.seq;
        self.apply(seq, Event::Wake).is_some()
    }

    /// Nobody waits on it, and we neither listen to it nor queue for it (nor are about to):
    /// nothing would be lost with it. Kept, every key ever waited on would stay for good.
    /// Its subscription and queue place are gone (a message in flight on them too): the
    /// first waiter tries at once, and waiters subscribe and queue anew.
    fn lose_subscription(&mut self) {
        self.forget_listening();
        self.relisten |= self.preparing;
        if let Some(first) = self.waiters.front().map(|w| w.seq) {
            self.apply(first, Event::Wake);
        }
    }

    /// Neither subscribed nor queued any more, as far as we know.
    fn forget_listening(&mut self) {
        self.subscribed = false;
        self.heard_on = None;
        self.own = None;
        self.ring = false;
        self.handed_on = false;
        self.queued = None;
    }

    /// A new waiter's turn comes by grant (see `handed_on`).
    fn silent(&self) -> bool {
        self.ring && self.handed_on && self.queued.is_some()
    }

    fn is_forgettable(&self) -> bool {
        self.waiters.is_empty()
            && !self.subscribed
            && !self.preparing
            && self.queued.is_none()
            && !self.tenure.kick_pending()
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
    cleaner: OnceLock<Weak<dyn Cleaner>>,
    /// The last waiter's number.
    seq: AtomicU64,
    /// Waiters answered by a release before Redis ran its handover.
    lends: Lends,
    /// Locks still subscribed whose last waiter left since idle subscriptions were last
    /// looked at (`take_idle`): after a burst of waiters with no SUBSCRIBE to follow, they
    /// are dropped once there are enough of them, not left on the server for good.
    left_idle: AtomicUsize,
    /// The tenure's terms on this connection (set by tests only).
    tenure_terms: Mutex<TenureTerms>,
}

/// What a wake addressed to this connection asks of it.
pub enum Turn {
    /// A waiter was woken. Its attempt keeps the connection queued if others here wait.
    Woke,
    /// Nobody here waits any more: pass the wake on to the next connection (lock key).
    PassOn(Vec<u8>),
}

impl Wakes {
    /// Names who carries out this table's cleanups, once.
    pub fn set_cleaner(&self, cleaner: Weak<dyn Cleaner>) {
        let _first = self.cleaner.set(cleaner);
    }

    fn clean_up(&self, cleanup: Cleanup) {
        if let Some(cleaner) = self.cleaner.get().and_then(Weak::upgrade) {
            cleaner.clean_up(cleanup);
        }
    }

    pub fn lends(&self) -> &Lends {
        &self.lends
    }

    /// Queues a waiter for `lock_key` (wanting it for `ttl`), behind those of this
    /// connection already waiting.
    pub fn join(self: &Arc<Self>, lock_key: &[u8], ttl: Duration) -> Ticket {
        self.join_as(lock_key, ttl, (None, None), None)
    }

    /// As `join`, for `caller` (see `Caller`) counted in `counters` (see `Waiter`), on
    /// behalf of `owner`.
    pub fn join_as(
        self: &Arc<Self>,
        lock_key: &[u8],
        ttl: Duration,
        (caller, counters): (Option<Caller>, Option<Arc<CallCounters>>),
        owner: Option<Owner>,
    ) -> Ticket {
        self.join_with(lock_key, ttl, (caller, counters), false, owner)
    }

    /// Queues a waiter for a fair lock: it is woken by name when its turn in the lock's line
    /// comes, and a release of ours never hands it the lock out of turn.
    pub fn join_fair(
        self: &Arc<Self>,
        lock_key: &[u8],
        ttl: Duration,
        owner: Option<Owner>,
    ) -> Ticket {
        self.join_with(lock_key, ttl, (None, None), true, owner)
    }

    fn join_with(
        self: &Arc<Self>,
        lock_key: &[u8],
        ttl: Duration,
        (caller, counters): (Option<Caller>, Option<Arc<CallCounters>>),
        fair: bool,
        owner: Option<Owner>,
    ) -> Ticket {
        let name = channel(lock_key);
        let mut channels = self.table();
        // Drawn under the table's lock, so each channel's waiters stay ordered by number.
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let answers_caller = caller.is_some();
        let waiter = Waiter::new(ttl, caller, counters, seq, fair, owner);
        let notify = waiter.notify.clone();
        // Looked up before it is inserted: the name is copied only for a new channel.
        let entry = match channels.get_mut(&name) {
            Some(entry) => entry,
            None => (channels.entry(name.clone())).or_insert_with(|| Channel::new(lock_key)),
        };
        entry.waiters.push_back(waiter);
        let handoffs_at_join = entry.handoffs;
        drop(channels);
        Ticket {
            wakes: self.clone(),
            channel: name,
            seq,
            fair,
            notify,
            handoffs_at_join,
            answers_caller,
            left: false,
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
        answer: (Option<Caller>, Option<Arc<CallCounters>>),
        owner: Option<Owner>,
        mark: Mark,
    ) -> (Ticket, bool) {
        let ticket = self.join_with(lock_key, ttl, answer, false, owner);
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

    /// A release of ours freed the lock at `lock_key` (counted again once its answer came:
    /// a waiter that read the count after the first counting, but whose attempt ran before
    /// the lock was freed, learns of it too).
    pub fn released(&self, lock_key: &[u8]) {
        self.releases.count(&[lock_key]);
    }

    fn with<T>(&self, channel: &[u8], read: impl FnOnce(&mut Channel) -> T) -> Option<T> {
        self.table().get_mut(channel).map(read)
    }

    pub(crate) fn is_subscribed(&self, channel: &[u8]) -> bool {
        if keys::wake_of_channel(channel).is_some() {
            return self
                .with(&entry_of(channel), |entry| {
                    entry.own.as_deref() == Some(channel)
                })
                .unwrap_or(false);
        }
        self.with(&entry_of(channel), |entry| {
            entry.subscribed && entry.heard_on.as_deref().is_none_or(|on| on == channel)
        })
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

    /// The preparation is over, unless its subscription was lost meanwhile (`relisten`) and
    /// waiters are still there: then `true`, the claim is kept, and the caller prepares once
    /// more, from a channel neither subscribed nor queued.
    #[must_use]
    pub(crate) fn end_preparing(&self, channel: &[u8]) -> bool {
        let mut channels = self.table();
        let mut left_idle = false;
        if let Some(entry) = channels.get_mut(channel) {
            if std::mem::take(&mut entry.relisten) && !entry.waiters.is_empty() {
                entry.forget_listening();
                return true;
            }
            entry.preparing = false;
            // Its last waiter may have left meanwhile, and the subscription failed.
            if entry.is_forgettable() {
                channels.remove(channel);
            } else {
                // Or it succeeded after they left, uncounted by their leaving (they found it
                // unsubscribed): idle from the start, it counts now, or a burst of short
                // waits would leave its subscriptions until 64 more waiters leave.
                left_idle = entry.waiters.is_empty() && entry.subscribed;
            }
        }
        drop(channels);
        if left_idle {
            self.count_left_idle();
        }
        false
    }

    /// One more lock whose last waiter left it subscribed; every `IDLE_SUBSCRIPTIONS` of them,
    /// the idle ones are dropped.
    fn count_left_idle(&self) {
        if self.left_idle.fetch_add(1, Ordering::SeqCst) + 1 == IDLE_SUBSCRIPTIONS {
            self.clean_up(Cleanup::DropIdle);
        }
    }

    pub(crate) fn mark_subscribed(&self, channel: &[u8]) {
        let entry_name = entry_of(channel);
        if keys::wake_of_channel(channel).is_some() {
            self.with(&entry_name, |entry| entry.own = Some(channel.to_vec()));
            return;
        }
        let ring = entry_name[..] != *channel;
        self.with(&entry_name, |entry| {
            entry.subscribed = true;
            entry.heard_on = Some(channel.to_vec());
            entry.ring = ring;
        });
    }

    /// A waiter's attempt, sent while this connection listened for grants, found the lock
    /// held and put the connection in its ring (a win leaves the ring as it was).
    pub(crate) fn joined_ring(&self, channel: &[u8]) {
        self.with(channel, |entry| entry.queued = Some(Instant::now()));
    }

    /// Our release granted the lock to another connection of the ring (`true`), or freed it.
    pub(crate) fn handed_on(&self, channel: &[u8], handed_on: bool) {
        self.with(channel, |entry| entry.handed_on = handed_on);
    }

    /// Whether our release is to grant the lock across although a waiter of ours could take
    /// it: `HANDOVER_CHAIN` hand-overs between ours in a row while we are in the ring. The
    /// chain starts again from here, whoever the ring gives it to (ours again when nobody
    /// else is in it).
    pub(crate) fn chain_capped(&self, channel: &[u8]) -> bool {
        self.with(channel, |entry| {
            let capped = entry.chain_full();
            if capped {
                entry.chain = 0;
            }
            capped
        })
        .unwrap_or(false)
    }

    /// This connection left the lock's ring (see release_grant.lua): the next waiter's
    /// attempt joins it again. A waiter that joined as it left may have found it still in
    /// the ring as its attempt ran, and been taken out with it: the first tries again.
    pub(crate) fn left_ring(&self, channel: &[u8]) {
        self.with(channel, |entry| {
            entry.queued = None;
            entry.handed_on = false;
            entry.wake_next();
        });
    }

    /// The locks whose ring this connection may be in with nobody here to take a grant (no
    /// waiter, or only those whose owner ended): what a closing environment leaves. Listening
    /// for grants is enough: a joining sent before we listened is in Redis's ring, though
    /// not counted here (see `joined_ring`).
    pub(crate) fn rings_to_leave(&self) -> Vec<Vec<u8>> {
        let channels = self.table();
        let idle = |entry: &&Channel| {
            (entry.ring || entry.queued.is_some()) && entry.waiters.iter().all(Waiter::is_orphaned)
        };
        channels
            .values()
            .filter(idle)
            .map(|entry| entry.lock_key.clone())
            .collect()
    }

    /// A release of another process granted the lock to this connection (release_grant.lua):
    /// the first of our waiters that sleeps takes it (in the order they joined, as a wake
    /// would pick it), made by `lease` for the TTL it wants. The lease comes back (made for
    /// `None`) when nobody here takes it: the caller passes it on.
    #[must_use]
    pub fn grant_remote(
        &self,
        channel: &[u8],
        lease: impl FnOnce(Option<Duration>) -> Lease,
    ) -> Option<Lease> {
        let mut channels = self.table();
        let picked = channels.get_mut(channel).and_then(|entry| {
            entry.handed_on = false;
            entry.chain = 0;
            let waiter = entry.waiters.iter().find(|w| w.is_reservable())?;
            let (seq, ttl) = (waiter.seq, waiter.ttl);
            let reserved = entry.apply(seq, Event::Reserve);
            matches!(reserved, Some(Effect::Done { .. })).then_some((entry, seq, ttl))
        });
        let Some((entry, seq, ttl)) = picked else {
            return Some(lease(None));
        };
        match entry.apply(seq, Event::Grant(lease(Some(ttl)))) {
            Some(Effect::Refused(back)) => back,
            _ => {
                entry.tenure.acquired(Instant::now());
                None
            }
        }
    }

    /// Sets the tenure's terms for this connection's locks (wait/tenure.rs): tests lengthen
    /// or shorten them to make a release's timing certain.
    pub fn set_tenure(&self, terms: TenureTerms) {
        *lock(&self.tenure_terms) = terms;
    }

    fn tenure(&self) -> TenureTerms {
        *lock(&self.tenure_terms)
    }

    /// This process acquired the lock at `lock_key` (by an attempt; a grant counts in
    /// `grant_remote`): its tenure starts, or goes on after a quiet release (tenure.rs).
    pub fn acquired(&self, lock_key: &[u8]) {
        if self.remembered.load(Ordering::SeqCst) == 0 {
            return;
        }
        self.with(&channel(lock_key), |entry| {
            entry.tenure.acquired(Instant::now())
        });
    }

    /// Whether our release of the lock at `lock_key` frees it quietly, without granting it
    /// to the ring (see tenure.rs); a release that does not ends the tenure. Never for a lock
    /// this connection remembers nothing of: no acquisition of it was seen.
    pub fn release_quietly(&self, lock_key: &[u8]) -> bool {
        if self.remembered.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let window = self.tenure();
        self.with(&channel(lock_key), |entry| {
            entry.tenure.release_quietly(Instant::now(), window)
        })
        .unwrap_or(false)
    }

    /// A grant of the lock at `lock_key` was taken here (its tenure started, see
    /// `grant_remote`): `true` when a task is to be started to kick it (see `Tenure::arm`).
    pub fn arm_kicker(&self, lock_key: &[u8]) -> bool {
        self.with(&channel(lock_key), |entry| entry.tenure.arm())
            .unwrap_or(false)
    }

    /// A quiet release of ours freed the lock at `lock_key` (or may have), its fence counter
    /// kept `fence_retention_ms`. `true` when a task is to be started to kick it (see
    /// `kick_step`). The entry that decided the release was quiet may be gone by now (dropped
    /// as idle by `take_idle`, or with a lost subscription, while the release was on its
    /// way): it is made again, so the lock still ends kicked or taken back, never left to
    /// the ring's polls. A kick pending keeps it until then (`is_forgettable`).
    pub fn freed_quietly(&self, lock_key: &[u8], fence_retention_ms: u64) -> bool {
        let mut channels = self.table();
        let entry = (channels.entry(channel(lock_key))).or_insert_with(|| Channel::new(lock_key));
        entry.tenure.freed(Instant::now(), fence_retention_ms)
    }

    /// What the task that kicks the lock at `lock_key` does next, with the fence counter's
    /// retention window for its kick. A lock forgotten meanwhile is not kicked: an entry
    /// with a kick pending is never forgotten (see `is_forgettable`).
    pub fn kick_step(&self, lock_key: &[u8]) -> (KickStep, u64) {
        let (name, window) = (channel(lock_key), self.tenure());
        let mut channels = self.table();
        let Some(entry) = channels.get_mut(&name) else {
            return (KickStep::Done, 0);
        };
        let step = entry.tenure.kick_step(Instant::now(), window);
        let window = entry.tenure.fence_retention_ms();
        if entry.is_forgettable() {
            channels.remove(&name);
        }
        (step, window)
    }

    /// The locks freed quietly and not taken back yet (with their fence counters' retention
    /// windows), whose kicks the caller sends now (the connection closes): their kicking
    /// tasks find nothing left to do.
    pub(crate) fn take_kicks(&self) -> Vec<(Vec<u8>, u64)> {
        let mut channels = self.table();
        let kicks = channels
            .values_mut()
            .filter_map(|entry| {
                let window = entry.tenure.fence_retention_ms();
                (entry.tenure.take_kick()).then(|| (entry.lock_key.clone(), window))
            })
            .collect();
        channels.retain(|_, entry| !entry.is_forgettable());
        kicks
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
                let leave = queued && entry.waiters.is_empty() && !entry.ring;
                entry.queued = (queued && !leave).then(Instant::now);
                leave.then(|| entry.lock_key.clone())
            })
            .flatten();
        if let Some(lock_key) = leave {
            self.clean_up(Cleanup::LeaveQueue(lock_key));
        }
    }

    /// Whether waiters of this connection wait for the lock behind `channel`.
    pub fn has_waiters(&self, channel: &[u8]) -> bool {
        self.with(channel, |entry| !entry.waiters.is_empty())
            .unwrap_or(false)
    }

    /// Picks the waiter the runtime's release of ours hands the lock to: the first in order
    /// that sleeps (neither woken nor already being handed one), and whose owner is still
    /// there. One whose own attempt is on its way may be picked: its caller is answered by
    /// its own task, after that attempt's reply, and the attempt finds the lock held (ours,
    /// or handed to it) unless the hand-over fails (then it tries on its own anyway). None
    /// once the chain is long enough (see `chain_capped`).
    pub fn reserve(self: &Arc<Self>, channel: &[u8]) -> Option<Reservation> {
        let (to, ()) = self.reserve_first(channel, |_| Some(()))?;
        Some(to)
    }

    /// As `reserve`, for a release made on JS thread `thread` that answers the waiter's
    /// caller itself (see ops/fast/handoff.rs), whom it gives with the reservation: only
    /// when the first in order waits on that thread, and no attempt of its own is on its
    /// way. Its caller, answered now, could release the lock before that attempt lands,
    /// which would then win it for nobody. A later waiter is never picked over it: the
    /// runtime's release hands it the lock, in order, instead.
    pub fn reserve_in_place(
        self: &Arc<Self>,
        channel: &[u8],
        thread: usize,
    ) -> Option<(Reservation, Caller)> {
        self.reserve_first(channel, |first| {
            (first.caller).filter(|caller| !first.trying && caller.thread == thread)
        })
    }

    /// Reserves the first waiter that may be handed the lock, when `eligible` takes it, with
    /// what `eligible` found.
    fn reserve_first<T>(
        self: &Arc<Self>,
        channel: &[u8],
        eligible: impl FnOnce(&Waiter) -> Option<T>,
    ) -> Option<(Reservation, T)> {
        let picked = self.with(channel, |entry| {
            if entry.chain_full() {
                return None;
            }
            let waiter = (entry.waiters.iter()).find(|w| w.is_reservable())?;
            let found = eligible(waiter)?;
            let (seq, ttl) = (waiter.seq, waiter.ttl);
            let counters = waiter.counters.clone();
            let reserved = entry.apply(seq, Event::Reserve);
            let done = matches!(reserved, Some(Effect::Done { .. }));
            if done && entry.ring {
                entry.chain += 1;
            }
            done.then_some((seq, ttl, counters, found))
        });
        let (seq, ttl, counters, found) = picked.flatten()?;
        let to = Reservation {
            wakes: self.clone(),
            channel: channel.to_vec(),
            seq,
            ttl,
            counters,
            armed: true,
        };
        Some((to, found))
    }

    /// The handoff to `to` happened: it holds `lease` now. The lease comes back when the
    /// waiter left meanwhile (timed out, cancelled, its owner gone): the caller frees it.
    #[must_use]
    pub fn grant(&self, channel: &[u8], to: Reservation, lease: Lease) -> Option<Lease> {
        let seq = to.spend();
        let mut channels = self.table();
        let Some(entry) = channels.get_mut(channel).filter(|entry| entry.has(seq)) else {
            return Some(lease);
        };
        match entry.apply(seq, Event::Grant(lease)) {
            Some(Effect::Refused(back)) => back,
            _ => None,
        }
    }

    /// The handoff to `to` happened (or was sent, the waiter starting on a lent lease), and
    /// its caller was answered by the one who handed it over: its wait is over. `false` when
    /// the waiter left meanwhile (the lock is then the caller's to free). `parked`: its task
    /// was parked on the releaser's thread and is claimed (see `Parking::claim`).
    pub fn settle(&self, channel: &[u8], to: Reservation, parked: bool) -> bool {
        let seq = to.spend();
        let settled = self.with(channel, |entry| entry.apply(seq, Event::Settle { parked }));
        matches!(settled, Some(Some(Effect::Settled { .. })))
    }

    /// The handoff to `to` did not happen: it tries on its own, at once.
    pub fn unreserve(&self, to: Reservation) {
        let (seq, channel) = (to.seq, to.channel.clone());
        let _spent = to.spend();
        self.with(&channel, |entry| entry.apply(seq, Event::Unreserve));
    }

    /// Our own release freed the lock: the first of our waiters not already woken goes
    /// next, without a round trip through the queue.
    pub fn wake_local(&self, channel: &[u8]) {
        self.with(channel, Channel::wake_next);
    }

    /// A fair lock's release (or a waiter leaving its line) named waiter `seq` of this
    /// connection as next in line: it tries at once. Nothing happens when it left meanwhile
    /// (leaving, it told the next in line itself).
    pub fn wake_member(&self, channel: &[u8], seq: u64) {
        self.with(channel, |entry| entry.apply(seq, Event::Wake));
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
        if entry.wake_next() {
            Turn::Woke
        } else {
            Turn::PassOn(entry.lock_key.clone())
        }
    }

    /// The connection dropped or was abandoned: subscriptions, queue places and any message
    /// in flight may be gone. Each channel's first waiter tries again at once, and waiters
    /// subscribe and queue anew.
    /// Subscriptions in `scope` were lost: their channels are neither subscribed nor
    /// queued any more, and their first waiters try at once (a release announced meanwhile
    /// is lost with them).
    pub fn connection_lost(&self, scope: &LostScope) {
        let mut channels = self.table();
        for (channel, entry) in channels.iter_mut() {
            if scope.covers(keys::slot(channel)) {
                entry.lose_subscription();
            }
        }
        channels.retain(|_, entry| !entry.is_forgettable());
    }

    /// The server dropped this channel's subscription (its slot moved to another node): as a
    /// lost connection for this channel alone. One we dropped ourselves is no longer in the
    /// table as subscribed, and nothing happens. Heard while a subscription is under way
    /// (`preparing`), it may be that one's, confirmed but not yet recorded (the confirmation
    /// and this push reach us by different paths, in either order): the preparation runs
    /// again once done.
    /// A node that gives a slot away drops every subscription of that slot at once, and the
    /// redis crate (1.8) may take its SUNSUBSCRIBE for the reply to the oldest request in
    /// flight to that node: an SSUBSCRIBE of another channel of the slot, sent there by a
    /// stale slot map, would pass for confirmed while its own answer (a MOVED) goes astray.
    /// So every preparation under way for the slot runs again too. At worst that is one
    /// SSUBSCRIBE more each, for the confirmation of an UNSUBSCRIBE of ours.
    pub fn unsubscribed(&self, channel: &[u8]) {
        let mut channels = self.table();
        let channel = &entry_of(channel)[..];
        let slot = keys::slot(channel);
        for (name, entry) in channels.iter_mut() {
            if entry.preparing && keys::slot(name) == slot {
                entry.relisten = true;
            }
        }
        let Some(entry) = channels.get_mut(channel) else {
            return;
        };
        if !entry.subscribed {
            return;
        }
        entry.lose_subscription();
        if entry.is_forgettable() {
            channels.remove(channel);
        }
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
            let keep = !entry.waiters.is_empty()
                || queued
                || entry.preparing
                || entry.tenure.kick_pending();
            if !keep && entry.subscribed {
                names.push(entry.heard_on.take().unwrap_or_else(|| name.clone()));
            }
            if let Some(own) = entry.own.take_if(|_| !keep) {
                names.push(own);
            }
            keep
        });
        names
    }
}

/// The wake-table entry a channel we listen on belongs to: a grant or wake channel of ours
/// is its lock's, named by the lock's released channel.
pub fn entry_of(channel: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match keys::grant_of_channel(channel).or_else(|| keys::wake_of_channel(channel)) {
        Some((lock_key, _)) => std::borrow::Cow::Owned(self::channel(&lock_key)),
        None => std::borrow::Cow::Borrowed(channel),
    }
}

/// A fair waiter's name in its lock's line: its connection's id and its number there.
pub fn member(connection_id: &str, seq: u64) -> String {
    format!("{connection_id}:{seq}")
}

/// One waiter's place in its connection's queue for a lock: a handle on its entry in the
/// table, read and changed only under the table's lock.
pub struct Ticket {
    wakes: Arc<Wakes>,
    channel: Vec<u8>,
    seq: u64,
    fair: bool,
    notify: Arc<Notify>,
    handoffs_at_join: u64,
    /// Waits for a caller of a JS thread (see `Caller`), whose handle can start on a grant
    /// before it is confirmed and ask for the confirmation later (see wait/lent.rs).
    answers_caller: bool,
    /// It left the table already (`leave`): dropping it does nothing more.
    left: bool,
}

/// An attempt of a waiter's own on its way, from `Ticket::trying` until dropped.
pub struct Trying<'a>(&'a Ticket);

impl Drop for Trying<'_> {
    fn drop(&mut self) {
        self.0.apply(Event::Trying(false));
    }
}

/// `Trying` for an attempt sent on a lane (ops/fast/acquire.rs), whose ticket goes on with
/// its plan meanwhile: it holds the waiter's place in the table rather than its ticket.
pub struct TryingSent {
    wakes: Arc<Wakes>,
    channel: Vec<u8>,
    seq: u64,
}

impl Drop for TryingSent {
    fn drop(&mut self) {
        let seq = self.seq;
        self.wakes.with(&self.channel, |entry| {
            entry.apply(seq, Event::Trying(false))
        });
    }
}

/// A waiter's caller was answered by the release that handed it the lock: its wait is over.
#[derive(Debug)]
pub struct Answered;

/// What a waiter finds when it looks up from a pause (see `Ticket::resume`).
pub enum Resume {
    /// A release of this process handed it the lock.
    Granted(Lease),
    /// Its caller was answered by the one who handed it the lock: the wait is over.
    Settled,
    /// Neither: it goes on trying.
    Waiting,
}

/// A waiter's standing in its channel, read at once under the table's lock.
#[derive(Clone, Copy, Debug, Default)]
pub struct TicketView {
    /// Answered by the one who handed it the lock (it left the table then).
    pub settled: bool,
    /// Others of this connection were waiting for the lock before it: a newcomer that tries
    /// at once would jump the queue (and usually lose to the waiter the release woke, at the
    /// cost of a failed attempt).
    pub behind_others: bool,
    /// Other waiters of this connection wait for the same lock.
    pub company: bool,
    pub subscribed: bool,
    /// The connection still has to subscribe or queue before a wake can reach it.
    pub needs_preparing: bool,
    /// Hand-overs of the lock between waiters of this connection so far.
    pub handoffs: u64,
    /// Its turn comes from the waiters of its connection (handed over, or woken in turn)
    /// rather than from an attempt of its own: it queues behind them, or the lock was handed
    /// between them since it joined (one of them holds it, and its release hands it on to
    /// the first in line). Never for a fair lock, whose attempts keep its place in line.
    pub turn_from_others: bool,
    /// A release of ours freed the lock quietly moments ago and nobody here took it back
    /// yet: an attempt is likely to win it back (tenure.rs).
    pub barging: bool,
    /// This connection listens for grants of the lock and is in its ring as far as we know:
    /// a release grants it the lock in turn, so its polls are only a safety net.
    pub in_ring: bool,
    /// A release of ours is handing it the lock: the hand-over's end is its news (see
    /// `WaiterState::Reserved`).
    pub reserved: bool,
}

impl Ticket {
    /// Resolves when a release was announced for this waiter.
    pub async fn woken(&self) {
        self.notify.notified().await;
    }

    /// Whether it waits for a fair lock.
    pub fn is_fair(&self) -> bool {
        self.fair
    }

    /// Whether its caller's handle may start on a grant not confirmed yet (`answers_caller`).
    pub fn lends_grants(&self) -> bool {
        self.answers_caller
    }

    /// Its name in a fair lock's line: the connection's and its own number.
    pub fn member(&self, connection_id: &str) -> String {
        member(connection_id, self.seq)
    }

    fn apply(&self, event: Event) -> Option<Effect> {
        self.wakes
            .with(&self.channel, |entry| entry.apply(self.seq, event))
            .flatten()
    }

    /// Whether it holds a place in the fair lock's line (a failed attempt gives it one, a
    /// winning attempt takes it away).
    pub fn set_in_line(&self, in_line: bool) {
        self.apply(Event::Line(in_line));
    }

    /// Its next pause ends at once. Unlike a wake, this is news for this waiter only: no
    /// release picks another over it, and should it leave, it owes nobody a wake.
    pub fn nudge(&self) {
        self.notify.notify_one();
    }

    /// Its task sleeps until `ends` unless woken: a release that answers its caller
    /// meanwhile need not wake it to end (see `SETTLED_UNTOLD`). `rearm` clears it.
    pub fn pausing(&self, ends: Instant) {
        self.apply(Event::Pausing(Some(ends)));
    }

    /// About to try: a wake from now on is news for this waiter.
    pub fn rearm(&self) -> Resume {
        self.resume(Event::Rearm)
    }

    /// The lock a release of this process handed to this waiter, if one did. Taking it is
    /// acting on the wake that came with it.
    pub fn take_grant(&self) -> Option<Lease> {
        match self.look() {
            Resume::Granted(lease) => Some(lease),
            Resume::Settled | Resume::Waiting => None,
        }
    }

    /// What it finds before a pause: a lock handed to it (taken), its wait settled, or
    /// neither. Unlike `rearm`, a wake it has not acted on stays.
    pub fn look(&self) -> Resume {
        self.resume(Event::TakeGrant)
    }

    fn resume(&self, event: Event) -> Resume {
        match self.apply(event) {
            None => Resume::Settled,
            Some(Effect::Took(lease)) => Resume::Granted(lease),
            Some(_) => Resume::Waiting,
        }
    }

    /// Its task is about to send an attempt of its own: marked so that no release of ours
    /// answers its caller in place until `Trying` drops (after the reply, see
    /// `Wakes::reserve_in_place`). `Err` when its caller was answered already by the release
    /// that handed it the lock; `Ok(None)` when a release of ours is handing it the lock
    /// now: no attempt then, the hand-over answers it.
    pub fn trying(&self) -> Result<Option<Trying<'_>>, Answered> {
        Ok(self.mark_trying()?.then_some(Trying(self)))
    }

    /// `trying`, for an attempt sent on a lane: the mark outlives this borrow of the ticket.
    pub fn trying_sent(&self) -> Result<Option<TryingSent>, Answered> {
        Ok(self.mark_trying()?.then(|| TryingSent {
            wakes: self.wakes.clone(),
            channel: self.channel.clone(),
            seq: self.seq,
        }))
    }

    /// Marks it trying: `false` when a release of ours is handing it the lock now.
    fn mark_trying(&self) -> Result<bool, Answered> {
        match self.apply(Event::Trying(true)) {
            None => Err(Answered),
            Some(Effect::Refused(_)) => Ok(false),
            Some(_) => Ok(true),
        }
    }

    /// Everything a waiter asks of its standing, under one lock.
    pub fn view(&self) -> TicketView {
        let fair = self.fair;
        let seq = self.seq;
        let view = self.wakes.with(&self.channel, |entry| {
            let behind_others = entry.waiters.front().is_some_and(|first| first.seq != seq);
            TicketView {
                settled: !entry.has(seq),
                behind_others,
                company: entry.waiters.len() > 1,
                subscribed: entry.subscribed,
                needs_preparing: !entry.subscribed || (!fair && entry.queued.is_none()),
                handoffs: entry.handoffs,
                turn_from_others: !fair
                    && (entry.handoffs != self.handoffs_at_join || behind_others || entry.silent()),
                barging: !fair && entry.tenure.kick_pending(),
                in_ring: entry.ring && entry.subscribed && entry.queued.is_some(),
                reserved: entry.is_reserved(seq),
            }
        });
        view.unwrap_or(TicketView {
            settled: true,
            needs_preparing: true,
            ..TicketView::default()
        })
    }

    pub fn is_subscribed(&self) -> bool {
        self.view().subscribed
    }

    /// This connection's name in the lock's wake queue (`id`): marked (`keys::WAKE_MARK`)
    /// while it also listens on its own wake channel of the lock, so releases check it there.
    pub fn queue_name(&self, id: &str) -> String {
        let own = self.wakes.with(&self.channel, |entry| entry.own.is_some());
        match own {
            Some(true) => format!("{id}{}", keys::WAKE_MARK),
            _ => id.to_owned(),
        }
    }

    /// Whether other waiters of this connection wait for the same lock.
    pub fn has_company(&self) -> bool {
        self.view().company
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

impl Ticket {
    /// Stops waiting, as dropping it does; `false` when its caller was answered already by
    /// the release that handed it the lock (it had left the table then, see `Event::Settle`).
    /// Told under the table's lock: a release cannot answer the caller after this says
    /// `true`, nor before without this saying `false`.
    pub fn leave(mut self) -> bool {
        self.left = true;
        self.depart()
    }

    /// Leaves the table; whether it was still there.
    fn depart(&mut self) -> bool {
        let mut channels = self.wakes.table();
        let Some(entry) = channels.get_mut(&self.channel) else {
            return false;
        };
        let (was_there, mut owed) = match entry.apply(self.seq, Event::Leave) {
            Some(Effect::Left(leaving)) => (true, owed_on_leaving(entry, leaving, self.seq)),
            Some(_) => (true, None),
            // Settled: answered by the release that handed it the lock, which took it out
            // of the table; nothing is owed.
            None => (false, None),
        };
        // Nobody here waits for the lock any more: a place in its queue would only have the
        // next release's wake passed on through us, and keep its subscription for a minute.
        // A connection in a lock's ring stays there: a grant nobody takes is passed on.
        if owed.is_none()
            && entry.waiters.is_empty()
            && !entry.ring
            && entry.queued.take().is_some()
        {
            owed = Some(Cleanup::LeaveQueue(entry.lock_key.clone()));
        }
        let left_idle = entry.waiters.is_empty() && entry.subscribed;
        if entry.is_forgettable() {
            channels.remove(&self.channel);
        }
        drop(channels);
        if let Some(cleanup) = owed {
            self.wakes.clean_up(cleanup);
        }
        if left_idle {
            self.wakes.count_left_idle();
        }
        was_there
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.left {
            self.depart();
        }
    }
}

/// What waiter `seq`, departing `entry` with `leaving` behind, leaves for the store to do.
fn owed_on_leaving(entry: &mut Channel, leaving: Leaving, seq: u64) -> Option<Cleanup> {
    match leaving {
        Leaving::Nothing => None,
        // A fair waiter gives up its place in the line, telling the next in line if the
        // lock is free and it was first (see leave_fair.lua).
        Leaving::Line => Some(Cleanup::LeaveLine {
            lock_key: entry.lock_key.clone(),
            seq,
        }),
        // A lock handed to us that we will never use: freed (and passed on) by the store.
        Leaving::Lease(orphan) => Some(Cleanup::FreeGranted(orphan)),
        // A wake meant for us that we will never act on belongs to the next in line: here,
        // or with nobody left here, the next connection in the lock's queue.
        Leaving::Wake if entry.wake_next() || entry.queued.is_some() => None,
        Leaving::Wake => Some(Cleanup::PassWake(entry.lock_key.clone())),
    }
}

#[cfg(test)]
#[path = "wake_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "waiters_model_tests.rs"]
mod model_tests;
