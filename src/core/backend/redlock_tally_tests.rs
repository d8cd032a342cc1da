//! Counting a Redlock's nodes, without servers: the quorum error, when an attempt is decided,
//! the verdicts on an attempt's and a release's replies, and the stragglers' grace.
use super::*;
use std::future::{pending, ready};
use std::pin::Pin;

const FIVE: Tally = Tally {
    nodes: 5,
    quorum: 3,
};

fn down() -> LockError {
    LockError::Connection("refused".into())
}

#[test]
fn fewer_than_a_quorum_answering_is_an_error_naming_how_many_did_never_held() {
    let replies: Vec<Result<bool, LockError>> =
        vec![Ok(true), Ok(false), Err(down()), Err(down()), Err(down())];
    let err = FIVE.answers(replies).unwrap_err();
    assert_eq!(err.code(), "ECONNECTION");
    assert!(err.is_infrastructure());
    assert!(
        err.to_string()
            .contains("only 2 of 5 Redlock nodes answered; a quorum is 3"),
        "{err}"
    );
    let enough: Vec<Result<bool, LockError>> =
        vec![Ok(true), Ok(false), Ok(true), Err(down()), Err(down())];
    assert_eq!(FIVE.answers(enough).unwrap(), vec![true, false, true]);
}

#[test]
fn an_error_redis_sent_counts_as_an_answer_and_is_the_one_reported() {
    let refused = LockError::Redis("WRONGTYPE".into());
    let replies: Vec<Result<bool, LockError>> = vec![
        Ok(true),
        Ok(true),
        Err(refused.clone()),
        Err(down()),
        Err(down()),
    ];
    assert_eq!(FIVE.answers(replies).unwrap_err(), refused);
}

#[test]
fn an_attempt_fails_early_only_once_a_quorum_answered_and_none_can_win() {
    let win = || {
        Some(Ok(Acquired::Won {
            fence: 1,
            set_at: None,
        }))
    };
    let held = || Some(Ok(Acquired::Held { ttl: None }));
    // Two held, three pending: the pending could still win.
    assert!(!failed(&FIVE, &[held(), held(), None, None, None]));
    // Three held: decided.
    assert!(failed(&FIVE, &[held(), held(), held(), None, None]));
    // Three unreachable, nobody answered: every node is waited for.
    assert!(!failed(
        &FIVE,
        &[
            Some(Err(down())),
            Some(Err(down())),
            Some(Err(down())),
            None,
            None
        ]
    ));
    assert!(won(&FIVE, &[win(), win(), win(), None, None]));
    assert!(!won(&FIVE, &[win(), win(), held(), None, None]));
}

type GatherCall = Pin<Box<dyn Future<Output = u32> + Send>>;

#[tokio::test]
async fn a_straggler_is_left_behind_after_the_grace_and_settled_stops_at_once() {
    let calls = || -> Vec<GatherCall> {
        vec![
            Box::pin(ready(1)),
            Box::pin(ready(2)),
            Box::pin(ready(3)),
            Box::pin(pending()),
        ]
    };
    let started = Instant::now();
    let replies = gather(
        calls(),
        |_| false,
        |seen| seen.iter().flatten().count() >= 3,
    )
    .await;
    assert_eq!(replies, vec![Some(1), Some(2), Some(3), None]);
    assert!(started.elapsed() >= GRACE_MIN);
    let replies = gather(
        calls(),
        |seen| seen.iter().flatten().count() >= 2,
        |_| false,
    )
    .await;
    assert_eq!(replies.iter().flatten().count(), 2);
}

/// An error as the server sends it, through the redis crate and our conversion.
fn sent(reply: &str) -> LockError {
    let value = redis::parse_redis_value(reply.as_bytes()).expect("a RESP error");
    LockError::from(value.extract_error().expect_err("an error reply"))
}

const UNREADY_REPLIES: [&str; 5] = [
    "-LOADING Redis is loading the dataset in memory\r\n",
    "-READONLY You can't write against a read only replica.\r\n",
    "-OOM command not allowed when used memory > 'maxmemory'.\r\n",
    "-BUSY Redis is busy running a script.\r\n",
    "-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
];

#[test]
fn a_server_not_ready_is_no_answer_and_short_of_a_quorum_is_the_quorum_error() {
    for reply in UNREADY_REPLIES {
        let unready = sent(reply);
        assert!(!is_answer(&unready), "{reply}: {unready}");
        let replies: Vec<Result<bool, LockError>> = vec![
            Ok(true),
            Ok(true),
            Err(unready.clone()),
            Err(unready.clone()),
            Err(down()),
        ];
        let err = FIVE.answers(replies).unwrap_err();
        assert_eq!(err.code(), "ECONNECTION", "{reply}: {err}");
        assert!(
            err.to_string()
                .contains("only 2 of 5 Redlock nodes answered; a quorum is 3"),
            "{reply}: {err}"
        );
        // Nor do they decide an attempt early.
        let held = || Some(Ok(Acquired::Held { ttl: None }));
        let seen = [
            held(),
            Some(Err(unready.clone())),
            Some(Err(unready)),
            None,
            None,
        ];
        assert!(!failed(&FIVE, &seen), "{reply}");
    }
    // Errors about the lock still are answers, even one whose text names a server state.
    for reply in [
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        "-NOFENCE no fence can be drawn\r\n",
        "-ERR a script said: error: ReadOnly: not the server's state\r\n",
        "-ERR BusyLoading: a message, not the LOADING code\r\n",
    ] {
        assert!(is_answer(&sent(reply)), "{reply}");
    }
}

#[test]
fn the_grace_never_takes_more_than_half_the_room_left() {
    let ms = Duration::from_millis;
    assert_eq!(grace(ms(1), Duration::MAX), GRACE_MIN);
    assert_eq!(grace(ms(40), Duration::MAX), ms(40));
    assert_eq!(grace(ms(1), ms(295)), GRACE_MIN);
    assert_eq!(grace(ms(200), ms(296)), ms(48));
    assert_eq!(grace(ms(5), ms(15)), ms(5));
    assert_eq!(grace(ms(300), ms(295)), Duration::ZERO);
}

/// One node's reply to an attempt, or none yet.
type AttemptReply = Option<Result<Acquired, LockError>>;

fn won_with(fence: u64) -> AttemptReply {
    let set_at = None;
    Some(Ok(Acquired::Won { fence, set_at }))
}

fn held_for(ms: u64) -> AttemptReply {
    let ttl = Some(Duration::from_millis(ms));
    Some(Ok(Acquired::Held { ttl }))
}

fn timed_out() -> AttemptReply {
    Some(Err(LockError::no_reply(Duration::from_millis(500))))
}

/// The verdict on `seen` `after` the first send, for a 1 s lock (valid 988 ms).
fn verdict_after(seen: &[AttemptReply], after: Duration) -> Verdict {
    let started = std::time::Instant::now();
    acquire_verdict(&FIVE, seen, started, started + after, TTL)
}

const TTL: Duration = Duration::from_secs(1);

fn verdict(seen: &[AttemptReply]) -> Verdict {
    verdict_after(seen, Duration::from_millis(5))
}

#[test]
fn a_quorum_won_on_one_fence_within_the_validity_is_won_without_the_stragglers() {
    let seen = [won_with(7), won_with(7), won_with(7), None, None];
    assert_eq!(verdict(&seen), Verdict::Won { fence: 7 });
    let all = [
        won_with(7),
        won_with(7),
        won_with(7),
        won_with(7),
        held_for(9),
    ];
    assert_eq!(verdict(&all), Verdict::Won { fence: 7 });
    // Two won and three pending: any of those could still decide.
    let seen = [won_with(7), won_with(7), None, None, None];
    assert_eq!(verdict(&seen), Verdict::Pending);
}

#[test]
fn a_quorum_won_on_differing_fences_raises_them_first() {
    let seen = [won_with(7), won_with(7), won_with(9), None, None];
    assert_eq!(verdict(&seen), Verdict::Raise);
    let seen = [
        won_with(9),
        held_for(5),
        won_with(7),
        won_with(7),
        timed_out(),
    ];
    assert_eq!(verdict(&seen), Verdict::Raise);
}

#[test]
fn a_quorum_won_past_its_validity_failed() {
    let seen = [won_with(7), won_with(7), won_with(7), None, None];
    let validity = clock::validity(TTL);
    assert_eq!(validity, Duration::from_millis(988));
    let just = validity - Duration::from_millis(1);
    assert_eq!(verdict_after(&seen, just), Verdict::Won { fence: 7 });
    assert_eq!(verdict_after(&seen, validity), Verdict::Failed);
    assert_eq!(verdict_after(&seen, 2 * TTL), Verdict::Failed);
    let raise = [won_with(7), won_with(7), won_with(9), None, None];
    assert_eq!(verdict_after(&raise, validity), Verdict::Failed);
}

#[test]
fn a_quorum_held_or_answered_against_us_is_held_at_once() {
    let seen = [
        won_with(7),
        won_with(7),
        held_for(30),
        held_for(20),
        held_for(40),
    ];
    assert_eq!(verdict(&seen), Verdict::Held);
    // Three held with two pending: those two cannot make a quorum.
    let seen = [held_for(30), held_for(20), held_for(40), None, None];
    assert_eq!(verdict(&seen), Verdict::Held);
    // Two won, one held, two that timed out: a quorum answered, and it is lost.
    let seen = [
        won_with(7),
        won_with(7),
        held_for(30),
        timed_out(),
        timed_out(),
    ];
    assert_eq!(verdict(&seen), Verdict::Held);
    // Two held, three pending: the pending could still win.
    let seen = [held_for(30), held_for(20), None, None, None];
    assert_eq!(verdict(&seen), Verdict::Pending);
}

#[test]
fn short_of_a_quorum_answering_every_node_is_waited_for_then_it_failed_never_held() {
    let after_three_timeouts = |a: AttemptReply, b: AttemptReply| {
        let seen = [timed_out(), timed_out(), timed_out(), a, b];
        verdict(&seen)
    };
    // Nobody can win, but the quorum error counts the last two's answers.
    assert_eq!(after_three_timeouts(None, None), Verdict::Pending);
    assert_eq!(after_three_timeouts(won_with(7), None), Verdict::Pending);
    let two_won = after_three_timeouts(won_with(7), won_with(7));
    assert_eq!(two_won, Verdict::Failed);
    let two_held = after_three_timeouts(held_for(30), held_for(30));
    assert_eq!(two_held, Verdict::Failed);
    let unreachable = after_three_timeouts(Some(Err(down())), won_with(3));
    assert_eq!(unreachable, Verdict::Failed);
}

#[test]
fn a_nodes_own_error_or_refusal_among_a_quorum_of_answers_failed() {
    let refused = || Some(Err(LockError::Redis("WRONGTYPE".into())));
    let seen = [won_with(7), won_with(7), refused(), refused(), timed_out()];
    assert_eq!(verdict(&seen), Verdict::Failed);
    let no_fence = || Some(Ok(Acquired::Refused));
    let seen = [won_with(7), no_fence(), no_fence(), no_fence(), timed_out()];
    assert_eq!(verdict(&seen), Verdict::Failed);
    // A holder among them is what the caller hears.
    let seen = [
        won_with(7),
        no_fence(),
        held_for(3),
        no_fence(),
        timed_out(),
    ];
    assert_eq!(verdict(&seen), Verdict::Held);
}

#[test]
fn a_release_settles_at_a_quorum_released_else_once_every_node_replied() {
    let yes = || Some(Ok(true));
    let no = || Some(Ok(false));
    let lost = || Some(Err(LockError::no_reply(Duration::from_millis(500))));
    let released = release_verdict(&FIVE, &[yes(), yes(), yes(), None, None]);
    assert_eq!(released, Some(Ok(true)));
    assert_eq!(
        release_verdict(&FIVE, &[yes(), yes(), no(), None, None]),
        None
    );
    let all = [yes(), yes(), no(), no(), lost()];
    assert_eq!(release_verdict(&FIVE, &all), Some(Ok(false)));
    let short = [yes(), yes(), lost(), lost(), lost()];
    let err = release_verdict(&FIVE, &short).and_then(Result::err);
    let err = err.map(|err| err.to_string()).unwrap_or_default();
    assert!(
        err.contains("only 2 of 5 Redlock nodes answered; a quorum is 3"),
        "{err}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn stragglers_the_pool_drops_are_told_as_such_and_those_that_replied_are_not() {
    use super::super::redlock_pool::MAX_OUT;
    use futures_util::FutureExt;
    use std::sync::{Arc, Mutex};
    let pool = LatePool::default();
    type LateReplies = Vec<(usize, Option<u32>)>;
    let told: Arc<Mutex<LateReplies>> = Arc::default();
    // Node 1 replies at once, node 3 never (a silent node, its bound far off).
    let calls: [(usize, GatherCall); 2] = [(1, Box::pin(ready(7))), (3, Box::pin(pending()))];
    let stragglers: Stragglers<GatherCall> = (calls.into_iter())
        .map(|(i, call)| join(futures_util::future::ready(i), call))
        .collect();
    let seen = told.clone();
    finish(&pool, stragglers, vec![1, 3], move |node, reply| {
        seen.lock().unwrap().push((node, reply));
        None::<std::future::Ready<()>>
    });
    tokio::task::yield_now().await;
    assert_eq!(*told.lock().unwrap(), [(1, Some(7))]);
    // A silent node's stragglers fill the pool: the oldest, ours among them, are dropped.
    for _ in 0..MAX_OUT {
        pool.run(pending::<()>().boxed());
    }
    tokio::task::yield_now().await;
    assert_eq!(*told.lock().unwrap(), [(1, Some(7)), (3, None)]);
}
