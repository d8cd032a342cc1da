use super::*;
use crate::core::ops::signals::QuietSink;
use crate::core::ops::signals::Sink;
use crate::core::ops::watched::{Limits, Target};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A lock whose TTL was set at `sent` ms on `clock`, refreshed every `every` ms.
fn entry(clock: &TickClock, sent: u64, ttl: u64, every: u64) -> Watched {
    entry_of(clock, sent, ttl, every, false)
}

/// As `entry`, never refreshed early when `punctual`.
fn entry_of(clock: &TickClock, sent: u64, ttl: u64, every: u64, punctual: bool) -> Watched {
    let target = Target {
        key: b"lock:k".to_vec(),
        name_at: 5,
        token: "token".into(),
        pair: None,
        ttl: Duration::from_millis(ttl),
        every: Duration::from_millis(every),
        punctual,
        fence_retention_ms: 60_000,
    };
    let sink: Arc<dyn Sink> = Arc::new(QuietSink);
    Watched::new(target, clock, clock.at(sent), Limits::default(), sink, 0)
}

fn clock() -> TickClock {
    TickClock::default()
}

#[test]
fn a_tick_visits_the_due_locks_not_the_whole_table() {
    let clock = clock();
    let mut schedule = Schedule::default();
    for _ in 0..5_000 {
        schedule.insert(entry(&clock, 0, 600_000, 200_000), &clock);
    }
    let soon: Vec<u64> = (0..3)
        .map(|_| schedule.insert(entry(&clock, 0, 3_000, 1_000), &clock).0)
        .collect();
    assert_eq!(schedule.next_wake(&clock), Some(1_000));
    let before = schedule.visited();
    let tick = schedule.tick(1_000, &clock);
    assert_eq!(tick.due, soon);
    assert!(tick.lost.is_empty());
    // Each due lock's event and its ripe pair.
    assert_eq!(schedule.visited() - before, 6);
}

#[test]
fn a_tick_takes_along_the_locks_due_within_half_an_interval() {
    let clock = clock();
    let mut schedule = Schedule::default();
    let first = schedule.insert(entry(&clock, 0, 3_000, 1_000), &clock).0;
    let near = schedule.insert(entry(&clock, 499, 3_000, 1_000), &clock).0;
    let far = schedule.insert(entry(&clock, 501, 3_000, 1_000), &clock).0;
    let tick = schedule.tick(1_000, &clock);
    assert_eq!(tick.due, [first, near]);
    assert!(schedule.get(far).is_some_and(|e| !e.in_flight));
    // Not at the near lock's due time: it is in flight, so the far one's comes first.
    assert_eq!(schedule.next_wake(&clock), Some(1_501));
    assert_eq!(schedule.tick(1_501, &clock).due, [far]);
}

#[test]
fn a_punctual_lock_is_refreshed_at_its_due_time_not_with_an_earlier_tick() {
    let clock = clock();
    let mut schedule = Schedule::default();
    let first = schedule.insert(entry(&clock, 0, 3_000, 1_000), &clock).0;
    let punctual = schedule
        .insert(entry_of(&clock, 300, 3_000, 1_000, true), &clock)
        .0;
    let batched = schedule.insert(entry(&clock, 300, 3_000, 1_000), &clock).0;
    let together = schedule
        .insert(entry_of(&clock, 350, 3_000, 1_000, true), &clock)
        .0;
    assert_eq!(schedule.tick(1_000, &clock).due, [first, batched]);
    assert!(schedule.get(punctual).is_some_and(|e| !e.in_flight));
    // Due at 1,300 and 1,350: one tick takes both, a tenth of the interval after the first.
    assert_eq!(schedule.next_wake(&clock), Some(1_400));
    assert!(schedule.tick(1_299, &clock).due.is_empty());
    assert_eq!(schedule.tick(1_400, &clock).due, [punctual, together]);
}

#[test]
fn a_lock_past_its_deadline_is_given_up_at_the_deadline() {
    let clock = clock();
    let mut schedule = Schedule::default();
    let id = schedule.insert(entry(&clock, 0, 1_000, 300), &clock).0;
    assert_eq!(schedule.tick(300, &clock).due, [id]);
    // The refresh never comes back: the deadline (TTL less the drift allowance) decides.
    let deadline = schedule.next_wake(&clock).unwrap_or_default();
    assert!(deadline > 900 && deadline < 1_000, "{deadline}");
    assert!(schedule.tick(deadline - 1, &clock).lost.is_empty());
    let tick = schedule.tick(deadline, &clock);
    assert_eq!(tick.lost.len(), 1);
    assert!(schedule.is_empty());
}

#[test]
fn an_answered_refresh_is_queued_again_at_its_new_due_time() {
    let clock = clock();
    let mut schedule = Schedule::default();
    let id = schedule.insert(entry(&clock, 0, 3_000, 1_000), &clock).0;
    assert_eq!(schedule.tick(1_000, &clock).due, [id]);
    if let Some(entry) = schedule.get_mut(id) {
        entry.in_flight = false;
        entry.refreshed(1_000);
    }
    assert_eq!(schedule.requeue(id, &clock), Some(2_000));
    assert!(schedule.tick(1_001, &clock).due.is_empty());
    assert_eq!(schedule.next_wake(&clock), Some(2_000));
    assert_eq!(schedule.tick(2_000, &clock).due, [id]);
}

#[test]
fn stopping_locks_costs_one_visit_each_and_the_queues_stay_bounded() {
    let clock = clock();
    let mut schedule = Schedule::default();
    let keep: Vec<u64> = (0..100)
        .map(|_| {
            schedule
                .insert(entry(&clock, 0, 600_000, 200_000), &clock)
                .0
        })
        .collect();
    let before = schedule.visited();
    for _ in 0..20_000 {
        let id = schedule
            .insert(entry(&clock, 0, 600_000, 200_000), &clock)
            .0;
        schedule.remove(id);
        if schedule.needs_rebuild() {
            schedule.tick(1, &clock);
        }
    }
    let visited = schedule.visited() - before;
    assert!(visited <= 3 * 2 * 20_000, "{visited}");
    assert!(schedule.events.len() + schedule.ripe.len() <= 4 * 100 + SLACK + 2);
    assert!(keep.iter().all(|id| schedule.get(*id).is_some()));
    let tick = schedule.tick(200_000, &clock);
    assert_eq!(tick.due, keep, "a rebuild lost a lock");
}

#[test]
fn all_due_refreshes_every_lock_at_the_next_tick() {
    let clock = clock();
    let mut schedule = Schedule::default();
    let ids: Vec<u64> = (0..10)
        .map(|_| {
            schedule
                .insert(entry(&clock, 0, 600_000, 200_000), &clock)
                .0
        })
        .collect();
    schedule.all_due(50, 50, &clock);
    assert_eq!(schedule.next_wake(&clock), Some(50));
    let mut due = schedule.tick(50, &clock).due;
    due.sort_unstable();
    assert_eq!(due, ids);
}

#[test]
fn the_stall_guard_gives_a_lock_up_once_the_heartbeat_is_too_old() {
    use crate::core::ops::signals::Heartbeat;
    let clock = clock();
    let heartbeat = Arc::new(Heartbeat::default());
    let target = Target {
        key: b"lock:k".to_vec(),
        name_at: 5,
        token: "token".into(),
        pair: None,
        ttl: Duration::from_millis(600_000),
        every: Duration::from_millis(200_000),
        punctual: false,
        fence_retention_ms: 60_000,
    };
    let limits = Limits {
        stall: Some((heartbeat, Duration::from_millis(300))),
        ..Limits::default()
    };
    let sink: Arc<dyn Sink> = Arc::new(QuietSink);
    let mut schedule = Schedule::default();
    schedule.insert(
        Watched::new(target, &clock, Instant::now(), limits, sink, 0),
        &clock,
    );
    let at = schedule.next_wake(&clock).unwrap_or(u64::MAX);
    assert!(at <= clock.ms(Instant::now()) + 300, "{at}");
    assert_eq!(schedule.tick(at + 1, &clock).lost.len(), 1);
}
