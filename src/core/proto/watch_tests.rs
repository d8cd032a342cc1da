//! A watch request read from the control channel, and a store's answer.

use super::{answer, WatchRequest};
use crate::core::basics::key_counts::{KeyTally, PerKey};

#[test]
fn a_request_is_read_line_by_line_and_anything_else_ignored() {
    let request = WatchRequest::parse(b"1\nr1\nnative-redis-lock:watch:reply:x\nlock:*?").unwrap();
    assert_eq!(request.id, b"r1");
    assert_eq!(request.reply_to, b"native-redis-lock:watch:reply:x");
    assert_eq!(request.pattern, b"lock:*?");
    let bare = WatchRequest::parse(b"1\nr1\nnative-redis-lock:watch:reply:x").unwrap();
    assert_eq!(bare.pattern, b"");
    for wrong in [
        &b"2\nr1\nnative-redis-lock:watch:reply:x\n*"[..],
        b"1\n\nnative-redis-lock:watch:reply:x\n*",
        b"1\nr1",
        b"",
        b"hello",
    ] {
        assert_eq!(WatchRequest::parse(wrong), None, "{wrong:?}");
    }
}

#[test]
fn a_hostile_or_oversized_request_is_dropped() {
    let reply = "native-redis-lock:watch:reply:x";
    let long = |n: usize| "a".repeat(n);
    let wrong = [
        // A lock's wake channel, or the prefix alone.
        "1\nr1\nnative-redis-lock:wake:{k}\n*".to_string(),
        "1\nr1\nnative-redis-lock:watch:reply:\n*".to_string(),
        format!("1\n{}\n{reply}\n*", long(65)),
        format!("1\nr1\nnative-redis-lock:watch:reply:{}\n*", long(99)),
        format!("1\nr1\n{reply}\n{}", long(257)),
        format!("1\nr\u{1}\n{reply}\n*"),
        format!("1\nr1\n{reply}\nlock:\n*"),
        format!("1\nr1\n{reply}\t\n*"),
    ];
    for request in wrong {
        assert_eq!(WatchRequest::parse(request.as_bytes()), None, "{request:?}");
    }
    let widest = format!("1\n{}\n{reply}{}\n{}", long(64), long(97), long(256));
    assert!(WatchRequest::parse(widest.as_bytes()).is_some());
}

#[test]
fn an_answer_is_json_with_its_keys_escaped() {
    let tally = KeyTally {
        session: 3,
        keys: vec![(
            b"lock:\"a\"\\\n".to_vec(),
            PerKey {
                handed_over: 2,
                woken: 1,
            },
        )],
        others: PerKey::default(),
    };
    let text = String::from_utf8(answer(b"r1", "p", &tally)).unwrap();
    let expected = format!(
        "{{\"v\":1,\"id\":\"r1\",\"process\":\"p\",\"pid\":{},\"session\":3,\"keys\":[[\"lock:\\\"a\\\"\\\\\\u000a\",2,1]],\"others\":[0,0]}}",
        std::process::id()
    );
    assert_eq!(text, expected);
}
