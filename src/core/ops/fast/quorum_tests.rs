//! Unit tests of the quorum calls (quorum.rs, quorum_calls.rs): canned replies handed to
//! the parts in every order, no connection (the lanes only hand replies over).
use super::*;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::lease::Lease;
use crate::core::ops::acquire::Plan;
use crate::core::ops::fast::acquire::Mode;
use crate::core::ops::fast::Settled;
use crate::core::ops::test_support::redlock_locker;

const PORTS: [u16; 5] = [41101, 41102, 41103, 41104, 41105];

fn attempt(locker: &Arc<Locker>) -> Vec<Part<QuorumAttempt>> {
    let mode = Mode {
        plan: Plan::once(),
        cancel: Cancel::never(),
    };
    QuorumAttempt::new(locker, "k", Duration::from_secs(10), mode)
        .ok()
        .unwrap()
}

fn release(locker: &Arc<Locker>) -> Vec<Part<QuorumRelease>> {
    let lease = Arc::new(Lease::new(
        "k".into(),
        locker.redis_key("k"),
        "token".into(),
        3,
        crate::core::basics::clock::Stamp::now(),
        Duration::from_secs(10),
    ));
    QuorumRelease::new(locker, &lease).unwrap()
}

fn won(fence: i64) -> Value {
    Value::Array(vec![Value::Int(1), Value::Int(fence)])
}

fn held() -> Value {
    Value::Array(vec![Value::Int(0), Value::Int(5000)])
}

/// Every order of `0..n`.
fn orders(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut all = Vec::new();
    for shorter in orders(n - 1) {
        for at in 0..=shorter.len() {
            let mut order = shorter.clone();
            order.insert(at, n - 1);
            all.push(order);
        }
    }
    all
}

/// How a call ended: now (with its result) or through the runtime.
enum Ended<T> {
    Now(Settled<T>),
    Later,
}

fn ended<T>(step: Step<T>) -> Ended<T> {
    match step {
        Step::Now(result) => Ended::Now(result),
        Step::Later(_) => Ended::Later,
        Step::Handed { .. } => panic!("a quorum call hands nothing over"),
    }
}

/// Hands `replies` to fresh parts in `order`: the one decision (the reply it came at, how
/// it ended) and how many stragglers wrote an undo.
fn run<Q: Quorum>(
    mut parts: Vec<Part<Q>>,
    replies: &[Value],
    order: &[usize],
) -> (usize, Ended<Q::Output>, usize) {
    let mut decided = None;
    let mut undone = 0;
    let mut parts: Vec<Option<Part<Q>>> = parts.drain(..).map(Some).collect();
    for (at, &node) in order.iter().enumerate() {
        let part = parts[node].take().unwrap();
        let mut out = Vec::new();
        match part.answered(replies[node].clone(), &mut out) {
            Told::Nothing => assert!(out.is_empty()),
            Told::Undid(_) => {
                assert!(!out.is_empty());
                undone += 1;
            }
            Told::Step(step) => {
                assert!(decided.is_none(), "decided twice in {order:?}");
                decided = Some((at, ended(step)));
            }
        }
    }
    let (at, ended) = decided.unwrap_or_else(|| panic!("never decided in {order:?}"));
    (at, ended, undone)
}

#[test]
fn every_order_of_five_replies_decides_once_at_the_quorum() {
    let locker = redlock_locker(&PORTS);
    let all = orders(5);
    assert_eq!(all.len(), 120);
    for order in &all {
        // Five wins on one fence: ours at the third reply, the stragglers untouched.
        let replies = vec![won(7); 5];
        let (at, end, undone) = run(attempt(&locker), &replies, order);
        assert_eq!((at, undone), (2, 0));
        match end {
            Ended::Now(Ok(Some(lease))) => assert_eq!(lease.fence, 7),
            _ => panic!("not won at once in {order:?}"),
        }
        // Three wins, two held: ours once the third win is read, whatever came before.
        let replies = vec![won(7), held(), won(7), held(), won(7)];
        let (at, end, undone) = run(attempt(&locker), &replies, order);
        let third_win = (order.iter().enumerate())
            .filter(|(_, &node)| node % 2 == 0)
            .map(|(at, _)| at)
            .nth(2);
        assert_eq!((Some(at), undone), (third_win, 0));
        assert!(matches!(end, Ended::Now(Ok(Some(_)))));
        // Two wins, three held: lost, concluded through the runtime (which undoes); a win
        // read after the decision writes its own undo.
        let replies = vec![held(), won(7), held(), won(7), held()];
        let (at, end, undone) = run(attempt(&locker), &replies, order);
        let wins_after = order[at + 1..].iter().filter(|&&n| n % 2 == 1).count();
        assert!(matches!(end, Ended::Later));
        assert_eq!(undone, wins_after, "{order:?}");
        // Fences that differ: raised through the runtime, never won here.
        let replies = vec![won(7), won(9), won(7), held(), held()];
        let (_, end, undone) = run(attempt(&locker), &replies, order);
        assert!(matches!(end, Ended::Later));
        assert_eq!(undone, 0);
        // A release: done at the third `1`.
        let replies = vec![
            Value::Int(1),
            Value::Int(0),
            Value::Int(1),
            Value::Int(1),
            Value::Int(0),
        ];
        let (at, end, _) = run(release(&locker), &replies, order);
        let third = (order.iter().enumerate())
            .filter(|(_, &node)| node != 1 && node != 4)
            .map(|(at, _)| at)
            .nth(2);
        assert_eq!(Some(at), third);
        assert!(matches!(end, Ended::Now(Ok(true))));
    }
}

#[test]
fn a_node_past_its_bound_counts_as_no_answer_and_delays_nothing() {
    let locker = redlock_locker(&PORTS);
    let mut parts = attempt(&locker);
    for node in [2, 3, 4] {
        assert!(matches!(parts[node].timed_out(), Told::Nothing));
    }
    // Recorded as an error, never left pending: the call waits only for nodes 0 and 1.
    {
        let shared = lock(&parts[0].shared);
        for node in [2, 3, 4] {
            assert!(matches!(
                shared.seen[node],
                Some(Err(LockError::Timeout(_)))
            ));
        }
    }
    let mut out = Vec::new();
    let mut parts = parts.drain(..);
    let (first, second) = (parts.next().unwrap(), parts.next().unwrap());
    assert!(matches!(first.answered(won(7), &mut out), Told::Nothing));
    // Two wins of five: fewer than a quorum answered, failed (and undone) at once.
    match second.answered(won(7), &mut out) {
        Told::Step(step) => assert!(matches!(ended(step), Ended::Later)),
        _ => panic!("undecided with every node in"),
    }
    // Three wins with two nodes silent: ours at the third, not at their bounds.
    let mut parts = attempt(&locker);
    assert!(matches!(parts[4].timed_out(), Told::Nothing));
    let mut parts = parts.drain(..);
    for fence_reply in 0..2 {
        let part = parts.next().unwrap();
        assert!(
            matches!(part.answered(won(7), &mut out), Told::Nothing),
            "{fence_reply}"
        );
    }
    match parts.next().unwrap().answered(won(7), &mut out) {
        Told::Step(step) => assert!(matches!(ended(step), Ended::Now(Ok(Some(_))))),
        _ => panic!("not decided at the quorum"),
    }
    // Two wins, one held, two silent: held (a quorum answered), through the runtime.
    let mut parts = attempt(&locker);
    assert!(matches!(parts[3].timed_out(), Told::Nothing));
    assert!(matches!(parts[4].timed_out(), Told::Nothing));
    let mut parts = parts.drain(..);
    assert!(matches!(
        parts.next().unwrap().answered(won(7), &mut out),
        Told::Nothing
    ));
    assert!(matches!(
        parts.next().unwrap().answered(held(), &mut out),
        Told::Nothing
    ));
    match parts.next().unwrap().answered(won(7), &mut out) {
        Told::Step(step) => assert!(matches!(ended(step), Ended::Later)),
        _ => panic!("undecided with every node in"),
    }
    assert!(out.is_empty());
}

/// The bytes that free the attempt's token on a node (`Release::late_win`), sent whole: their
/// reply is for nobody.
fn undo_bytes(parts: &[Part<QuorumAttempt>]) -> Vec<u8> {
    let shared = lock(&parts[0].shared);
    let Some(Decided::Lost(undo)) = &shared.decided else {
        panic!("not lost");
    };
    assert_eq!(undo.terms.redis_key, b"t:k");
    let mut bytes = Vec::new();
    let free = Release::late_win(&undo.terms.redis_key, &undo.terms.token, false);
    write_whole(&free, &mut bytes);
    bytes
}

#[test]
fn a_straggler_that_won_after_a_lost_decision_frees_its_node_and_after_a_win_only_past_its_bound() {
    let locker = redlock_locker(&PORTS);
    let mut parts = attempt(&locker);
    assert!(matches!(parts[4].timed_out(), Told::Nothing));
    let mut out = Vec::new();
    let mut taken = parts.drain(..3);
    assert!(matches!(
        taken.next().unwrap().answered(held(), &mut out),
        Told::Nothing
    ));
    assert!(matches!(
        taken.next().unwrap().answered(held(), &mut out),
        Told::Nothing
    ));
    assert!(matches!(
        taken.next().unwrap().answered(held(), &mut out),
        Told::Step(_)
    ));
    drop(taken);
    let expected = undo_bytes(&parts);
    let mut parts = parts.drain(..);
    let (straggler, late) = (parts.next().unwrap(), parts.next().unwrap());
    assert!(matches!(
        straggler.answered(won(7), &mut out),
        Told::Undid(_)
    ));
    assert_eq!(out, expected);
    // The one past its bound, answering late, too; a late `held` needs nothing.
    let mut late_out = Vec::new();
    assert!(late.answered_late(won(7), &mut late_out).is_some());
    assert_eq!(late_out, expected);
    let mut parts = attempt(&locker);
    assert!(matches!(parts[4].timed_out(), Told::Nothing));
    let late = parts.pop().unwrap();
    let mut parts = parts.drain(..);
    for _ in 0..3 {
        let _ = parts.next().unwrap().answered(held(), &mut out);
    }
    assert!(late.answered_late(held(), &mut Vec::new()).is_none());

    // Won: a straggler in time is ours, kept while the lease stands (the release reaches
    // it); one past its bound is freed, as the runtime frees an attempt past its bound.
    let mut parts = attempt(&locker);
    assert!(matches!(parts[4].timed_out(), Told::Nothing));
    let late = parts.pop().unwrap();
    let mut parts = parts.drain(..);
    let mut out = Vec::new();
    for _ in 0..2 {
        assert!(matches!(
            parts.next().unwrap().answered(won(7), &mut out),
            Told::Nothing
        ));
    }
    assert!(matches!(
        parts.next().unwrap().answered(won(7), &mut out),
        Told::Step(_)
    ));
    assert!(matches!(
        parts.next().unwrap().answered(won(7), &mut out),
        Told::Nothing
    ));
    assert!(out.is_empty());
    assert!(late.answered_late(won(7), &mut out).is_some());
    assert!(!out.is_empty());
}

/// The undo bytes of a concluding call's token.
fn concluding_undo_bytes(parts: &[Part<QuorumAttempt>]) -> (String, Vec<u8>) {
    let shared = lock(&parts[0].shared);
    let Some(Decided::Concluding(undo)) = &shared.decided else {
        panic!("not concluding");
    };
    let mut bytes = Vec::new();
    let free = Release::late_win(&undo.terms.redis_key, &undo.terms.token, false);
    write_whole(&free, &mut bytes);
    (undo.terms.token.clone(), bytes)
}

#[test]
fn a_straggler_that_won_after_its_lock_was_released_frees_its_node() {
    let locker = redlock_locker(&PORTS);
    let store = redlock_of(&locker).expect("a redlock");
    let mut parts = attempt(&locker);
    let mut out = Vec::new();
    let (first, second) = (parts.pop().unwrap(), parts.pop().unwrap());
    for _ in 0..2 {
        assert!(matches!(
            parts.pop().unwrap().answered(won(7), &mut out),
            Told::Nothing
        ));
    }
    let last = parts.pop().unwrap();
    assert!(matches!(last.answered(won(7), &mut out), Told::Step(_)));
    let (token, expected) = concluding_undo_bytes(std::slice::from_ref(&first));
    // Still ours: kept.
    assert!(matches!(first.answered(won(7), &mut out), Told::Nothing));
    assert!(out.is_empty());
    // Released (maybe on other connections, ahead of this node's attempt): freed there.
    store.late().end(&token);
    assert!(matches!(second.answered(won(7), &mut out), Told::Undid(_)));
    assert_eq!(out, expected);
}

#[test]
fn a_straggler_whose_node_got_the_release_behind_it_on_its_connection_frees_nothing() {
    let locker = redlock_locker(&PORTS);
    let mut out = Vec::new();
    let mut parts = attempt(&locker);
    // Each node's connection is lane 10 + its index.
    for part in &parts {
        assert_eq!(
            part.write(&mut out, 10 + part.node as u64, AttemptForm::Script),
            1
        );
    }
    out.clear();
    let (first, second) = (parts.pop().unwrap(), parts.pop().unwrap());
    for part in parts {
        let _told = part.answered(won(7), &mut out);
    }
    let (token, expected) = concluding_undo_bytes(std::slice::from_ref(&first));
    let lease = Arc::new(Lease::new(
        "k".into(),
        locker.redis_key("k"),
        token,
        7,
        crate::core::basics::clock::Stamp::now(),
        Duration::from_secs(10),
    ));
    // The release: behind `first` on its node's connection, on a new connection to
    // `second`'s node (its own replaced meanwhile).
    let releases = QuorumRelease::new(&locker, &lease).expect("a release");
    let mut written = Vec::new();
    for release in &releases {
        let lane = match release.node == second.node {
            true => 99,
            false => 10 + release.node as u64,
        };
        release.write(&mut written, lane, AttemptForm::Script);
    }
    assert!(matches!(first.answered(won(7), &mut out), Told::Nothing));
    assert!(out.is_empty());
    assert!(matches!(second.answered(won(7), &mut out), Told::Undid(_)));
    assert_eq!(out, expected);
}

#[test]
fn a_broken_node_sends_an_undecided_call_to_the_runtime_once() {
    let locker = redlock_locker(&PORTS);
    let mut parts = attempt(&locker).into_iter();
    let mut out = Vec::new();
    assert!(matches!(
        parts.next().unwrap().answered(won(7), &mut out),
        Told::Nothing
    ));
    match parts
        .next()
        .unwrap()
        .broken(Some(Duration::from_millis(300)))
    {
        Told::Step(step) => assert!(matches!(ended(step), Ended::Later)),
        _ => panic!("a broken node while undecided must hand the call to the runtime"),
    }
    // Whatever the others say now is the runtime's business.
    assert!(matches!(
        parts.next().unwrap().answered(won(7), &mut out),
        Told::Nothing
    ));
    assert!(matches!(parts.next().unwrap().broken(None), Told::Nothing));
    assert!(matches!(
        parts.next().unwrap().answered(won(7), &mut out),
        Told::Nothing
    ));
    assert!(out.is_empty());
    // A refusal (NOSCRIPT among others) as well.
    let mut parts = attempt(&locker).into_iter();
    let (refused, _) = crate::core::basics::resp::parse(b"-NOSCRIPT No matching script.\r\n")
        .unwrap()
        .unwrap();
    match parts.next().unwrap().answered(refused, &mut out) {
        Told::Step(step) => assert!(matches!(ended(step), Ended::Later)),
        _ => panic!("a refusal must hand the call to the runtime"),
    }
    assert!(matches!(
        parts.next().unwrap().answered(won(7), &mut out),
        Told::Nothing
    ));
}

#[test]
fn orphaned_parts_free_or_resend_the_call_once() {
    let locker = redlock_locker(&PORTS);
    // A release goes again through the runtime, once for all its parts.
    let resent = (release(&locker).into_iter())
        .filter_map(|part| part.orphaned())
        .count();
    assert_eq!(resent, 1);
    // An attempt is freed (by the first part) and nobody answered.
    let mut parts = attempt(&locker).into_iter();
    let first = parts.next().unwrap();
    let shared = first.shared.clone();
    assert!(first.orphaned().is_none());
    assert!(lock(&shared).call.is_none());
    for part in parts {
        assert!(part.orphaned().is_none());
    }
}

/// How many frees each node of `locker`'s Redlock is owed.
fn owed(locker: &Locker) -> Vec<usize> {
    let store = redlock_of(locker).unwrap();
    (0..PORTS.len()).map(|node| store.owed(node)).collect()
}

/// A Redlock of its own (stores are shared by endpoint, and with them what is owed), on
/// ports nothing listens on: what is owed stays owed.
fn own_locker(first: u16) -> Arc<Locker> {
    let ports: Vec<u16> = (first..first + 5).collect();
    redlock_locker(&ports)
}

/// The first three of `parts` answered `reply` (a quorum of five decides), what the last
/// told, and the two left.
fn three_answered<Q: Quorum>(
    parts: Vec<Part<Q>>,
    reply: &Value,
) -> (Told<Q::Output>, Part<Q>, Part<Q>) {
    let mut parts = parts.into_iter();
    let mut out = Vec::new();
    let mut told = Told::Nothing;
    for part in parts.by_ref().take(3) {
        told = part.answered(reply.clone(), &mut out);
    }
    assert!(out.is_empty());
    let (Some(fourth), Some(fifth)) = (parts.next(), parts.next()) else {
        panic!("five parts");
    };
    (told, fourth, fifth)
}

#[test]
fn nodes_broken_after_a_lost_attempt_are_each_owed_its_undo() {
    let locker = own_locker(41211);
    let (_, fourth, mut fifth) = three_answered(attempt(&locker), &held());
    assert!(matches!(fourth.broken(None), Told::Nothing));
    // Past its bound, then broken: owed as well, on its own node.
    assert!(matches!(fifth.timed_out(), Told::Nothing));
    fifth.abandon();
    assert_eq!(owed(&locker), [0, 0, 0, 1, 1]);
}

#[test]
fn a_node_broken_before_answering_a_decided_release_is_owed_it() {
    let locker = own_locker(41221);
    let released = Value::Int(1);
    let (told, fourth, mut fifth) = three_answered(release(&locker), &released);
    assert!(matches!(told, Told::Step(Step::Now(Ok(true)))));
    assert!(matches!(fourth.broken(None), Told::Nothing));
    assert!(matches!(fifth.timed_out(), Told::Nothing));
    fifth.abandon();
    assert_eq!(owed(&locker), [0, 0, 0, 1, 1]);
    // Its environment gone with the part unanswered: owed as well, not sent again whole.
    let (_, fourth, _) = three_answered(release(&locker), &released);
    assert!(fourth.orphaned().is_none());
    assert_eq!(owed(&locker), [0, 0, 0, 2, 1]);
    // A node that answered late ran it: nothing more owed.
    let (_, _, mut late) = three_answered(release(&locker), &released);
    assert!(matches!(late.timed_out(), Told::Nothing));
    assert!(late.answered_late(released, &mut Vec::new()).is_none());
    assert_eq!(owed(&locker), [0, 0, 0, 2, 1]);
}

#[test]
fn a_node_broken_while_the_won_lock_is_ours_is_owed_nothing_until_it_is_over() {
    let locker = own_locker(41231);
    let (_, fourth, fifth) = three_answered(attempt(&locker), &won(7));
    // The lock is ours: the release to come reaches the node.
    assert!(matches!(fourth.broken(None), Told::Nothing));
    assert_eq!(owed(&locker), [0; 5]);
    // Released (the token over): a node broken now may keep what its attempt took.
    let (token, _) = concluding_undo_bytes(std::slice::from_ref(&fifth));
    redlock_of(&locker).unwrap().late().end(&token);
    assert!(matches!(fifth.broken(None), Told::Nothing));
    assert_eq!(owed(&locker), [0, 0, 0, 0, 1]);
}

#[test]
fn an_undo_written_on_a_node_whose_connection_broke_before_its_reply_is_owed_to_it() {
    let locker = own_locker(41241);
    let (_, fourth, mut fifth) = three_answered(attempt(&locker), &held());
    let mut out = Vec::new();
    let Told::Undid(undo) = fourth.answered(won(7), &mut out) else {
        panic!("a lost attempt's straggler win is undone");
    };
    assert!(!out.is_empty());
    // Its reply read: the undo ran, nothing is owed.
    drop(undo);
    assert_eq!(owed(&locker), [0; 5]);
    // Written after a late win, the connection broken before its reply: owed to that node.
    assert!(matches!(fifth.timed_out(), Told::Nothing));
    let undo = fifth.answered_late(won(8), &mut out);
    undo.expect("a late win is undone").owe();
    assert_eq!(owed(&locker), [0, 0, 0, 0, 1]);
}

#[test]
fn a_free_owed_goes_once_another_try_takes_its_token() {
    let locker = own_locker(41251);
    let store = redlock_of(&locker).unwrap();
    let free = Release::late_win(b"k", "t", false);
    let (ttl, bound) = (Duration::from_secs(60), Duration::from_millis(200));
    store.owe(4, &free, ttl, bound);
    store.owe(3, &Release::late_win(b"k", "u", false), ttl, bound);
    assert_eq!(owed(&locker), [0, 0, 0, 1, 1]);
    // syncguard tries again with its lockId: a free of it now would take that try's lock.
    store.late().begin("t");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while owed(&locker)[4] != 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The other token's free is owed still (its node never answers).
    assert_eq!(owed(&locker), [0, 0, 0, 1, 0]);
}

/// EXEC's answer to a transaction that pushed the counter: set (or found held), the counter.
fn exec(set: bool, counter: i64) -> Value {
    let set = match set {
        true => Value::Okay,
        false => Value::Nil,
    };
    Value::Array(vec![set, Value::Int(counter), Value::Int(0), Value::Int(1)])
}

/// A fresh attempt's parts, each written on a connection that takes transactions.
fn written_as_transactions(locker: &Arc<Locker>) -> Vec<Part<QuorumAttempt>> {
    let parts = attempt(locker);
    for part in &parts {
        let lane = 10 + part.node as u64;
        part.write(&mut Vec::new(), lane, AttemptForm::Transaction);
    }
    parts
}

#[test]
fn nodes_taking_transactions_are_written_and_read_as_one_and_a_late_win_there_is_undone() {
    // Own lockers: a lock found held in another test would be attempted by the script.
    let locker = own_locker(41271);
    let parts = attempt(&locker);
    let mut out = Vec::new();
    // MULTI, SET, INCRBY, the counter pushed twice (NX, GT: nothing is known of it yet), EXEC.
    for part in &parts {
        assert_eq!(
            part.write(&mut out, 10 + part.node as u64, AttemptForm::Transaction),
            6
        );
    }
    let written = String::from_utf8_lossy(&out).into_owned();
    assert_eq!(written.matches("MULTI").count(), 5);
    assert_eq!(written.matches("PEXPIRE").count(), 10);
    out.clear();
    let mut parts = parts.into_iter();
    for _ in 0..2 {
        let part = parts.next().unwrap();
        assert_eq!(part.follow_up(&exec(true, 8), &mut out), 0);
        assert!(matches!(
            part.answered(exec(true, 8), &mut out),
            Told::Nothing
        ));
    }
    let third = parts.next().unwrap();
    let Told::Step(step) = third.answered(exec(true, 8), &mut out) else {
        panic!("not decided at the third win");
    };
    let Ended::Now(Ok(Some(lease))) = ended(step) else {
        panic!("not won at once");
    };
    assert_eq!(lease.fence, 7);
    assert!(out.is_empty());

    // Lost on three nodes that found the lock held: each counts the two fences it drew in
    // vain; a straggler that took the lock after it frees it, read as the transaction it is.
    let parts = written_as_transactions(&locker);
    let mut parts = parts.into_iter();
    for _ in 0..3 {
        let part = parts.next().unwrap();
        let mut counted = Vec::new();
        assert_eq!(part.follow_up(&exec(false, 8), &mut counted), 1);
        assert!(String::from_utf8_lossy(&counted).contains("missed"));
        let _told = part.answered(exec(false, 8), &mut Vec::new());
    }
    let straggler = parts.next().unwrap();
    let expected = undo_bytes(std::slice::from_ref(&straggler));
    let mut undone = Vec::new();
    assert!(matches!(
        straggler.answered(exec(true, 10), &mut undone),
        Told::Undid(_)
    ));
    assert_eq!(undone, expected);
}

#[test]
fn a_lock_found_held_lately_is_attempted_by_the_script_on_every_node() {
    let locker = own_locker(41281);
    let parts = written_as_transactions(&locker);
    for part in parts.into_iter().take(3) {
        let _told = part.answered(exec(false, 8), &mut Vec::new());
    }
    let mut out = Vec::new();
    for part in &attempt(&locker) {
        assert_eq!(
            part.write(&mut out, 10 + part.node as u64, AttemptForm::Transaction),
            1
        );
    }
    assert!(!String::from_utf8_lossy(&out).contains("MULTI"));
}

#[test]
fn a_node_s_counter_is_left_alone_only_where_that_node_showed_it_kept() {
    let locker = own_locker(41261);
    let parts = written_as_transactions(&locker);
    // Nodes 0-2 answer that they pushed it; node 3's reply is never read, node 4 is silent.
    let mut parts = parts.into_iter();
    for _ in 0..3 {
        let _told = parts
            .next()
            .unwrap()
            .answered(exec(true, 8), &mut Vec::new());
    }
    let mut next = Vec::new();
    for part in &attempt(&locker) {
        let lane = 10 + part.node as u64;
        next.push(part.write(&mut Vec::new(), lane, AttemptForm::Transaction));
    }
    // MULTI, SET, INCRBY, EXEC where the node showed it; the two pushes too elsewhere.
    assert_eq!(next, [4, 4, 4, 6, 6]);
}

/// The commands in `bytes`, by their RESP array headers.
fn commands_in(bytes: &[u8]) -> usize {
    let lines = bytes.split(|&b| b == b'\n');
    lines.filter(|line| line.first() == Some(&b'*')).count()
}

#[test]
fn nodes_of_one_shape_are_sent_the_same_bytes_and_others_their_own() {
    let locker = own_locker(41291);
    let parts = written_as_transactions(&locker);
    // Nodes 0 and 2 show they pushed their counters: shapes alternate along the nodes.
    for part in parts.into_iter().step_by(2).take(2) {
        let _told = part.answered(exec(true, 8), &mut Vec::new());
    }
    let (mut bytes, mut replies) = (Vec::new(), Vec::new());
    for part in &attempt(&locker) {
        let mut out = b"behind another call".to_vec();
        replies.push(part.write(&mut out, 10 + part.node as u64, AttemptForm::Transaction));
        bytes.push(out.split_off(b"behind another call".len()));
    }
    assert_eq!(replies, [4, 6, 4, 6, 6]);
    let commands: Vec<usize> = bytes.iter().map(|b| commands_in(b)).collect();
    assert_eq!(commands, replies);
    assert_eq!(bytes[0], bytes[2]);
    assert_eq!((&bytes[1], &bytes[1]), (&bytes[3], &bytes[4]));
    assert_ne!(bytes[0], bytes[1]);

    let mut released = Vec::new();
    for part in &release(&locker) {
        let mut out = Vec::new();
        assert_eq!(
            part.write(&mut out, 20 + part.node as u64, AttemptForm::Script),
            1
        );
        released.push(out);
    }
    assert!(released
        .iter()
        .all(|b| *b == released[0] && commands_in(b) == 1));
}
