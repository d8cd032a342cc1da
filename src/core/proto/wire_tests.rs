use super::*;
use crate::core::proto::extend::Extend;
use crate::core::proto::golden_tests::resp;
use crate::core::proto::read::Pttl;
use std::time::Duration;

fn evalsha_of<O: Op>(op: &O) -> Cmd {
    match Request::of(op) {
        Request::Script { evalsha, .. } => evalsha,
        Request::Command(_) => panic!("not a script call"),
    }
}

#[test]
fn a_script_call_sent_whole_is_an_eval_of_its_text_with_the_same_keys_and_arguments() {
    let extend = Extend {
        lock_key: b"lock:k",
        token: "tok",
        extra: Duration::from_millis(500),
    };
    let eval = whole(&evalsha_of(&extend)).expect("an EVALSHA of ours");
    let want = resp(&[
        b"EVAL",
        scripts::source_of(scripts::EXTEND.get_hash().as_bytes())
            .expect("extend's text")
            .as_bytes(),
        b"2",
        b"lock:k",
        b"{lock:k}\xfffence",
        b"tok",
        b"500",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&eval.get_packed_command()),
        String::from_utf8_lossy(&want)
    );
}

#[test]
fn only_an_evalsha_of_a_known_script_is_sent_whole() {
    let Request::Command(pttl) = Request::of(&Pttl {
        lock_key: b"lock:k",
    }) else {
        panic!("PTTL is a plain command");
    };
    assert!(whole(&pttl).is_none());
    let mut unknown = Cmd::new();
    unknown
        .arg("EVALSHA")
        .arg(Script::new("return 1").get_hash())
        .arg(0);
    assert!(whole(&unknown).is_none());
    assert!(whole(&Cmd::new()).is_none());
}

#[test]
fn a_command_whose_reply_nobody_reads_goes_with_its_scripts_text() {
    use crate::core::basics::keys;
    use crate::core::proto::release::Release;
    let mut sent = Vec::new();
    write_whole(&Release::late_win(b"lock:k", "tok", false), &mut sent);
    let want = resp(&[
        b"EVAL",
        scripts::RELEASE_WAKE_SOURCE.as_bytes(),
        b"2",
        b"lock:k",
        &keys::queue_key(b"lock:k"),
        b"tok",
        &keys::released_channel(b"lock:k"),
        b"0",
    ]);
    assert_eq!(sent, want);
}
