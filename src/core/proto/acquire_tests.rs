use super::*;
use crate::core::basics::resp;

fn attempt(layout: Layout<'static>, form: AttemptForm) -> AcquireAttempt<'static> {
    AcquireAttempt {
        lock_key: b"lock:k",
        fence_key: b"{lock:k}\xfffence",
        token: "t",
        ttl: Duration::from_millis(1000),
        fence_retention_ms: 5000,
        keep_fences: true,
        fences_known_kept: false,
        layout,
        form,
        sent: Instant::now(),
    }
}

fn exclusive() -> Layout<'static> {
    Layout::Exclusive {
        owner_key: b"{lock:k}\xffowner",
        contents: "1",
    }
}

fn items(items: &[Value]) -> Value {
    Value::Array(items.to_vec())
}

fn error(line: &[u8]) -> Value {
    match resp::parse(line) {
        Ok(Some((reply, _))) => reply,
        other => panic!("{other:?}"),
    }
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

#[test]
fn the_scripts_answer_is_read_as_it_is_even_for_the_first_fence() {
    for layout in [Layout::Plain, exclusive()] {
        let op = attempt(layout, AttemptForm::Script);
        let won = op.decode(items(&[int(1), int(1)])).ok();
        assert_eq!(
            won,
            Some(Acquired::Won {
                fence: 1,
                set_at: None
            })
        );
        let held = op.decode(items(&[int(0), int(250)])).ok();
        let ttl = Some(Duration::from_millis(250));
        assert_eq!(held, Some(Acquired::Held { ttl }));
        // No TTL on the key (-1): unknown.
        let forever = op.decode(items(&[int(0), int(-1)])).ok();
        assert_eq!(forever, Some(Acquired::Held { ttl: None }));
        // A win without a usable fence is never handed out.
        assert!(op.decode(items(&[int(1), int(0)])).is_err());
        assert!(op.decode(Value::Okay).is_err());
    }
}

#[test]
fn a_server_error_is_refused_and_only_a_set_lock_was_taken() {
    let noscript = error(b"-NOSCRIPT No matching script.\r\n");
    let execabort = error(b"-EXECABORT Transaction discarded.\r\n");
    for form in [AttemptForm::Script, AttemptForm::Transaction] {
        for layout in [Layout::Plain, exclusive()] {
            let op = attempt(layout, form);
            for refusal in [&noscript, &execabort] {
                assert_eq!(op.decode(refusal.clone()).ok(), Some(Acquired::Refused));
            }
        }
    }
    assert!(Acquired::Won {
        fence: 7,
        set_at: None
    }
    .took_lock());
    assert!(Acquired::SetWithoutFence { set_at: Some(5) }.took_lock());
    assert!(!Acquired::Held { ttl: None }.took_lock());
    assert!(!Acquired::Refused.took_lock());
}

#[test]
fn a_transaction_wins_the_first_of_the_two_fences_it_drew() {
    for keep in [
        vec![int(1), int(0)],
        // A counter known kept: the shorter answer reads the same.
        vec![],
    ] {
        for form in [AttemptForm::Transaction, AttemptForm::Untried] {
            let op = attempt(Layout::Plain, form);
            let won = [vec![Value::Okay, int(8)], keep.clone()].concat();
            let want = Acquired::Won {
                fence: 7,
                set_at: None,
            };
            assert_eq!(op.decode(items(&won)).ok(), Some(want));
            let held = [vec![Value::Nil, int(8)], keep.clone()].concat();
            let want = Acquired::Held { ttl: None };
            assert_eq!(op.decode(items(&held)).ok(), Some(want));
        }
        let op = attempt(exclusive(), AttemptForm::Transaction);
        let won = [vec![Value::Okay, int(8)], keep.clone(), vec![int(5000)]].concat();
        let want = Acquired::Won {
            fence: 7,
            set_at: Some(5000),
        };
        assert_eq!(op.decode(items(&won)).ok(), Some(want));
        let held = [vec![Value::Nil, int(8)], keep, vec![int(5000)]].concat();
        let want = Acquired::Held { ttl: None };
        assert_eq!(op.decode(items(&held)).ok(), Some(want));
    }
}

#[test]
fn a_counter_that_gives_no_fence_leaves_the_lock_set_without_one() {
    let not_integer = error(b"-ERR value is not an integer or out of range\r\n");
    for counter in [not_integer, int(1), int(token::FENCE_MAX as i64 + 1)] {
        let plain = attempt(Layout::Plain, AttemptForm::Transaction);
        let reply = items(&[Value::Okay, counter.clone(), int(1), int(0)]);
        let want = Acquired::SetWithoutFence { set_at: None };
        assert_eq!(plain.decode(reply).ok(), Some(want));
        let exclusive = attempt(exclusive(), AttemptForm::Transaction);
        let reply = items(&[Value::Okay, counter, int(1), int(5000)]);
        let want = Acquired::SetWithoutFence { set_at: Some(5000) };
        assert_eq!(exclusive.decode(reply).ok(), Some(want));
    }
}

#[test]
fn an_exclusive_untried_attempt_is_the_script_behind_an_empty_transaction() {
    let op = attempt(exclusive(), AttemptForm::Untried);
    assert_eq!(op.replies(), 3);
    let won = op.decode(items(&[int(1), int(7)])).ok();
    let want = Acquired::Won {
        fence: 7,
        set_at: None,
    };
    assert_eq!(won, Some(want));
    // A transaction's answer where the script's is due is nothing we sent.
    assert!(op.decode(items(&[Value::Okay, int(8), int(5000)])).is_err());
}

#[test]
fn an_answer_of_another_shape_is_refused() {
    let op = attempt(exclusive(), AttemptForm::Transaction);
    // The lock key's expiry is missing.
    let reply = items(&[Value::Okay, int(8)]);
    assert_eq!(op.decode(reply).ok(), Some(Acquired::Refused));
    for op in [
        attempt(Layout::Plain, AttemptForm::Transaction),
        attempt(exclusive(), AttemptForm::Transaction),
    ] {
        let script = items(&[int(1), int(7)]);
        assert_eq!(op.decode(script).ok(), Some(Acquired::Refused));
        assert_eq!(op.decode(Value::Nil).ok(), Some(Acquired::Refused));
    }
}

#[test]
fn attempts_are_untried_then_transactions_until_multi_is_refused_then_scripts_for_good() {
    let noperm = error(b"-NOPERM User u has no permissions to run the 'multi' command\r\n");
    let mut support = TxSupport::default();
    assert_eq!(support.attempts(), AttemptForm::Untried);
    support.multi_worked();
    assert_eq!(support.attempts(), AttemptForm::Transaction);
    support.multi_refused(&noperm);
    assert_eq!(support.attempts(), AttemptForm::Script);
    support.multi_worked();
    assert_eq!(support.attempts(), AttemptForm::Script);
    let mut refused_first = TxSupport::default();
    refused_first.multi_refused(&error(
        b"-ERR unknown command 'MULTI', with args beginning with: \r\n",
    ));
    assert_eq!(refused_first.attempts(), AttemptForm::Script);
}

#[test]
fn a_server_refusing_pexpire_nx_or_gt_turns_the_connection_to_the_script_for_good() {
    for line in [
        // Redis 6.2: PEXPIRE takes no flags, refused as it is queued.
        &b"-ERR wrong number of arguments for 'pexpire' command\r\n"[..],
        // A server that knows the command but not the flag.
        b"-ERR Unsupported option NX\r\n",
        b"-ERR syntax error\r\n",
    ] {
        let mut support = TxSupport::default();
        support.multi_worked();
        support.multi_refused(&error(line));
        assert_eq!(support.attempts(), AttemptForm::Script, "{line:?}");
        support.multi_worked();
        assert_eq!(support.attempts(), AttemptForm::Script, "{line:?}");
    }
}

#[test]
fn a_pexpire_flag_refused_inside_exec_turns_the_connection_to_the_script_and_others_do_not() {
    let exec = |refused: &[u8]| items(&[Value::Okay, int(7), error(refused)]);
    let mut support = TxSupport::default();
    support.exec_answered(&exec(
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    ));
    assert_eq!(support.attempts(), AttemptForm::Transaction);
    support.exec_answered(&Value::Nil);
    assert_eq!(support.attempts(), AttemptForm::Transaction);
    support.exec_answered(&exec(b"-ERR Unsupported option GT\r\n"));
    assert_eq!(support.attempts(), AttemptForm::Script);
}

#[test]
fn other_refusals_in_a_transaction_leave_it_the_form() {
    let mut support = TxSupport::default();
    support.multi_worked();
    for line in [
        &b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"[..],
        b"-READONLY You can't write against a read only replica.\r\n",
        b"-ERR value is not an integer or out of range\r\n",
        // Another command's arity: not the flags this connection could do without.
        b"-ERR wrong number of arguments for 'set' command\r\n",
    ] {
        support.multi_refused(&error(line));
        assert_eq!(support.attempts(), AttemptForm::Transaction, "{line:?}");
    }
}

/// The request `release` sends on the runtime's connection.
fn packed(release: LateWin<'_>) -> Vec<u8> {
    let request = match release {
        LateWin::Release(release) => Request::of(&release),
        LateWin::ById(release) => Request::of(&release),
    };
    match request {
        Request::Script { evalsha, .. } => evalsha.get_packed_command(),
        Request::Command(cmd) => cmd.get_packed_command(),
    }
}

#[test]
fn an_undo_frees_what_a_late_win_frees_and_exclusive_locks_pair_too() {
    let fair = Layout::Fair {
        member: "m",
        place: Duration::ZERO,
        lifetime: Duration::from_secs(1),
    };
    let syncguard = Layout::Syncguard {
        index_key: b"idx",
        stored_key: b"lock:k",
        user_key: "k",
    };
    for layout in [
        Layout::Plain,
        Layout::Ring { ring_id: "r" },
        fair,
        syncguard,
    ] {
        let op = attempt(layout, AttemptForm::Script);
        let late = op.late_win().map(packed);
        assert_eq!(late, Some(packed(op.undo())));
    }
    // ExclusiveLock's pair: no late win (its own undo knows the expiry); undone whatever its
    // expiry, from the owner key.
    let op = attempt(exclusive(), AttemptForm::Script);
    assert!(op.late_win().is_none());
    let pair = Release {
        lock_key: b"{lock:k}\xffowner",
        token: "t",
        kind: ReleaseKind::Pair {
            data_key: b"lock:k",
            contents: b"1",
            set_at: None,
        },
    };
    assert_eq!(packed(op.undo()), packed(LateWin::Release(pair)));
}
