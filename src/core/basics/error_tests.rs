use super::*;

#[test]
fn codes_are_stable() {
    assert_eq!(LockError::invalid_type("key", "x").code(), "EINVAL");
    assert_eq!(LockError::Connection("x".into()).code(), "ECONNECTION");
    assert_eq!(LockError::Timeout("x".into()).code(), "ETIMEDOUT");
    assert_eq!(LockError::Aborted.code(), "EABORTED");
    assert_eq!(LockError::NotHeld { key: "k".into() }.code(), "ENOTHELD");
    assert_eq!(LockError::Unready("x".into()).code(), "EREDIS");
}

/// The crate's error for a server's error `reply` (RESP text).
fn server_error(reply: &str) -> redis::RedisError {
    let value = redis::parse_redis_value(reply.as_bytes()).expect("a RESP error");
    value.extract_error().expect_err("an error reply")
}

fn sent(reply: &str) -> LockError {
    LockError::from(server_error(reply))
}

/// An infrastructure failure of code `code` whose text says all of `says`.
fn assert_infrastructure(err: &LockError, code: &str, says: &[&str]) {
    assert_eq!(err.code(), code, "{err:?}");
    assert!(err.is_infrastructure());
    let text = err.to_string();
    assert!(says.iter().all(|part| text.contains(part)), "{text}");
    // Messages stay under 350 bytes, the server's words included.
    assert!(text.len() < 350, "{} bytes: {text}", text.len());
}

/// By the reply's code, never its text: a script's own message may name anything.
#[test]
fn a_server_answering_about_its_own_state_is_unready() {
    for code in UNREADY_CODES {
        let err = sent(&format!("-{code} the server's words\r\n"));
        assert!(matches!(err, LockError::Unready(_)), "{code}: {err:?}");
        assert_eq!(err.code(), "EREDIS");
    }
    let err = sent("-ERR script: READONLY You can't write against a read only replica.\r\n");
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
}

/// JS passes these on as syncguard's `AcquisitionTimeout` messages, word for word.
#[test]
fn giving_up_says_what_syncguard_says() {
    let messages = [
        (
            GaveUp::TimedOut {
                elapsed_ms: 5003,
                attempts: 4,
            },
            "Failed to acquire lock after 5003ms (4 attempts)",
        ),
        (
            GaveUp::Contention { attempts: 11 },
            "Failed to acquire lock after 11 attempts (lock contention)",
        ),
        (
            GaveUp::NoTimeForRetry { elapsed_ms: 4990 },
            "Timeout reached before next retry (4990ms elapsed)",
        ),
    ];
    for (gave_up, message) in messages {
        let err = LockError::GaveUp(gave_up);
        assert_eq!(err.to_string(), message);
        assert_eq!(err.code(), "EGAVEUP");
        assert!(!err.is_infrastructure());
    }
}

#[test]
fn refused_connection_is_infrastructure() {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    let err = LockError::from(redis::RedisError::from(io));
    assert_eq!(err.code(), "ECONNECTION");
    assert!(err.is_infrastructure());
}

#[test]
fn a_cluster_without_a_connection_to_the_keys_node_is_a_connection_error() {
    let crate_err = redis::RedisError::from((
        redis::ErrorKind::ClusterConnectionNotFound,
        "No connections found",
    ));
    let err = LockError::from(crate_err);
    assert_eq!(err.code(), "ECONNECTION");
    assert!(err.is_infrastructure());
    assert!(
        err.to_string().contains("cluster node serving the key"),
        "{err}"
    );
}

/// A slot with no master is the key's server out of reach: the code a refused connection
/// gets, so a caller's retry treats both alike (syncguard: ServiceUnavailable).
#[test]
fn a_cluster_down_for_the_slot_is_a_connection_error() {
    let err = sent("-CLUSTERDOWN The cluster is down\r\n");
    assert!(matches!(err, LockError::Connection(_)), "{err:?}");
    assert_infrastructure(&err, "ECONNECTION", &["CLUSTERDOWN", "slot"]);
    // Decided by the code: a script's message naming it is the script's own error.
    let err = sent("-ERR script: CLUSTERDOWN said by a script\r\n");
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
}

/// A call a cluster kept turning away while its slot moved, until its bound ran out: the
/// library's timeout, saying so, never the server's bare words (link.rs `call`).
#[test]
fn a_slot_moving_for_the_whole_bound_is_a_timeout_saying_so() {
    let bound = std::time::Duration::from_millis(1500);
    for reply in [
        "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
        "-ASK 3999 127.0.0.1:6381\r\n",
        "-MOVED 3999 127.0.0.1:6381\r\n",
    ] {
        let crate_err = server_error(reply);
        assert!(slot_moving(&crate_err), "{reply:?}");
        let err = LockError::slot_moving(&crate_err, bound);
        assert!(matches!(err, LockError::Timeout(_)), "{reply:?}: {err:?}");
        // The server's words are kept, code first as it said them.
        let code = reply[1..].split(' ').next().unwrap_or_default();
        assert_infrastructure(&err, "ETIMEDOUT", &["slot moved", "1500 ms", code]);
    }
    // Only those: a slot with no master, or a script's error naming a code, is not moving.
    for reply in [
        "-CLUSTERDOWN The cluster is down\r\n",
        "-ERR script: TRYAGAIN said by a script\r\n",
    ] {
        assert!(!slot_moving(&server_error(reply)), "{reply:?}");
    }
}
