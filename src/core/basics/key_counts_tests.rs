use super::{KeyEvent, KeyWatch, PerKey, ANSWERS_PER_SECOND, IDLE, MAX_KEYS};
use std::time::{Duration, Instant};

fn all(_: &[u8]) -> bool {
    true
}

#[test]
fn nothing_is_kept_until_a_watch_asks() {
    let watch = KeyWatch::new();
    watch.count(KeyEvent::HandedOver, || b"lock:a");
    watch.count_watched(KeyEvent::Woken, b"lock:a", Instant::now());
    assert!(!watch.is_on());
    let tally = watch.asked(b"r1", all, Instant::now()).unwrap();
    assert!(
        tally.keys.is_empty(),
        "counted before the request: {tally:?}"
    );
    assert!(watch.is_on());
}

#[test]
fn after_a_request_each_key_is_counted_and_answered_once_per_request() {
    let watch = KeyWatch::new();
    let first = watch.asked(b"r1", all, Instant::now()).unwrap();
    watch.count(KeyEvent::HandedOver, || b"lock:a");
    watch.count(KeyEvent::HandedOver, || b"lock:a");
    watch.count(KeyEvent::Woken, || b"lock:a");
    watch.count(KeyEvent::Woken, || b"lock:b");
    assert_eq!(
        watch.asked(b"r1", all, Instant::now()),
        None,
        "answered twice"
    );
    let mut tally = watch
        .asked(b"r2", |key| key != b"lock:b", Instant::now())
        .unwrap();
    assert_eq!(tally.session, first.session);
    tally.keys.sort_by(|a, b| a.0.cmp(&b.0));
    let a = PerKey {
        handed_over: 2,
        woken: 1,
    };
    assert_eq!(tally.keys, vec![(b"lock:a".to_vec(), a)]);
}

#[test]
fn counting_stops_once_no_request_came_for_the_idle_time() {
    let watch = KeyWatch::new();
    let asked = Instant::now();
    let first = watch.asked(b"r1", all, asked).unwrap();
    watch.count_watched(KeyEvent::Woken, b"lock:a", asked + IDLE);
    assert!(watch.is_on());
    watch.count_watched(
        KeyEvent::Woken,
        b"lock:a",
        asked + IDLE + Duration::from_millis(1),
    );
    assert!(
        !watch.is_on(),
        "still counting after {IDLE:?} without a request"
    );
    watch.count(KeyEvent::Woken, || b"lock:a");
    let later = asked + IDLE * 2;
    let again = watch.asked(b"r2", all, later).unwrap();
    assert_ne!(
        again.session, first.session,
        "a new map starts a new session"
    );
    assert!(again.keys.is_empty(), "kept while off: {again:?}");
}

#[test]
fn keys_past_the_bound_are_counted_together() {
    let watch = KeyWatch::new();
    let now = Instant::now();
    watch.asked(b"r1", all, now).unwrap();
    for n in 0..MAX_KEYS + 5 {
        watch.count_watched(KeyEvent::HandedOver, format!("lock:{n}").as_bytes(), now);
    }
    watch.count_watched(KeyEvent::Woken, b"lock:0", now);
    let tally = watch.asked(b"r2", all, now).unwrap();
    assert_eq!(tally.keys.len(), MAX_KEYS);
    assert_eq!(tally.others.handed_over, 5);
    let zero = tally.keys.iter().find(|(key, _)| key == b"lock:0").unwrap();
    assert_eq!(
        zero.1.woken, 1,
        "a key kept is still counted once the map is full"
    );
}

#[test]
fn a_flood_of_requests_is_answered_at_a_bounded_rate() {
    let watch = KeyWatch::new();
    let now = Instant::now();
    let answered = (0..ANSWERS_PER_SECOND * 3)
        .filter(|n| watch.asked(format!("r{n}").as_bytes(), all, now).is_some())
        .count();
    assert_eq!(answered, ANSWERS_PER_SECOND as usize);
    assert!(watch.is_on(), "still counting while the requests come");
    let next_second = now + Duration::from_secs(1);
    assert!(watch.asked(b"later", all, next_second).is_some());
}
