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

#[test]
fn the_end_of_a_runtime_task_whose_call_the_thread_answered_is_dropped_as_it_comes() {
    let completer = Completer(Arc::new(Queue::default()));
    completer.0.started(8);
    completer.answered(8);
    completer.settle(8, Outcome::Done);
    assert!(completer.0.take().is_empty(), "the stale end would be told");
    completer.settle(8, Outcome::Done);
    assert_eq!(names(&completer.0.take()), ["settled 8"], "its id kept");
}

#[test]
fn a_call_the_thread_answered_with_no_runtime_task_leaves_no_id_behind() {
    let completer = Completer(Arc::new(Queue::default()));
    // A waiter's first attempt, on the thread's socket, ends there (`Step::Now`, or its
    // bound passed): nothing of it is ever queued.
    completer.answered(9);
    // Call ids wrap: a later call with the same id is still heard.
    completer.settle(9, Outcome::Done);
    assert_eq!(names(&completer.0.take()), ["settled 9"]);
}

#[test]
fn a_parked_task_dropped_when_its_call_is_answered_leaves_no_id_behind() {
    let completer = Completer(Arc::new(Queue::default()));
    // Parked outside the runtime (its first poll only waits), then answered on the thread:
    // the task is dropped unrun, so no end of it comes to clear the id.
    let (_wake, woken) = tokio::sync::oneshot::channel::<()>();
    completer.run_here_first(10, async move {
        let _ = woken.await;
        Outcome::Done
    });
    completer.answered(10);
    // Call ids wrap: a later call with that id, answered on the thread with no runtime task
    // (kept as answered only while one is to end), then another: the last is still heard.
    completer.answered(10);
    completer.settle(10, Outcome::Done);
    assert_eq!(names(&completer.0.take()), ["settled 10"], "its id kept");
}
