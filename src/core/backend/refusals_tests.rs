use super::*;

/// The crate's error for a server's error `reply` (RESP text).
fn server_error(reply: &str) -> redis::RedisError {
    let value = redis::parse_redis_value(reply.as_bytes()).expect("a RESP error");
    value.extract_error().expect_err("an error reply")
}

#[test]
fn a_slot_moving_turns_a_command_away_and_refuses_no_command() {
    // What an SSUBSCRIBE meets while its slot moves between masters: taken for a refusal of
    // SSUBSCRIBE, it turned the connection to SUBSCRIBE for good, which hears no SPUBLISH.
    for reply in [
        "-MOVED 3999 127.0.0.1:6381\r\n",
        "-ASK 3999 127.0.0.1:6381\r\n",
        "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
        "-CLUSTERDOWN The cluster is down\r\n",
    ] {
        let err = server_error(reply);
        assert!(turned_away(&err), "{reply:?}");
        assert!(!refuses_command(&err), "{reply:?}");
    }
}

#[test]
fn an_unknown_or_denied_command_is_refused_and_not_turned_away() {
    for reply in [
        "-ERR unknown command 'SSUBSCRIBE', with args beginning with: 'c' \r\n",
        "-ERR Unknown command 'SSUBSCRIBE'\r\n",
        "-NOPERM User u has no permissions to run the 'ssubscribe' command\r\n",
    ] {
        let err = server_error(reply);
        assert!(refuses_command(&err), "{reply:?}");
        assert!(!turned_away(&err), "{reply:?}");
    }
}

#[test]
fn other_errors_say_nothing_of_the_command() {
    for reply in [
        "-ERR wrong number of arguments for 'ssubscribe' command\r\n",
        "-LOADING Redis is loading the dataset in memory\r\n",
        "-READONLY You can't write against a read only replica.\r\n",
    ] {
        let err = server_error(reply);
        assert!(!refuses_command(&err), "{reply:?}");
        assert!(!turned_away(&err), "{reply:?}");
    }
}
