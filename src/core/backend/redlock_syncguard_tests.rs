use super::*;

const QUORUM_OF_5: Tally = Tally {
    nodes: 5,
    quorum: 3,
};

fn record(id: &str, fence: &str, expires: u64) -> Vec<u8> {
    format!(r#"{{"key":"k\"lockId\":\"x","lockId":"{id}","expiresAtMs":{expires},"acquiredAtMs":1,"fence":"{fence}"}}"#)
        .into_bytes()
}

fn down() -> Result<Option<Vec<u8>>, LockError> {
    Err(LockError::Connection("refused".into()))
}

#[test]
fn a_records_fields_are_read_as_cjson_writes_them_not_from_inside_the_key() {
    let r = record("AAAA", "000000000000007", 1_717_000_000_123);
    assert_eq!(field(&r, "lockId"), Some(&b"AAAA"[..]));
    assert_eq!(field(&r, "fence"), Some(&b"000000000000007"[..]));
    assert_eq!(expires_at_ms(&r), 1_717_000_000_123);
    assert_eq!(side(&r), b"AAAA/000000000000007".to_vec());
}

#[test]
fn a_lookup_answers_the_record_of_a_quorum_with_its_quorum_th_latest_expiry() {
    let replies = vec![
        Ok(Some(record("A", "5", 300))),
        Ok(Some(record("A", "5", 100))),
        Ok(Some(record("A", "5", 200))),
        Ok(Some(record("A", "1", 900))),
        Ok(None),
    ];
    let got = read_verdict(&QUORUM_OF_5, replies).expect("a record");
    assert_eq!(got, Some(record("A", "5", 100)));
}

#[test]
fn a_lookup_answers_none_when_no_record_can_be_on_a_quorum() {
    let split = vec![
        Ok(Some(record("A", "5", 1))),
        Ok(Some(record("A", "5", 1))),
        Ok(Some(record("B", "6", 1))),
        Ok(Some(record("B", "6", 1))),
        Ok(None),
    ];
    assert_eq!(read_verdict(&QUORUM_OF_5, split).ok(), Some(None));
    let free = vec![Ok(None), Ok(None), Ok(None), down(), down()];
    assert_eq!(read_verdict(&QUORUM_OF_5, free).ok(), Some(None));
}

#[test]
fn a_lookup_that_silent_nodes_could_decide_is_the_quorum_error() {
    let replies = vec![
        Ok(Some(record("A", "5", 1))),
        Ok(Some(record("A", "5", 1))),
        Ok(None),
        down(),
        down(),
    ];
    let err = read_verdict(&QUORUM_OF_5, replies).expect_err("undecided");
    assert!(err.is_infrastructure(), "{err}");
    assert!(err.to_string().contains("only 2 of 5"), "{err}");
    let few = vec![Ok(None), Ok(None), down(), down(), down()];
    let err = read_verdict(&QUORUM_OF_5, few).expect_err("2 answered");
    assert!(err.to_string().contains("answered"), "{err}");
}

#[test]
fn a_release_by_id_is_released_on_a_quorum_else_expired_else_not_ours() {
    let key = || b"k".to_vec();
    let released = || ReleasedById::Released { lock_key: key() };
    let expired = || ReleasedById::Expired { lock_key: key() };
    let three = vec![released(), released(), released(), ReleasedById::NotFound];
    assert_eq!(release_verdict(&QUORUM_OF_5, three), released());
    let mixed = vec![released(), released(), expired(), ReleasedById::NotFound];
    assert_eq!(release_verdict(&QUORUM_OF_5, mixed), expired());
    let another = vec![released(), ReleasedById::NotOwner, ReleasedById::NotFound];
    assert_eq!(
        release_verdict(&QUORUM_OF_5, another),
        ReleasedById::NotOwner
    );
    let none = vec![ReleasedById::NotFound, ReleasedById::NotFound];
    assert_eq!(release_verdict(&QUORUM_OF_5, none), ReleasedById::NotFound);
}

#[test]
fn a_won_attempt_reports_the_quorum_th_latest_expiry() {
    let won = |at| {
        Some(Ok(Acquired::Won {
            fence: 1,
            set_at: Some(at),
        }))
    };
    let replies = vec![
        won(30),
        won(10),
        won(20),
        None,
        Some(Ok(Acquired::Held { ttl: None })),
    ];
    assert_eq!(won_expiry(&replies, 3), Some(10));
    assert_eq!(won_expiry(&replies[..2], 3), None);
    assert_eq!(quorum_latest(vec![5, 9, 7, 1], 3), Some(5));
}
