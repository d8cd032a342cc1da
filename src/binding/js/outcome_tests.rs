use super::*;

fn ended(id: u32) -> Settlement {
    Settlement::Settled(id, Outcome::Done)
}

fn seen(event: &'static str) -> Settlement {
    Settlement::Seen {
        listener: 1,
        event,
        key: "job".into(),
    }
}

fn refreshed() -> Settlement {
    Settlement::Event {
        listener: 2,
        event: "refreshed",
        lost: None,
    }
}

/// An entry by what tells it apart here.
fn name(entry: &Settlement) -> String {
    match entry {
        Settlement::Settled(id, _) => format!("settled {id}"),
        Settlement::Event { event, .. } | Settlement::Seen { event, .. } => event.to_string(),
    }
}

fn names(entries: &[Settlement]) -> Vec<String> {
    entries.iter().map(name).collect()
}

fn queue_of(entries: Vec<Settlement>) -> Queue {
    let queue = Queue::default();
    lock(&queue.done).entries = Some(entries);
    queue
}

#[test]
fn news_comes_with_what_was_queued_before_it_in_the_order_it_happened() {
    let queue = queue_of(vec![
        ended(1),
        seen("contended"),
        refreshed(),
        ended(2),
        seen("handed-over"),
        ended(3),
    ]);
    let news = queue.take_news(&[]);
    assert_eq!(
        names(&news),
        [
            "settled 1",
            "contended",
            "refreshed",
            "settled 2",
            "handed-over"
        ]
    );
    assert_eq!(names(&queue.take()), ["settled 3"], "what came after stays");
}

#[test]
fn without_news_nothing_is_taken_ahead() {
    let queue = queue_of(vec![ended(1), refreshed()]);
    assert!(queue.take_news(&[]).is_empty());
    assert_eq!(names(&queue.take()), ["settled 1", "refreshed"]);
    assert!(queue_of(Vec::new()).take_news(&[]).is_empty());
    let closed = Queue::default();
    closed.close();
    assert!(closed.take_news(&[]).is_empty());
}

#[test]
fn an_end_queued_for_a_promise_the_thread_settles_now_stays_queued_behind_it() {
    let queue = queue_of(vec![ended(7), seen("handed-over"), ended(8)]);
    assert_eq!(names(&queue.take_news(&[7])), ["handed-over"]);
    assert_eq!(names(&queue.take()), ["settled 7", "settled 8"]);
}

/// A waiter's task as `start_here` runs one, registered as call `id`: it pauses until woken
/// (its first pause, parked), then until told (a second pause, on the runtime, that a wake
/// table's telling cuts short); `paused` hears each pause begin, `ended` its end.
fn waiter(
    queue: &Queue,
    id: u32,
    woken: tokio::sync::oneshot::Receiver<()>,
    told: Arc<tokio::sync::Notify>,
) -> (std::sync::mpsc::Receiver<()>, std::sync::mpsc::Receiver<()>) {
    let (pause, paused) = std::sync::mpsc::channel();
    let (end, ended) = std::sync::mpsc::channel();
    let work = async move {
        let _ = pause.send(());
        let _ = woken.await;
        let _ = pause.send(());
        let long_pause = tokio::time::sleep(std::time::Duration::from_secs(30));
        tokio::select! {
            () = told.notified() => {}
            () = long_pause => {}
        }
        let _ = end.send(());
    };
    let started = crate::binding::runtime::start_here(work, |task| queue.park(id, task));
    assert!(started.is_ok(), "no runtime");
    (paused, ended)
}

/// What a release that answers call `id` in place does with its task (ops/fast/handoff.rs
/// `Handoff::settle`): claimed and dropped unrun, or, not parked any more, told.
fn answer_in_place(queue: &Queue, id: u32, told: &tokio::sync::Notify) -> bool {
    match queue.claim(id) {
        Some(task) => {
            task.drop_unrun();
            true
        }
        None => {
            told.notify_one();
            false
        }
    }
}

const PROMPT: std::time::Duration = std::time::Duration::from_secs(2);

#[test]
fn a_waiter_woken_onto_the_runtime_then_answered_in_place_is_told_and_ends_promptly() {
    let queue = Queue::default();
    let told = Arc::new(tokio::sync::Notify::new());
    let (wake, woken) = tokio::sync::oneshot::channel();
    let (paused, ended) = waiter(&queue, 5, woken, told.clone());
    assert_eq!(paused.recv_timeout(PROMPT), Ok(()), "first pause");
    // Its first pause ends (a refused attempt's wake): the task moves to the runtime, and
    // pauses again there, its entry still among the unstarted.
    let _ = wake.send(());
    assert_eq!(paused.recv_timeout(PROMPT), Ok(()), "second pause");
    // Which is what the old check (`parked`: an entry there) read as parked: untold, the
    // task slept out its pause.
    assert!(lock(&queue.unstarted).contains_key(&5));
    assert!(
        !answer_in_place(&queue, 5, &told),
        "claimed a task on the runtime"
    );
    assert_eq!(ended.recv_timeout(PROMPT), Ok(()), "slept out its pause");
    assert!(!queue.unpark(5).is_some_and(|task| task.drop_task()));
}

#[test]
fn a_parked_waiter_answered_in_place_is_dropped_unrun_and_its_answer_knows_it() {
    let queue = Queue::default();
    let told = Arc::new(tokio::sync::Notify::new());
    let (_wake, woken) = tokio::sync::oneshot::channel();
    let (paused, ended) = waiter(&queue, 6, woken, told.clone());
    assert_eq!(paused.recv_timeout(PROMPT), Ok(()), "first pause");
    assert!(
        answer_in_place(&queue, 6, &told),
        "not claimed while parked"
    );
    // `Completer::answered` then finds it dropped: its end is never to come.
    assert!(queue.unpark(6).is_some_and(|task| task.drop_task()));
    assert!(ended
        .recv_timeout(std::time::Duration::from_millis(100))
        .is_err());
}
