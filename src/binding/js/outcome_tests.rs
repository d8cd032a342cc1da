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
