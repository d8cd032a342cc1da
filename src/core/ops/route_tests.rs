//! Unit tests of `route.rs`: which facts keep a first attempt off the caller's connection.
use super::*;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::basics::cancel::Cancel;
use crate::core::ops::acquire::Plan;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn locker(port: u16, fair: bool) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        port: Some(port),
        ..Default::default()
    })
    .unwrap();
    let store = Store::shared(endpoint);
    Arc::new(Locker::new(store, "t:", Duration::from_millis(500)).fair(fair))
}

fn open() -> FirstAttempt {
    FirstAttempt {
        scripts_ready: true,
        ..FirstAttempt::default()
    }
}

#[test]
fn every_fact_alone_sends_the_attempt_to_the_runtime() {
    assert!(open().may_leave_runtime());
    let blockers = [
        FirstAttempt {
            fair: true,
            ..open()
        },
        FirstAttempt {
            cancelled: true,
            ..open()
        },
        FirstAttempt {
            subscribed: true,
            ..open()
        },
        FirstAttempt {
            turn_from_others: true,
            ..open()
        },
        FirstAttempt {
            gate_closed: true,
            ..open()
        },
    ];
    for facts in blockers {
        assert!(!facts.may_leave_runtime(), "{facts:?}");
    }
}

#[test]
fn scripts_not_known_loaded_matter_only_to_a_watched_lock() {
    let unloaded = FirstAttempt::default();
    assert!(unloaded.may_leave_runtime());
    assert!(!unloaded.watched(true).may_leave_runtime());
    assert!(open().watched(true).may_leave_runtime());
}

#[test]
fn a_store_whose_scripts_were_never_loaded_keeps_watched_attempts_off() {
    let locker = locker(41101, false);
    let facts = FirstAttempt::of(&locker);
    assert!(!facts.scripts_ready && !facts.fair);
    assert!(facts.may_leave_runtime());
    assert!(!facts.watched(true).may_leave_runtime());
    assert!(!FirstAttempt::on(locker.store())
        .watched(true)
        .may_leave_runtime());
    assert!(!FirstAttempt::of(&self::locker(41102, true)).may_leave_runtime());
}

#[test]
fn the_mode_tells_cancellation_and_a_waiter_behind_ours() {
    let locker = locker(41103, false);
    let cancel = Cancel::signal();
    let retries = |cancel: &Cancel| Mode {
        plan: Plan::retries(1, Duration::from_millis(1), None, None),
        cancel: cancel.clone(),
    };
    assert!(FirstAttempt::of(&locker)
        .in_mode(&retries(&cancel))
        .may_leave_runtime());
    let until = |place| Mode {
        plan: Plan::until(
            place,
            Instant::now() + Duration::from_secs(1),
            Duration::from_millis(10),
        ),
        cancel: Cancel::never(),
    };
    let ttl = Duration::from_secs(1);
    let first = until(locker.place("k", ttl, None));
    assert!(FirstAttempt::of(&locker)
        .in_mode(&first)
        .may_leave_runtime());
    // Nobody of ours waits yet: a second waiter carries its attempt too, right behind.
    let second = until(locker.place("k", ttl, None));
    assert!(FirstAttempt::of(&locker)
        .in_mode(&second)
        .may_leave_runtime());
    // Once the first found the lock held and joined, a newcomer queues behind it.
    let first = first.plan.joined(&locker, "k", ttl);
    let third = until(locker.place("k", ttl, None));
    let facts = FirstAttempt::of(&locker).in_mode(&third);
    assert!(facts.turn_from_others && !facts.may_leave_runtime());
    drop(first);
    cancel.cancel();
    let facts = FirstAttempt::of(&locker).in_mode(&retries(&cancel));
    assert!(facts.cancelled && !facts.may_leave_runtime());
}

fn endpoint(url: &str) -> Endpoint {
    Endpoint::from_spec(EndpointSpec {
        url: Some(url.into()),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn each_endpoint_offers_its_way_and_the_facts_may_keep_a_call_on_the_runtime() {
    assert_eq!(
        Route::outside(&Store::shared(endpoint("redis://127.0.0.1:41104"))),
        Way::Socket
    );
    assert_eq!(
        Route::outside(&Store::shared(endpoint("memory://route-unit"))),
        Way::Inline
    );
    assert_eq!(
        Route::outside(&Store::shared(endpoint("rediss://127.0.0.1:41105"))),
        Way::Runtime
    );
    assert_eq!(
        Route::outside(&Store::shared(endpoint("unix:///tmp/route-unit.sock"))),
        Way::Runtime
    );
    let store = Store::shared(endpoint("memory://route-unit"));
    assert_eq!(Route::way(&store, RouteFacts::Any), Way::Inline);
    let fair = FirstAttempt {
        fair: true,
        ..open()
    };
    assert_eq!(Route::way(&store, RouteFacts::Attempt(fair)), Way::Runtime);
    assert_eq!(Route::way(&store, RouteFacts::Attempt(open())), Way::Inline);
    let tls = Store::shared(endpoint("rediss://127.0.0.1:41105"));
    assert_eq!(Route::way(&tls, RouteFacts::Any), Way::Runtime);
}

#[test]
fn a_store_with_a_restart_quarantine_keeps_first_attempts_on_the_runtime() {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        port: Some(1),
        restart_quarantine: Some(Duration::from_millis(1_000)),
        ..Default::default()
    })
    .unwrap();
    let store = Store::shared(endpoint);
    assert!(FirstAttempt::on(&store).gate_closed);
    let plain = locker(1, false);
    assert!(!FirstAttempt::on(plain.store()).gate_closed);
}

#[test]
fn a_redlock_with_a_restart_quarantine_keeps_first_attempts_off_the_nodes_sockets() {
    let nodes = |quarantine: Option<Duration>| {
        (1..=3)
            .map(|port| {
                Endpoint::from_spec(EndpointSpec {
                    port: Some(port),
                    restart_quarantine: quarantine,
                    ..Default::default()
                })
                .unwrap()
            })
            .collect::<Vec<_>>()
    };
    let redlock =
        |quarantine| Store::shared(Endpoint::redlock(nodes(quarantine), "redis").unwrap());
    let gated = redlock(Some(Duration::from_millis(1_000)));
    assert!(FirstAttempt::on(&gated).gate_closed);
    assert_eq!(
        Route::way(
            &gated,
            RouteFacts::Attempt(FirstAttempt::on(&gated).watched(false))
        ),
        Way::Runtime
    );
    let plain = redlock(None);
    assert!(!FirstAttempt::on(&plain).gate_closed);
    assert_eq!(Route::outside(&plain), Way::Quorum);
}
