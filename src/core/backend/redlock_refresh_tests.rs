use super::*;
use crate::core::backend::redlock_late::LateBook;
use crate::core::proto::refresh::Refresh;

fn batch_of(tokens: &[&'static [u8]]) -> RefreshBatch {
    let locks: Vec<Refresh<'_>> = (tokens.iter())
        .map(|token| Refresh {
            key: b"k",
            token,
            ttl_ms: 1000,
            fence_retention_ms: 0,
            pair: None,
        })
        .collect();
    RefreshBatch::new(&locks, &[])
}

#[test]
fn a_silent_node_known_to_have_refused_counts_against_the_lock() {
    let batch = batch_of(&[b"a", b"b"]);
    // Two said refreshed, one not ours, two silent: no verdict on their own.
    let per_node: PerNode = vec![
        Some(vec![Some(true), Some(true)]),
        Some(vec![Some(true), Some(true)]),
        Some(vec![Some(false), Some(false)]),
        None,
        None,
    ];
    assert_eq!(verdicts(3, &batch, &per_node, None), [None, None]);
    // The silent nodes refused `a` in an earlier round: `a` is lost, `b` still unknown.
    let refusing = Some(vec![vec![3, 4], vec![]]);
    assert_eq!(
        verdicts(3, &batch, &per_node, refusing),
        [Some(false), None]
    );
    // A node answering now is read as it answers, whatever it said before.
    let answering: PerNode = vec![
        Some(vec![Some(true)]),
        Some(vec![Some(true)]),
        Some(vec![Some(true)]),
        None,
        None,
    ];
    let refusing = Some(vec![vec![0, 1, 2, 3, 4]]);
    assert_eq!(
        verdicts(3, &batch_of(&[b"a"]), &answering, refusing),
        [Some(true)]
    );
}

#[test]
fn refusals_are_filed_per_node_taken_back_by_a_refresh_and_forgotten_at_the_end() {
    let book = LateBook::default();
    let batch = batch_of(&[b"a", b"b"]);
    assert_eq!(book.refusing(batch.tokens()), None);
    book.heard_refresh(3, batch.tokens(), &[Some(false), Some(true)]);
    book.heard_refresh(4, batch.tokens(), &[Some(false), None]);
    assert_eq!(
        book.refusing(batch.tokens()),
        Some(vec![vec![3, 4], vec![]])
    );
    book.heard_refresh(3, batch.tokens(), &[Some(true), Some(true)]);
    assert_eq!(book.refusing(batch.tokens()), Some(vec![vec![4], vec![]]));
    book.end("a");
    assert_eq!(book.refusing(batch.tokens()), None);
}

type RefreshCall = std::pin::Pin<Box<dyn Future<Output = Vec<Option<bool>>> + Send>>;

fn answering(answer: Vec<Option<bool>>) -> RefreshCall {
    Box::pin(std::future::ready(answer))
}

fn silent() -> RefreshCall {
    Box::pin(std::future::pending())
}

#[tokio::test]
async fn a_round_ends_once_a_quorum_refreshed_every_lock_without_waiting_for_the_others() {
    // Two nodes down (their calls still out): the three that answer decide the round. It
    // used to wait as long again as they took, past its bound on a loaded machine.
    let calls = vec![
        answering(vec![Some(true), Some(true)]),
        answering(vec![Some(true), Some(true)]),
        answering(vec![Some(true), Some(true)]),
        silent(),
        silent(),
    ];
    let mut round = Box::pin(gather_refresh(calls, 3, 2, Duration::from_secs(60)));
    let std::task::Poll::Ready((per_node, stragglers)) = futures_util::poll!(&mut round) else {
        panic!("the round waited on nodes whose answer can change nothing");
    };
    assert!(per_node[..3]
        .iter()
        .all(|a| *a == Some(vec![Some(true), Some(true)])));
    assert_eq!(per_node[3..], [None, None]);
    assert_eq!(stragglers.len(), 2, "left to finish elsewhere, not dropped");
}

/// Answers `answer` after `ms` of the (paused) clock.
fn answering_after(ms: u64, answer: Vec<Option<bool>>) -> RefreshCall {
    Box::pin(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        answer
    })
}

#[tokio::test(start_paused = true)]
async fn a_round_short_of_a_quorum_for_one_lock_gives_the_others_a_grace_within_its_bound() {
    // Lock 1 has two yes and a no, 200 ms in: a pending node could still confirm it, so
    // the others get a grace. As long again (200 ms) would end the round past its bound of
    // 290 ms (the locks' deadline): half of what is left, at most.
    let calls = vec![
        answering_after(200, vec![Some(true), Some(true)]),
        answering_after(200, vec![Some(true), Some(true)]),
        answering_after(200, vec![Some(true), Some(false)]),
        silent(),
        silent(),
    ];
    let started = tokio::time::Instant::now();
    let (per_node, stragglers) = gather_refresh(calls, 3, 2, Duration::from_millis(290)).await;
    let took = started.elapsed();
    assert!(took <= Duration::from_millis(246), "{took:?}");
    assert!(took >= Duration::from_millis(240), "{took:?}");
    assert_eq!(per_node.iter().flatten().count(), 3);
    assert_eq!(stragglers.len(), 2);
    let verdicts = verdicts(3, &batch_of(&[b"a", b"b"]), &per_node, None);
    assert_eq!(verdicts, [Some(true), None]);
}
