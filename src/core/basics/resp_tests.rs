use super::*;

fn whole(bytes: &[u8]) -> Value {
    match parse(bytes) {
        Ok(Some((value, used))) => {
            assert_eq!(used, bytes.len(), "consumed all of {bytes:?}");
            value
        }
        other => panic!("{bytes:?} gave {other:?}"),
    }
}

#[test]
fn reads_the_replies_of_our_commands() {
    assert_eq!(whole(b":1\r\n"), Value::Int(1));
    assert_eq!(
        whole(b"*2\r\n:1\r\n:42\r\n"),
        Value::Array(vec![Value::Int(1), Value::Int(42)])
    );
    assert_eq!(whole(b"$3\r\nabc\r\n"), Value::BulkString(b"abc".to_vec()));
    assert_eq!(whole(b"$-1\r\n"), Value::Nil);
    assert_eq!(whole(b"+OK\r\n"), Value::SimpleString("OK".into()));
}

#[test]
fn server_errors_keep_their_code() {
    match whole(b"-NOSCRIPT No matching script.\r\n") {
        Value::ServerError(err) => assert_eq!(err.code(), "NOSCRIPT"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_reply_cut_anywhere_is_incomplete_and_two_in_a_row_are_read_one_by_one() {
    let two = b"*2\r\n:1\r\n$5\r\nhello\r\n:7\r\n";
    let first_len = two.len() - 4;
    for cut in 0..first_len {
        assert_eq!(parse(&two[..cut]), Ok(None), "cut at {cut}");
    }
    let (_, used) = parse(two).ok().flatten().unwrap_or((Value::Nil, 0));
    assert_eq!(used, first_len);
    assert_eq!(whole(&two[used..]), Value::Int(7));
}

#[test]
fn garbage_is_a_protocol_error() {
    assert!(parse(b"?what\r\n").is_err());
    assert!(parse(b":12x\r\n").is_err());
    assert!(parse(b"$3\r\nabcd\r\n").is_err());
    let deep = [b"*1\r\n".repeat(20), b":1\r\n".to_vec()].concat();
    assert!(parse(&deep).is_err());
}

#[test]
fn commands_are_written_as_the_redis_crate_packs_them() {
    let mut ours = Vec::new();
    write_command(
        &mut ours,
        &[b"SET", b"k\r\n", b"", decimal(10_000).as_bytes()],
    );
    let theirs = redis::cmd("SET")
        .arg("k\r\n")
        .arg("")
        .arg(10_000)
        .get_packed_command();
    assert_eq!(ours, theirs);
    for n in [0, 7, 10, 99, 100, 4_294_967_295, u64::MAX] {
        assert_eq!(decimal(n).as_bytes(), n.to_string().as_bytes());
    }
}

#[test]
fn every_length_is_written_as_the_redis_crate_writes_it() {
    // Lengths around the short forms of `write_decimal` (one and two digits) and past them.
    let long = vec![b'x'; 1_005];
    for len in (0..=120).chain([999, 1_000, 1_005]) {
        let args: Vec<&[u8]> = vec![&long[..len]; len % 12 + 1];
        let mut ours = Vec::new();
        write_command(&mut ours, &args);
        let mut theirs = redis::cmd(std::str::from_utf8(args[0]).unwrap_or("x"));
        for arg in &args[1..] {
            theirs.arg(*arg);
        }
        assert_eq!(
            ours,
            theirs.get_packed_command(),
            "arguments of {len} bytes"
        );
    }
}
