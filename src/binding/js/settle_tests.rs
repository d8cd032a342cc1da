use super::*;
use crate::binding::js::outcome::Settlement;

fn names(entries: &[Settlement]) -> Vec<String> {
    (entries.iter())
        .map(|entry| match entry {
            Settlement::Settled(id, _) => format!("settled {id}"),
            _ => "news".into(),
        })
        .collect()
}

#[test]
fn an_end_queued_before_the_thread_answered_its_call_is_dropped_and_its_id_not_kept() {
    let completer = Completer(Arc::new(Queue::default()));
    // The waiter's runtime task found its caller answered (its wake-table entry settled by
    // the thread's release) and ended before the thread marked the call answered.
    completer.settle(7, Outcome::Done);
    completer.answered(7);
    assert!(completer.0.take().is_empty(), "the stale end would be told");
    // Call ids wrap: a later call with the same id is still heard.
    completer.settle(7, Outcome::Done);
    assert_eq!(names(&completer.0.take()), ["settled 7"]);
}
