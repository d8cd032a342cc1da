use super::*;

const MS: fn(u64) -> Duration = Duration::from_millis;

#[test]
fn the_stamp_is_born_then_now() {
    let reply = Value::Array(vec![Value::Int(1_000), Value::Int(1_250)]);
    assert_eq!(read_stamp(&reply), Some((1_000, 1_250)));
    assert_eq!(read_stamp(&Value::Int(1)), None);
    assert_eq!(
        read_stamp(&Value::Array(vec![Value::Int(-1), Value::Int(0)])),
        None
    );
}

#[test]
fn a_fresh_incarnation_closes_the_gate_for_the_whole_quarantine() {
    let receipt = Instant::now();
    let gate = Gate::new(receipt, (5_000, 5_000), MS(1_500));
    assert_eq!(gate.opens, receipt + MS(1_500));
    assert!(!gate.is_open(receipt + MS(1_499)));
    assert!(gate.is_open(receipt + MS(1_500)));
}

#[test]
fn an_old_incarnation_leaves_the_gate_open_and_a_young_one_for_what_is_left() {
    let receipt = Instant::now();
    assert!(Gate::new(receipt, (0, 60_000), MS(1_500)).is_open(receipt));
    let young = Gate::new(receipt, (5_000, 5_400), MS(1_500));
    assert_eq!(young.opens, receipt + MS(1_100));
    // A server clock behind `born` (set back) counts as just born: never shorter.
    let behind = Gate::new(receipt, (5_000, 4_000), MS(1_500));
    assert_eq!(behind.opens, receipt + MS(1_500));
}

#[test]
fn an_attempt_waits_for_a_gate_within_its_bound_and_fails_past_it() {
    let receipt = Instant::now();
    let gate = Gate::new(receipt, (5_000, 5_200), MS(1_000));
    assert_eq!(
        gate.admit(receipt, receipt + MS(900)),
        Admit::WaitUntil(receipt + MS(800))
    );
    let Admit::Refuse(err) = gate.admit(receipt, receipt + MS(700)) else {
        panic!("a gate past the bound must refuse");
    };
    assert_eq!(err.code(), "ECONNECTION");
    assert!(err.is_infrastructure());
    // The text users have always read, word for word.
    assert_eq!(
        err.to_string(),
        "cannot reach Redis: Redis was restarted 200 ms ago; no lock is given for restartQuarantineMs (1000) after a restart"
    );
    assert_eq!(gate.admit(receipt + MS(800), receipt), Admit::Open);
}

#[test]
fn a_clusters_epoch_key_is_in_the_slot_it_is_asked_for() {
    use crate::core::basics::slots::{slot, SLOTS};
    assert_eq!(epoch_key(None), EPOCH_KEY);
    for s in [0, 1, 5_461, 12_182, SLOTS - 1] {
        let key = epoch_key(Some(s));
        assert_eq!(slot(&key), s);
        assert!(key.ends_with(EPOCH_KEY));
    }
}
