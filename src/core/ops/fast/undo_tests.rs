use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

fn reply(line: &[u8]) -> Value {
    match resp::parse(line) {
        Ok(Some((value, _))) => value,
        other => panic!("{other:?}"),
    }
}

/// An undo counted into `stats`, and how many times it went again.
fn undo(stats: &Arc<CallCounters>) -> (UndoSent, Arc<AtomicUsize>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = sent.clone();
    let undo = UndoSent::new(stats, move || {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    (undo, sent)
}

fn errors(stats: &CallCounters) -> Vec<(&'static str, u64)> {
    stats.snapshot().errors
}

#[tokio::test(start_paused = true)]
async fn a_busy_server_refusing_the_undo_is_counted_and_sends_it_again_once() {
    let stats = Arc::new(CallCounters::new(true));
    let (undo, again) = undo(&stats);
    let busy = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.\r\n";
    assert!(undo.heard(reply(busy)));
    assert_eq!(errors(&stats), vec![("EREDIS", 1)]);
    // Not at once: the script that keeps the server busy is given a moment.
    tokio::task::yield_now().await;
    assert_eq!(again.load(Ordering::SeqCst), 0);
    tokio::time::sleep(UNDO_AGAIN_AFTER + Duration::from_millis(1)).await;
    assert_eq!(again.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn an_oom_refusal_is_counted_and_not_sent_again() {
    let stats = Arc::new(CallCounters::new(true));
    let (undo, again) = undo(&stats);
    let oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    assert!(!undo.heard(reply(oom)));
    tokio::time::sleep(UNDO_AGAIN_AFTER * 2).await;
    assert_eq!(again.load(Ordering::SeqCst), 0);
    assert_eq!(errors(&stats), vec![("EREDIS", 1)]);
}

#[tokio::test(start_paused = true)]
async fn an_answered_undo_is_neither_counted_nor_sent_again() {
    let stats = Arc::new(CallCounters::new(true));
    for answer in [&b":1\r\n"[..], b":0\r\n"] {
        let (undo, again) = undo(&stats);
        assert!(!undo.heard(reply(answer)));
        tokio::time::sleep(UNDO_AGAIN_AFTER * 2).await;
        assert_eq!(again.load(Ordering::SeqCst), 0);
    }
    assert!(errors(&stats).is_empty());
}

#[test]
fn an_undo_whose_connection_broke_goes_again_at_once() {
    let stats = Arc::new(CallCounters::new(true));
    let (undo, again) = undo(&stats);
    undo.owe();
    assert_eq!(again.load(Ordering::SeqCst), 1);
    assert!(errors(&stats).is_empty());
}
