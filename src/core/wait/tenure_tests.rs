use super::*;

const TERMS: TenureTerms = TenureTerms {
    window: TENURE,
    kick_after: KICK_AFTER,
};

fn at(start: Instant, micros: u64) -> Instant {
    start + Duration::from_micros(micros)
}

#[test]
fn releases_within_the_tenure_are_quiet_and_the_first_after_it_ends_it() {
    let (start, mut tenure) = (Instant::now(), Tenure::default());
    tenure.acquired(start);
    assert!(tenure.release_quietly(at(start, 300), TERMS));
    assert!(tenure.freed(at(start, 310), 0));
    // Taken back: the same tenure goes on.
    tenure.acquired(at(start, 400));
    assert!(!tenure.kick_pending());
    assert!(tenure.release_quietly(at(start, 700), TERMS));
    assert!(!tenure.freed(at(start, 710), 0), "one kicker per tenure");
    tenure.acquired(at(start, 800));
    let past = start + TENURE + Duration::from_micros(1);
    assert!(!tenure.release_quietly(past, TERMS));
    // Ended: the next acquisition starts a new one.
    assert!(!tenure.release_quietly(past, TERMS));
    tenure.acquired(past);
    assert!(tenure.release_quietly(past + Duration::from_micros(10), TERMS));
}

#[test]
fn without_an_acquisition_seen_no_release_is_quiet() {
    assert!(!Tenure::default().release_quietly(Instant::now(), TERMS));
}

#[test]
fn a_lock_freed_quietly_and_not_taken_back_is_kicked_after_kick_after() {
    let (start, mut tenure) = (Instant::now(), Tenure::default());
    tenure.acquired(start);
    assert!(tenure.release_quietly(at(start, 100), TERMS));
    assert!(tenure.freed(at(start, 110), 0));
    let due = at(start, 110) + KICK_AFTER;
    assert_eq!(tenure.kick_step(at(start, 120), TERMS), KickStep::Wait(due));
    assert_eq!(tenure.kick_step(due, TERMS), KickStep::Kick);
    // The kick ended the tenure: the task ends, and a release now grants.
    assert_eq!(tenure.kick_step(due, TERMS), KickStep::Done);
    assert!(!tenure.release_quietly(due, TERMS));
}

#[test]
fn a_lock_taken_back_is_not_kicked_and_its_kicker_waits_for_the_tenure_to_end() {
    let (start, mut tenure) = (Instant::now(), Tenure::default());
    tenure.acquired(start);
    assert!(tenure.release_quietly(at(start, 100), TERMS));
    assert!(tenure.freed(at(start, 110), 0));
    tenure.acquired(at(start, 150));
    assert_eq!(
        tenure.kick_step(at(start, 160), TERMS),
        KickStep::Wait(start + TENURE)
    );
    assert_eq!(tenure.kick_step(start + TENURE, TERMS), KickStep::Done);
    // The task ended: the next quiet release starts another.
    assert!(tenure.freed(start + TENURE, 0));
}

#[test]
fn a_kick_taken_at_close_leaves_nothing_to_kick() {
    let (start, mut tenure) = (Instant::now(), Tenure::default());
    tenure.acquired(start);
    assert!(!tenure.take_kick());
    assert!(tenure.release_quietly(at(start, 100), TERMS));
    assert!(tenure.freed(at(start, 110), 0));
    assert!(tenure.take_kick());
    assert_eq!(tenure.kick_step(at(start, 120), TERMS), KickStep::Done);
}

#[test]
fn a_tenure_begun_by_a_grant_has_its_kicker_already_so_its_quiet_releases_start_none() {
    let (start, mut tenure) = (Instant::now(), Tenure::default());
    assert!(!tenure.arm(), "no tenure, nothing to kick");
    tenure.acquired(start);
    assert!(tenure.arm());
    assert!(!tenure.arm(), "one kicker per tenure");
    assert!(tenure.release_quietly(at(start, 300), TERMS));
    assert!(
        !tenure.freed(at(start, 310), 0),
        "the armed kicker kicks it"
    );
    let due = at(start, 310) + KICK_AFTER;
    assert_eq!(tenure.kick_step(at(start, 320), TERMS), KickStep::Wait(due));
    assert_eq!(tenure.kick_step(due, TERMS), KickStep::Kick);
}

#[test]
fn while_held_in_a_long_tenure_the_kicker_looks_again_within_kick_after() {
    let terms = TenureTerms {
        window: Duration::from_secs(60),
        kick_after: KICK_AFTER,
    };
    let (start, mut tenure) = (Instant::now(), Tenure::default());
    tenure.acquired(start);
    assert!(tenure.arm());
    // A quiet release may come just after this look: the next is no later than its kick.
    let look = at(start, 50);
    assert_eq!(
        tenure.kick_step(look, terms),
        KickStep::Wait(look + KICK_AFTER)
    );
    assert!(tenure.release_quietly(at(start, 60), terms));
    assert!(!tenure.freed(at(start, 60), 0));
    let due = at(start, 60) + KICK_AFTER;
    assert_eq!(
        tenure.kick_step(look + KICK_AFTER, terms),
        KickStep::Wait(due)
    );
    assert_eq!(tenure.kick_step(due, terms), KickStep::Kick);
}
