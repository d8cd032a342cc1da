//! The watchdog's table of the locks it keeps alive, laid out for tens of thousands of them:
//! a lock's key and token inside its slot (no allocation of its own, which would be made
//! among an acquisition's short-lived ones and pin their pages), times as milliseconds on
//! the watchdog's own clock, the refresh command written only when it is sent, and the sink
//! shared by every lock of one owner (a tag tells them apart). Slots live in fixed-size
//! chunks of memory mapped from the system (see pages.rs), so the table never holds twice
//! the room it needs, its memory is exactly what shows in RSS, and ids carry a generation, so
//! a stale id does not reach the lock that took its slot. Ids stay below 2^31 (for 8 million
//! slots): small integers in JavaScript, where handles keep them.

use super::orphan::Orphan;
use super::pair::Pair;
use super::signals::{Confirmed, Heartbeat, Sink};
use crate::core::basics::clock::validity;
use crate::core::basics::error::LockError;
use crate::core::basics::pages::Pages;
use crate::core::proto::refresh::{PairRefresh, Refresh};
use crate::core::wait::owner::Owner;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Milliseconds since a watchdog's start: what its entries count time in.
#[derive(Clone, Copy)]
pub struct TickClock {
    base: Instant,
    /// The wall-clock time of `base` (epoch ms), for the expiries shown to users: one
    /// reading, so an expiry computed twice is the same number.
    base_wall_ms: u64,
}

impl Default for TickClock {
    fn default() -> Self {
        // The wall clock first, as `Stamp::now` reads it: a pause between the readings makes
        // the expiries shown early, never late.
        let base_wall_ms = crate::core::basics::clock::wall_ms();
        TickClock {
            base: Instant::now(),
            base_wall_ms,
        }
    }
}

impl TickClock {
    /// `at` in whole ms, rounded down: a deadline read back is never later than given.
    pub fn ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_millis() as u64
    }

    pub fn at(&self, ms: u64) -> Instant {
        self.base + Duration::from_millis(ms)
    }
}

/// What to keep alive: the refresh script's keys and arguments.
pub struct Target {
    /// The key that holds the token.
    pub key: Vec<u8>,
    /// Where the lock's name as the user knows it starts in `key` (for messages).
    pub name_at: usize,
    pub token: String,
    /// An ExclusiveLock's lock key beside its owner key (see refresh.lua).
    pub pair: Option<Pair>,
    pub ttl: Duration,
    /// Refresh this often, counted from the last refresh sent.
    pub every: Duration,
    /// Never refreshed before `every` has passed: the API promises its schedule (the
    /// originals' `setInterval`), and its users read the refreshes by that clock; it may come
    /// a little late instead (`Watched::late_by`). Otherwise a refresh may come up to half an
    /// interval early to share a round trip (`ripe_at`).
    pub punctual: bool,
    /// How long the lock's fence counter outlives it, in ms; 0 forever (see fence.lua).
    pub fence_retention_ms: u64,
}

/// Bounds on how long a lock is kept alive without its holder's say.
#[derive(Default)]
pub struct Limits {
    /// Stop refreshing once the heartbeat is older than this.
    pub stall: Option<(Arc<Heartbeat>, Duration)>,
    /// Stop refreshing at this moment, whatever happens.
    pub hold_until: Option<Instant>,
    /// Whose lock it is: when the owner ends, the lock is released (see owner.rs).
    pub owner: Option<Owner>,
    /// Set by then, the owner's end only stops the refreshes and leaves the lock to its TTL:
    /// its holder let its process exit while holding it (ExclusiveLock's `unref()`).
    pub outlives_owner: Option<Arc<AtomicBool>>,
}

/// Key and token bytes kept in the slot up to this many: a 60-byte key with a UUID token.
const INLINE: usize = 96;

/// A lock's key, then its token.
enum Bytes {
    Inline {
        len: u8,
        data: [u8; INLINE],
    },
    /// Longer keys (rare) have their own allocation.
    Heap(Box<[u8]>),
}

impl Bytes {
    fn new(parts: [&[u8]; 2]) -> Bytes {
        let len = parts[0].len() + parts[1].len();
        if len <= INLINE {
            let mut data = [0u8; INLINE];
            data[..parts[0].len()].copy_from_slice(parts[0]);
            data[parts[0].len()..len].copy_from_slice(parts[1]);
            return Bytes::Inline {
                len: len as u8,
                data,
            };
        }
        Bytes::Heap(parts.concat().into_boxed_slice())
    }

    fn get(&self) -> &[u8] {
        match self {
            Bytes::Inline { len, data } => &data[..usize::from(*len)],
            Bytes::Heap(bytes) => bytes,
        }
    }
}

pub struct Watched {
    /// The key holding the token, then the token.
    bytes: Bytes,
    key_len: u32,
    name_at: u32,
    ttl_ms: u32,
    every_ms: u32,
    fence_retention_ms: u64,
    /// On the watchdog's clock.
    deadline: u64,
    next_due: u64,
    /// `u64::MAX` when there is none.
    hold_until: u64,
    stall: Option<(Arc<Heartbeat>, u32)>,
    owner: Option<Owner>,
    outlives_owner: Option<Arc<AtomicBool>>,
    pub sink: Arc<dyn Sink>,
    pub tag: u32,
    pub in_flight: bool,
    /// Its connection dropped since Redis last confirmed it: not held until a refresh answers.
    pub in_doubt: bool,
    /// See `Target::punctual`.
    punctual: bool,
    /// When the schedule's event queue looks at this entry next (see schedule.rs); never
    /// later than `next_event`, `u64::MAX` while it is not queued.
    pub armed: u64,
    pair: Option<Box<Pair>>,
}

/// Whole ms of `d`, at most `u32::MAX` (49 days; TTLs stop at 24.8).
fn ms32(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

impl Watched {
    /// `sent`: when the request that last set its TTL was sent.
    pub fn new(
        target: Target,
        clock: &TickClock,
        sent: Instant,
        limits: Limits,
        sink: Arc<dyn Sink>,
        tag: u32,
    ) -> Watched {
        let key_len = target.key.len();
        Watched {
            bytes: Bytes::new([&target.key, target.token.as_bytes()]),
            key_len: key_len as u32,
            name_at: target.name_at.min(key_len) as u32,
            ttl_ms: ms32(target.ttl),
            every_ms: ms32(target.every),
            fence_retention_ms: target.fence_retention_ms,
            deadline: clock.ms(sent + validity(target.ttl)),
            next_due: clock.ms(sent + target.every),
            hold_until: limits.hold_until.map_or(u64::MAX, |at| clock.ms(at)),
            stall: limits.stall.map(|(heartbeat, max)| (heartbeat, ms32(max))),
            owner: limits.owner,
            outlives_owner: limits.outlives_owner,
            sink,
            tag,
            in_flight: false,
            in_doubt: false,
            punctual: target.punctual,
            armed: u64::MAX,
            pair: target.pair.map(Box::new),
        }
    }

    fn ttl(&self) -> Duration {
        Duration::from_millis(u64::from(self.ttl_ms))
    }

    pub fn key(&self) -> &[u8] {
        &self.bytes.get()[..self.key_len as usize]
    }

    pub fn token(&self) -> &[u8] {
        &self.bytes.get()[self.key_len as usize..]
    }

    pub fn is_owned_by(&self, owner: &Owner) -> bool {
        self.owner.as_ref().is_some_and(|own| own.same(owner))
    }

    /// Whether its owner's end leaves it to its TTL instead of releasing it.
    pub fn outlives_owner(&self) -> bool {
        self.outlives_owner
            .as_ref()
            .is_some_and(|outlives| outlives.load(Ordering::Relaxed))
    }

    /// The lock as its owner's end leaves it: to be released (see orphan.rs).
    pub fn into_orphan(self, clock: &TickClock) -> Orphan {
        Orphan {
            key: self.key().to_vec(),
            name: self.name(),
            token: String::from_utf8_lossy(self.token()).into_owned(),
            deadline: clock.at(self.deadline).into_std(),
            pair: self.pair,
        }
    }

    /// One key holding its token, refreshed with others in one call (see refresh_many.lua);
    /// an ExclusiveLock's pair has a script call of its own (`command`).
    pub fn is_single(&self) -> bool {
        self.pair.is_none()
    }

    /// The lock's name as the user knows it.
    pub fn name(&self) -> String {
        match &self.pair {
            Some(pair) => pair.name.clone(),
            None => String::from_utf8_lossy(&self.key()[self.name_at as usize..]).into_owned(),
        }
    }

    /// When (ms) the request that last set its TTL was sent.
    pub fn sent_ms(&self) -> u64 {
        let validity_ms = validity(self.ttl()).as_millis() as u64;
        self.deadline.saturating_sub(validity_ms)
    }

    pub fn confirmed(&self, clock: &TickClock) -> Confirmed {
        let sent = self.sent_ms();
        Confirmed {
            deadline: clock.at(self.deadline).into_std(),
            expires_at_ms: clock.base_wall_ms + sent + u64::from(self.ttl_ms),
        }
    }

    fn stalled_at(&self, clock: &TickClock) -> u64 {
        match &self.stall {
            Some((heartbeat, max)) => clock.ms(heartbeat.last()) + u64::from(*max),
            None => u64::MAX,
        }
    }

    /// Why this lock must be given up at `now` (ms), if it must.
    pub fn verdict(&self, now: u64, clock: &TickClock) -> Option<LockError> {
        let lost = |reason: &str| {
            Some(LockError::Lost {
                key: self.name(),
                reason: reason.into(),
            })
        };
        if now >= self.deadline {
            return lost("its TTL ran out before Redis confirmed a refresh");
        }
        if now >= self.hold_until {
            return lost("it was held for its longest hold (max_hold_ms)");
        }
        if let Some((_, budget)) = self
            .stall
            .as_ref()
            .filter(|_| now >= self.stalled_at(clock))
        {
            // Each API has its own name for the budget (ExclusiveLock's max_stall_ms, 3 x TTL
            // elsewhere), so the message gives the figure.
            return lost(&format!(
                "the JavaScript thread was blocked for longer than its stall budget of {budget} ms"
            ));
        }
        None
    }

    /// When the scheduler must look at this lock next (ms).
    pub fn next_event(&self, clock: &TickClock) -> u64 {
        let mut at = self
            .deadline
            .min(self.hold_until)
            .min(self.stalled_at(clock));
        if !self.in_flight {
            at = at.min(self.next_due + self.late_by());
        }
        at
    }

    /// How long after its due time a punctual lock may wait for its tick: never early, but
    /// late by up to a tenth of its interval (at most 100 ms), so that locks due within that
    /// window, as those acquired together, share one tick and one pipeline. A timer is late
    /// too; the TTL keeps at least 500 ms beyond the interval for ExclusiveLock, and two
    /// thirds of itself for DistributedLockService.
    fn late_by(&self) -> u64 {
        if self.punctual {
            u64::from(self.every_ms / 10).min(100)
        } else {
            0
        }
    }

    /// Refreshing up to half an interval early makes any two groups of locks whose phases
    /// are less than half an interval apart merge into one tick, so however the acquisitions
    /// were spread, a steady state has at most two pipelines per interval. Early is safe: the
    /// TTL only gets longer. A punctual lock is refreshed at its due time, and shares a
    /// pipeline only with the locks due (or ripe) then. So a lock not in flight is due from
    /// here: half an interval before its due time, or the due time itself for a punctual lock.
    pub fn ripe_at(&self) -> u64 {
        if self.punctual {
            return self.next_due;
        }
        self.next_due.saturating_sub(u64::from(self.every_ms / 2))
    }

    /// A refresh sent at `sent` (ms) was confirmed.
    pub fn refreshed(&mut self, sent: u64) {
        self.deadline = sent + validity(self.ttl()).as_millis() as u64;
        self.next_due = sent + u64::from(self.every_ms);
    }

    /// A refresh got no answer: try again in `after`; the deadline decides.
    pub fn retry_in(&mut self, now: u64, after: Duration) {
        self.next_due = now + after.as_millis() as u64;
    }

    pub fn due_now(&mut self, now: u64) {
        self.next_due = self.next_due.min(now);
    }

    pub fn every(&self) -> Duration {
        Duration::from_millis(u64::from(self.every_ms))
    }

    pub fn deadline_ms(&self) -> u64 {
        self.deadline
    }

    pub fn ttl_for_sink(&self) -> Duration {
        self.ttl()
    }

    /// What a refresh of this lock sends (see proto/refresh.rs).
    pub fn refresh(&self) -> Refresh<'_> {
        Refresh {
            key: self.key(),
            token: self.token(),
            ttl_ms: self.ttl_ms,
            fence_retention_ms: self.fence_retention_ms,
            pair: self.pair.as_ref().map(|pair| PairRefresh {
                data_key: &pair.data_key,
                expected: &pair.expected,
                set_at: pair.set_at,
            }),
        }
    }
}

/// Slots per chunk: the table grows by this many at a time.
const CHUNK: usize = 512;
/// Bits of an id that hold the slot's generation (1 to 255, so no id is 0).
const GENERATION_BITS: u32 = 8;

struct WatchSlot {
    generation: u8,
    entry: Option<Watched>,
}

/// Entries by id; an id is `index << 8 | generation`, never 0.
#[derive(Default)]
pub struct WatchSlots {
    chunks: Vec<Pages<WatchSlot>>,
    free: Vec<u32>,
    len: usize,
    /// The generation new slots start at; it goes on counting when the table is emptied, so
    /// ids from before do not come back at once.
    seed: u8,
}

fn split(id: u64) -> (u8, usize) {
    ((id & 0xff) as u8, (id >> GENERATION_BITS) as usize)
}

fn join(generation: u8, index: usize) -> u64 {
    ((index as u64) << GENERATION_BITS) | u64::from(generation)
}

impl WatchSlots {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn slot(&self, index: usize) -> Option<&WatchSlot> {
        self.chunks
            .get(index / CHUNK)?
            .as_slice()
            .get(index % CHUNK)
    }

    fn slot_mut(&mut self, index: usize) -> Option<&mut WatchSlot> {
        self.chunks
            .get_mut(index / CHUNK)?
            .as_mut_slice()
            .get_mut(index % CHUNK)
    }

    pub fn insert(&mut self, entry: Watched) -> u64 {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            if let Some(slot) = self.slot_mut(index as usize) {
                slot.generation = slot.generation.checked_add(1).unwrap_or(1);
                slot.entry = Some(entry);
                let (generation, id) = (slot.generation, join(slot.generation, index as usize));
                // The seed stays past every generation given out, so a table emptied and
                // filled again does not give out an id it gave before.
                self.seed = self.seed.max(generation);
                return id;
            }
        }
        if self.chunks.last().is_none_or(Pages::is_full) {
            self.chunks.push(Pages::with_capacity(CHUNK));
        }
        let index = (self.chunks.len() - 1) * CHUNK + self.chunks.last().map_or(0, Pages::len);
        let generation = self.seed.max(1);
        if let Some(chunk) = self.chunks.last_mut() {
            // Never full: a fresh chunk was added above when the last one was.
            let _ = chunk.push(WatchSlot {
                generation,
                entry: Some(entry),
            });
        }
        join(generation, index)
    }

    pub fn get(&self, id: u64) -> Option<&Watched> {
        let (generation, index) = split(id);
        let slot = self.slot(index)?;
        (slot.generation == generation).then_some(slot.entry.as_ref())?
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Watched> {
        let (generation, index) = split(id);
        let slot = self.slot_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.entry.as_mut()
    }

    pub fn remove(&mut self, id: u64) -> Option<Watched> {
        let (generation, index) = split(id);
        let slot = self.slot_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let entry = slot.entry.take()?;
        self.free.push(index as u32);
        self.len -= 1;
        if self.len == 0 {
            // Nothing watched: the room of a peak goes back to the system, but the first
            // chunk stays, so one lock taken and released in a loop maps no memory.
            self.seed = self.seed.max(1).wrapping_add(1).max(1);
            self.chunks.truncate(1);
            self.chunks.shrink_to_fit();
            if let Some(first) = self.chunks.first_mut() {
                first.clear();
            }
            self.free = Vec::new();
        }
        Some(entry)
    }

    /// Every entry with its id, for the scheduler's pass.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut Watched)> {
        self.chunks.iter_mut().enumerate().flat_map(|(c, chunk)| {
            chunk
                .as_mut_slice()
                .iter_mut()
                .enumerate()
                .filter_map(move |(i, slot)| {
                    let id = join(slot.generation, c * CHUNK + i);
                    slot.entry.as_mut().map(|entry| (id, entry))
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ops::signals::QuietSink;

    fn entry(clock: &TickClock, name: &str) -> Watched {
        let target = Target {
            key: format!("lock:{name}").into_bytes(),
            name_at: 5,
            token: "token".into(),
            pair: None,
            ttl: Duration::from_millis(1000),
            every: Duration::from_millis(300),
            punctual: false,
            fence_retention_ms: 60_000,
        };
        Watched::new(
            target,
            clock,
            Instant::now(),
            Limits::default(),
            Arc::new(QuietSink),
            7,
        )
    }

    #[test]
    fn ids_are_never_zero_and_a_stale_id_misses_the_slot_reused_after_it() {
        let clock = TickClock::default();
        let mut table = WatchSlots::default();
        let first = table.insert(entry(&clock, "a"));
        assert_ne!(first, 0);
        assert_eq!(table.get(first).map(Watched::name).as_deref(), Some("a"));
        assert!(table.remove(first).is_some());
        let second = table.insert(entry(&clock, "b"));
        assert_ne!(second, first, "the slot was reused under the same id");
        assert!(second < 1 << 31, "ids are small integers in JS");
        assert!(table.get(first).is_none());
        assert!(table.remove(first).is_none());
        assert_eq!(table.get(second).map(Watched::name).as_deref(), Some("b"));
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn an_emptied_table_keeps_one_chunk_gives_the_rest_back_and_old_ids_stay_stale() {
        let clock = TickClock::default();
        let mut table = WatchSlots::default();
        let ids: Vec<u64> = (0..CHUNK + 1)
            .map(|n| table.insert(entry(&clock, &n.to_string())))
            .collect();
        for id in &ids {
            table.remove(*id);
        }
        assert_eq!(table.chunks.len(), 1, "the peak's chunks were kept");
        assert!(table.chunks[0].is_empty() && table.free.is_empty());
        let again = table.insert(entry(&clock, "new"));
        assert_eq!(
            table.chunks.len(),
            1,
            "a lock taken again mapped a new chunk"
        );
        assert!(
            !ids.contains(&again),
            "an id from before the table emptied came back"
        );
        assert!(table.get(ids[0]).is_none());
    }

    #[test]
    fn an_id_given_out_by_a_reused_slot_is_not_given_again_after_the_table_empties() {
        let clock = TickClock::default();
        let mut table = WatchSlots::default();
        let a = table.insert(entry(&clock, "a"));
        let b = table.insert(entry(&clock, "b"));
        table.remove(a);
        let c = table.insert(entry(&clock, "c"));
        table.remove(b);
        table.remove(c);
        assert!(table.is_empty());
        let d = table.insert(entry(&clock, "d"));
        assert_ne!(
            d, c,
            "a stale id (a refresh in flight, a handle's watch) reaches a new lock"
        );
        assert_ne!(d, a);
        assert_ne!(d, b);
    }

    #[test]
    fn the_table_grows_by_chunks_and_iterates_every_live_entry() {
        let clock = TickClock::default();
        let mut table = WatchSlots::default();
        let ids: Vec<u64> = (0..CHUNK * 2 + 3)
            .map(|n| table.insert(entry(&clock, &n.to_string())))
            .collect();
        assert_eq!(table.chunks.len(), 3);
        for id in ids.iter().step_by(2) {
            table.remove(*id);
        }
        let live: Vec<u64> = table.iter_mut().map(|(id, _)| id).collect();
        assert_eq!(
            live,
            ids.iter().skip(1).step_by(2).copied().collect::<Vec<_>>()
        );
        assert!(live.iter().all(|id| table.get(*id).is_some()));
    }

    #[test]
    fn keys_short_and_long_keep_their_bytes() {
        let clock = TickClock::default();
        for len in [0, 1, INLINE - 5 - 5, INLINE - 5 - 4, INLINE, 4 * INLINE] {
            let name = "k".repeat(len);
            let e = entry(&clock, &name);
            assert_eq!(e.key(), format!("lock:{name}").as_bytes());
            assert_eq!(e.token(), b"token");
            assert_eq!(e.name(), name);
        }
    }
}
