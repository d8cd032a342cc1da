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
