//! The wake table as a state machine: random interleavings of joins, attempts (rearm, take a
//! grant), wakes of every kind (our releases, queue turns, a fair line naming a waiter, a
//! lost connection), hand-overs (reserve, by the runtime or in place on a JS thread, then
//! grant, settle, unreserve or drop, with reservations held across other steps), departures
//! (timeouts, cancellations) and ended owners. Every transition runs under the table's one
//! lock, so orders of these calls cover the interleavings of the tasks that make them. After
//! each step it checks that no waiter is both granted and settled, that no lease is lost or
//! handed out twice, that no wake is dropped by a leaving waiter, that no waiter holds a lock
//! it was not told of, that no waiter trying on its own is reserved in place, and that a
//! waiter refused its attempt is told when its reservation is dropped.

use super::*;
use crate::core::basics::clock::Stamp;
use crate::core::wait::waiter::WaiterState;
use proptest::prelude::*;
use std::collections::HashSet;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

const LOCKS: [&[u8]; 2] = [b"lock:a", b"lock:b"];
const TTL: Duration = Duration::from_millis(1000);
/// JS threads whose callers wait; a waiter joined with `thread: THREADS` has no caller.
const THREADS: usize = 2;

#[derive(Clone, Debug)]
enum Action {
    Join {
        lock: usize,
        fair: bool,
        owner: usize,
        /// The JS thread of its caller, when one may be answered in place (of `THREADS`).
        thread: usize,
    },
    Rearm(usize),
    TakeGrant(usize),
    Leave(usize),
    InLine(usize, bool),
    Trying(usize, bool),
    WakeLocal(usize),
    TakeTurn(usize),
    WakeMember(usize),
    ConnectionLost,
    Queued(usize),
    Reserve(usize),
    /// A release on JS thread `.1` of lock `.0`, answering the caller itself.
    ReserveInPlace(usize, usize),
    Grant(usize),
    Settle(usize),
    Unreserve(usize),
    DropReservation(usize),
    OwnerGone(usize),
}

fn step() -> impl Strategy<Value = Action> {
    let i = 0usize..8;
    prop_oneof![
        3 => (0usize..2, any::<bool>(), 0usize..2, 0..=THREADS)
            .prop_map(|(lock, fair, owner, thread)| Action::Join { lock, fair, owner, thread }),
        2 => i.clone().prop_map(Action::Rearm),
        2 => i.clone().prop_map(Action::TakeGrant),
        2 => i.clone().prop_map(Action::Leave),
        1 => (i.clone(), any::<bool>()).prop_map(|(i, on)| Action::InLine(i, on)),
        2 => (i.clone(), any::<bool>()).prop_map(|(i, on)| Action::Trying(i, on)),
        2 => (0usize..2).prop_map(Action::WakeLocal),
        2 => (0usize..2).prop_map(Action::TakeTurn),
        1 => i.clone().prop_map(Action::WakeMember),
        1 => Just(Action::ConnectionLost),
        1 => (0usize..2).prop_map(Action::Queued),
        2 => (0usize..2).prop_map(Action::Reserve),
        2 => (0usize..2, 0..THREADS).prop_map(|(lock, thread)| Action::ReserveInPlace(lock, thread)),
        2 => i.clone().prop_map(Action::Grant),
        1 => i.clone().prop_map(Action::Settle),
        1 => i.clone().prop_map(Action::Unreserve),
        1 => i.clone().prop_map(Action::DropReservation),
        1 => (0usize..2).prop_map(Action::OwnerGone),
    ]
}

/// Every cleanup the table asks for, kept whole.
#[derive(Default)]
struct Kept(Mutex<Vec<Cleanup>>);

impl Cleaner for Kept {
    fn clean_up(&self, cleanup: Cleanup) {
        lock(&self.0).push(cleanup);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum SeenState {
    Waiting,
    Woken,
    Reserved { woken: bool },
    Granted(String),
}

#[derive(Clone, Debug)]
struct Seen {
    lock: usize,
    seq: u64,
    kind: SeenState,
    fair: bool,
    orphaned: bool,
    in_line: bool,
    trying: bool,
    thread: Option<usize>,
}

struct Joined {
    ticket: Ticket,
    lock: usize,
    settled: bool,
    /// Refused an attempt while reserved, by the reservation still held.
    refused: bool,
}

/// A reservation held across steps: its lock, and whether a release on a JS thread made it.
struct Reserving {
    lock: usize,
    reservation: Reservation,
    in_place: bool,
}

/// Where a lease passed to `grant` is.
#[derive(Debug, PartialEq, Eq)]
enum Whereabouts {
    /// In the table, granted to waiter `seq`.
    Held(u64),
    Refused,
    Taken,
    Freed,
}

struct Model {
    wakes: Arc<Wakes>,
    kept: Arc<Kept>,
    owners: Vec<Owner>,
    joined: Vec<Joined>,
    reservations: Vec<Reserving>,
    leases: HashMap<String, Whereabouts>,
    next_lease: u32,
}

fn lease(token: &str, lock: usize) -> Lease {
    Lease::new(
        "job".into(),
        LOCKS[lock].to_vec(),
        token.into(),
        1,
        Stamp::now(),
        TTL,
    )
}

fn has_permit(ticket: &Ticket) -> bool {
    let woken = pin!(ticket.woken());
    let mut context = Context::from_waker(Waker::noop());
    matches!(woken.poll(&mut context), Poll::Ready(()))
}

impl Model {
    fn new() -> Self {
        let wakes = Arc::new(Wakes::default());
        let kept = Arc::new(Kept::default());
        let cleaner: Arc<dyn Cleaner> = kept.clone();
        wakes.set_cleaner(Arc::downgrade(&cleaner));
        Model {
            wakes,
            kept,
            owners: vec![Owner::new(), Owner::new()],
            joined: Vec::new(),
            reservations: Vec::new(),
            leases: HashMap::new(),
            next_lease: 0,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        let channels = lock(&self.wakes.channels);
        let mut seen = Vec::new();
        for (lock_index, name) in LOCKS.iter().map(|key| channel(key)).enumerate() {
            let Some(entry) = channels.get(&name) else {
                continue;
            };
            for waiter in &entry.waiters {
                let kind = match &waiter.state {
                    WaiterState::Waiting => SeenState::Waiting,
                    WaiterState::Woken => SeenState::Woken,
                    WaiterState::Reserved { woken, .. } => SeenState::Reserved { woken: *woken },
                    WaiterState::Granted(lease) => SeenState::Granted(lease.token.clone()),
                };
                seen.push(Seen {
                    lock: lock_index,
                    seq: waiter.seq,
                    kind,
                    fair: waiter.fair,
                    orphaned: waiter.is_orphaned(),
                    in_line: waiter.in_line,
                    trying: waiter.trying,
                    thread: waiter.caller.map(|caller| caller.thread),
                });
            }
        }
        seen
    }

    fn queued(&self, lock_index: usize) -> bool {
        let channels = lock(&self.wakes.channels);
        channels
            .get(&channel(LOCKS[lock_index]))
            .is_some_and(|entry| entry.queued.is_some())
    }

    fn cleanups(&self) -> Vec<Cleanup> {
        std::mem::take(&mut *lock(&self.kept.0))
    }

    fn live(&self, i: usize) -> Option<usize> {
        (!self.joined.is_empty()).then(|| i % self.joined.len())
    }

    /// Reservation `i`, taken to be used up, and whether its waiter was refused an attempt
    /// meanwhile (that refusal goes with it).
    fn reservation(&mut self, i: usize) -> Option<(usize, Reservation, bool)> {
        if self.reservations.is_empty() {
            return None;
        }
        let at = i % self.reservations.len();
        let Reserving {
            lock, reservation, ..
        } = self.reservations.remove(at);
        let joined = (self.joined.iter_mut()).find(|j| j.ticket.seq == reservation.seq);
        let refused = joined.is_some_and(|j| std::mem::take(&mut j.refused));
        Some((lock, reservation, refused))
    }

    fn took(&mut self, seq: u64, lease: Lease) {
        let was = self.leases.insert(lease.token.clone(), Whereabouts::Taken);
        assert_eq!(was, Some(Whereabouts::Held(seq)), "taken: {}", lease.token);
    }

    /// Waiters that went from Waiting to Woken between `before` and `after`.
    fn newly_woken(before: &[Seen], after: &[Seen]) -> Vec<Seen> {
        after
            .iter()
            .filter(|now| now.kind == SeenState::Woken)
            .filter(|now| {
                before
                    .iter()
                    .any(|then| then.seq == now.seq && then.kind == SeenState::Waiting)
            })
            .cloned()
            .collect()
    }

    fn first_wakeable(before: &[Seen], lock_index: usize) -> Option<u64> {
        before
            .iter()
            .find(|w| w.lock == lock_index && w.kind == SeenState::Waiting && !w.orphaned)
            .map(|w| w.seq)
    }

    fn run(&mut self, step: Action) {
        let before = self.seen();
        match step {
            Action::Join {
                lock,
                fair,
                owner,
                thread,
            } => {
                let owner = Some(self.owners[owner].clone());
                let caller = (thread < THREADS).then(|| Caller {
                    thread,
                    id: 1,
                    lent_start: false,
                    asked: std::time::Instant::now(),
                });
                let ticket = if fair {
                    self.wakes.join_fair(LOCKS[lock], TTL, owner)
                } else {
                    self.wakes.join_as(LOCKS[lock], TTL, (caller, None), owner)
                };
                assert!(!ticket.view().settled);
                self.joined.push(Joined {
                    ticket,
                    lock,
                    settled: false,
                    refused: false,
                });
            }
            Action::Rearm(i) | Action::TakeGrant(i) => {
                let Some(at) = self.live(i) else { return };
                let ticket = &self.joined[at].ticket;
                let seq = ticket.seq;
                let found = match step {
                    Action::Rearm(_) => ticket.rearm(),
                    _ => ticket.look(),
                };
                match found {
                    Resume::Granted(lease) => self.took(seq, lease),
                    Resume::Settled => assert!(self.joined[at].settled, "settled unasked"),
                    Resume::Waiting => {
                        assert!(!self.joined[at].settled, "settled yet not told so");
                        let was = before.iter().find(|w| w.seq == seq);
                        assert!(!matches!(
                            was,
                            Some(Seen {
                                kind: SeenState::Granted(_),
                                ..
                            })
                        ));
                    }
                }
            }
            Action::InLine(i, on) => {
                let Some(at) = self.live(i) else { return };
                if self.joined[at].ticket.is_fair() {
                    self.joined[at].ticket.set_in_line(on);
                }
            }
            Action::Trying(i, on) => {
                let Some(at) = self.live(i) else { return };
                let joined = &mut self.joined[at];
                let was = before.iter().find(|w| w.seq == joined.ticket.seq);
                let effect = joined.ticket.apply(Event::Trying(on));
                match was {
                    // Answered: an attempt is not sent.
                    None => assert!(effect.is_none() && joined.settled, "tried when answered"),
                    // Being handed the lock: no attempt either.
                    Some(w) if on && matches!(w.kind, SeenState::Reserved { .. }) => {
                        assert!(matches!(effect, Some(Effect::Refused(None))));
                        joined.refused = true;
                    }
                    Some(_) => assert!(matches!(effect, Some(Effect::Done { notify: false }))),
                }
            }
            Action::Leave(i) => {
                let Some(at) = self.live(i) else { return };
                let joined = self.joined.remove(at);
                let seq = joined.ticket.seq;
                let lock_index = joined.lock;
                let queued = self.queued(lock_index);
                drop(joined.ticket);
                let after = self.seen();
                assert!(after.iter().all(|w| w.seq != seq), "left, yet still there");
                let cleanups = self.cleanups();
                let owed: Vec<&Cleanup> = cleanups
                    .iter()
                    .filter(|c| !matches!(c, Cleanup::DropIdle))
                    .collect();
                assert!(owed.len() <= 1, "more than one cleanup for one departure");
                let Some(was) = before.iter().find(|w| w.seq == seq) else {
                    assert!(joined.settled, "gone from the table unsettled");
                    assert!(!owed.iter().any(|c| !matches!(c, Cleanup::LeaveQueue(_))));
                    return;
                };
                match (&was.kind, was.fair) {
                    (_, true) => {
                        let line = matches!(owed.first(), Some(Cleanup::LeaveLine { seq: s, .. }) if *s == seq);
                        assert_eq!(line, was.in_line, "a fair waiter's line place");
                    }
                    (SeenState::Granted(token), false) => {
                        let Some(Cleanup::FreeGranted(lease)) = owed.first() else {
                            panic!("a granted lock was not freed on leaving");
                        };
                        assert_eq!(&lease.token, token);
                        let was = self.leases.insert(token.clone(), Whereabouts::Freed);
                        assert_eq!(was, Some(Whereabouts::Held(seq)));
                    }
                    (SeenState::Woken | SeenState::Reserved { woken: true }, false) => {
                        let passed_here = Self::newly_woken(&before, &after)
                            .iter()
                            .any(|w| w.lock == lock_index);
                        let passed_on = matches!(owed.first(), Some(Cleanup::PassWake(_)));
                        assert!(
                            passed_here || passed_on || queued,
                            "a wake was dropped by a leaving waiter"
                        );
                    }
                    (SeenState::Waiting | SeenState::Reserved { woken: false }, false) => {
                        assert!(Self::newly_woken(&before, &after).is_empty());
                        assert!(!matches!(owed.first(), Some(Cleanup::PassWake(_))));
                    }
                }
            }
            Action::WakeLocal(lock_index) | Action::TakeTurn(lock_index) => {
                let expected = Self::first_wakeable(&before, lock_index);
                let name = channel(LOCKS[lock_index]);
                let turn = match step {
                    Action::TakeTurn(_) => Some(self.wakes.take_turn(&name)),
                    _ => {
                        self.wakes.wake_local(&name);
                        None
                    }
                };
                let woken = Self::newly_woken(&before, &self.seen());
                assert_eq!(
                    woken.iter().map(|w| w.seq).collect::<Vec<_>>(),
                    Vec::from_iter(expected)
                );
                if let Some(turn) = turn {
                    assert_eq!(matches!(turn, Turn::Woke), expected.is_some());
                }
                for w in &woken {
                    let at = self.joined.iter().position(|j| j.ticket.seq == w.seq);
                    let told = at.is_some_and(|at| has_permit(&self.joined[at].ticket));
                    assert!(told, "woken, yet not told");
                }
            }
            Action::WakeMember(i) => {
                let Some(at) = self.live(i) else { return };
                let ticket = &self.joined[at].ticket;
                let name = channel(LOCKS[self.joined[at].lock]);
                self.wakes.wake_member(&name, ticket.seq);
                let present = self.seen().iter().any(|w| w.seq == ticket.seq);
                assert!(!present || has_permit(ticket), "named, yet not told");
            }
            Action::ConnectionLost => self.wakes.connection_lost(&LostScope::All),
            Action::Queued(lock_index) => {
                let name = channel(LOCKS[lock_index]);
                let queued = !self.queued(lock_index);
                self.wakes.mark_queued(&name, queued);
            }
            Action::Reserve(lock_index) | Action::ReserveInPlace(lock_index, _) => {
                // The first in order that may be handed the lock, whatever it is doing.
                let first = before.iter().find(|w| {
                    w.lock == lock_index && w.kind == SeenState::Waiting && !w.orphaned && !w.fair
                });
                let name = channel(LOCKS[lock_index]);
                let (reserved, expected) = match step {
                    Action::ReserveInPlace(_, thread) => {
                        // Never one whose attempt is on its way, nor over it to a later one.
                        let ours = first.filter(|w| !w.trying && w.thread == Some(thread));
                        let reserved = self.wakes.reserve_in_place(&name, thread);
                        if let Some((_, caller)) = &reserved {
                            assert_eq!(caller.thread, thread, "answered on another thread");
                        }
                        (reserved.map(|(to, _)| to), ours)
                    }
                    _ => (self.wakes.reserve(&name), first),
                };
                assert_eq!(reserved.as_ref().map(|r| r.seq), expected.map(|w| w.seq));
                if let Some(reservation) = reserved {
                    let in_place = matches!(step, Action::ReserveInPlace(..));
                    self.reservations.push(Reserving {
                        lock: lock_index,
                        reservation,
                        in_place,
                    });
                }
            }
            Action::Grant(i) => {
                let Some((lock_index, to, _)) = self.reservation(i) else {
                    return;
                };
                let seq = to.seq;
                self.next_lease += 1;
                let token = format!("t{}", self.next_lease);
                let name = channel(LOCKS[lock_index]);
                let back = self.wakes.grant(&name, to, lease(&token, lock_index));
                let at = self.joined.iter().position(|j| j.ticket.seq == seq);
                match back {
                    Some(back) => {
                        assert_eq!(back.token, token);
                        self.leases.insert(token, Whereabouts::Refused);
                        let was = before.iter().find(|w| w.seq == seq);
                        assert!(was.is_none_or(|w| w.orphaned), "refused a live waiter");
                    }
                    None => {
                        let live = before.iter().any(|w| w.seq == seq && !w.orphaned);
                        assert!(live, "handed a lock to an ended owner's waiter");
                        self.leases.insert(token, Whereabouts::Held(seq));
                        let told = at.is_some_and(|at| has_permit(&self.joined[at].ticket));
                        assert!(told, "granted, yet not told");
                    }
                }
            }
            Action::Settle(i) => {
                let Some((lock_index, to, _)) = self.reservation(i) else {
                    return;
                };
                let seq = to.seq;
                let settled = self.wakes.settle(&channel(LOCKS[lock_index]), to, false);
                assert_eq!(settled, before.iter().any(|w| w.seq == seq));
                if settled {
                    let at = self.joined.iter().position(|j| j.ticket.seq == seq);
                    let Some(at) = at else {
                        panic!("settled a waiter that left");
                    };
                    self.joined[at].settled = true;
                    let ticket = &self.joined[at].ticket;
                    assert!(has_permit(ticket), "settled, yet not told");
                    assert!(ticket.view().settled);
                    assert!(ticket.take_grant().is_none());
                }
            }
            Action::Unreserve(i) | Action::DropReservation(i) => {
                let Some((_, to, refused)) = self.reservation(i) else {
                    return;
                };
                let seq = to.seq;
                let there = before.iter().any(|w| w.seq == seq);
                match step {
                    Action::Unreserve(_) => self.wakes.unreserve(to),
                    _ => drop(to),
                }
                let after = self.seen();
                if let Some(now) = after.iter().find(|w| w.seq == seq) {
                    let was_woken = before
                        .iter()
                        .any(|w| w.seq == seq && w.kind == SeenState::Reserved { woken: true });
                    let woken = matches!(step, Action::Unreserve(_)) || was_woken;
                    let expected = if woken {
                        SeenState::Woken
                    } else {
                        SeenState::Waiting
                    };
                    assert_eq!(now.kind, expected);
                }
                // Refused its attempt, it sleeps on the hand-over's word: told it is off.
                if there && (refused || matches!(step, Action::Unreserve(_))) {
                    let at = self.joined.iter().position(|j| j.ticket.seq == seq);
                    let told = at.is_some_and(|at| has_permit(&self.joined[at].ticket));
                    assert!(told, "its hand-over off, yet not told");
                }
            }
            Action::OwnerGone(o) => {
                // Its waits would end; here, its waiters stay until they leave.
                drop(self.owners[o].end());
            }
        }
        self.check();
    }

    /// What holds after every step.
    fn check(&self) {
        let seen = self.seen();
        let channels = lock(&self.wakes.channels);
        assert_eq!(
            self.wakes.remembered.load(Ordering::SeqCst),
            channels.len(),
            "remembered drifted"
        );
        for entry in channels.values() {
            let seqs: Vec<u64> = entry.waiters.iter().map(|w| w.seq).collect();
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "waiters out of order");
        }
        drop(channels);
        let reserved: HashSet<u64> = (self.reservations.iter())
            .map(|held| held.reservation.seq)
            .collect();
        let in_place: HashSet<u64> = (self.reservations.iter())
            .filter(|held| held.in_place)
            .map(|held| held.reservation.seq)
            .collect();
        for w in &seen {
            if w.fair {
                assert!(
                    matches!(w.kind, SeenState::Waiting | SeenState::Woken),
                    "a fair waiter was picked for a hand-over"
                );
            }
            if matches!(w.kind, SeenState::Reserved { .. }) {
                assert!(reserved.contains(&w.seq), "reserved with no reservation");
                // Its caller, answered in place, could release the lock before that attempt
                // lands (the runtime's release answers nobody itself: it may pick it).
                assert!(
                    !(w.trying && in_place.contains(&w.seq)),
                    "trying and reserved in place"
                );
            }
            if let SeenState::Granted(token) = &w.kind {
                assert_eq!(self.leases.get(token), Some(&Whereabouts::Held(w.seq)));
            }
        }
        for (token, whereabouts) in &self.leases {
            if let Whereabouts::Held(seq) = whereabouts {
                let held = seen
                    .iter()
                    .any(|w| w.seq == *seq && w.kind == SeenState::Granted(token.clone()));
                assert!(held, "lease {token} lost");
            }
        }
        for joined in &self.joined {
            let present = seen.iter().any(|w| w.seq == joined.ticket.seq);
            assert_eq!(
                present, !joined.settled,
                "granted and settled at once, or lost"
            );
            assert_eq!(joined.ticket.view().settled, joined.settled);
        }
    }

    /// Everyone leaves: every lease handed over is accounted for, nobody is left behind.
    fn finish(mut self) {
        self.reservations.clear();
        while !self.joined.is_empty() {
            self.run(Action::Leave(0));
        }
        self.check();
        let held: Vec<_> = self
            .leases
            .iter()
            .filter(|(_, w)| matches!(w, Whereabouts::Held(_)))
            .collect();
        assert!(held.is_empty(), "leases never taken nor freed: {held:?}");
        assert!(self.seen().is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn waiters_keep_their_invariants_under_any_interleaving(
        steps in prop::collection::vec(step(), 1..200)
    ) {
        let mut model = Model::new();
        for step in steps {
            model.run(step);
        }
        model.finish();
    }
}
