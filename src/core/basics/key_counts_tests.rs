use super::{KeyEvent, KeyWatch, PerKey, ANSWERS_PER_SECOND, IDLE, MAX_ANSWERED, MAX_KEYS};
use std::time::{Duration, Instant};

#[test]
fn while_off_a_count_never_asks_for_its_key() {
    let watch = KeyWatch::new();
    watch.count(KeyEvent::HandedOver, || -> &[u8] {
        panic!("the key was made while off")
    });
    let asked = Instant::now();
    watch.asked(b"r1", asked).unwrap();
    watch.expire(asked + IDLE + Duration::from_millis(1));
    assert!(!watch.is_on(), "an idle map outlived its time");
    watch.count(KeyEvent::Woken, || -> &[u8] {
        panic!("the key was made once idle")
    });
}

#[test]
fn an_empty_key_is_not_counted() {
    let watch = KeyWatch::new();
    let now = Instant::now();
    watch.asked(b"r1", now).unwrap();
    watch.count_watched(KeyEvent::Woken, b"", now);
    assert!(watch.asked(b"r2", now).unwrap().keys.is_empty());
}

#[test]
fn an_answer_names_the_busiest_keys_and_sums_the_rest() {
    let watch = KeyWatch::new();
    let now = Instant::now();
    watch.asked(b"r1", now).unwrap();
    for n in 0..MAX_ANSWERED + 10 {
        let key = format!("lock:{n}");
        let times = if n < 5 { 3 } else { 1 };
        for _ in 0..times {
            watch.count_watched(KeyEvent::HandedOver, key.as_bytes(), now);
        }
    }
    watch.count_watched(KeyEvent::Woken, b"other:1", now);
    let tally = (watch.asked(b"r2", now).unwrap()).narrowed(|key| key.starts_with(b"lock:"));
    assert_eq!(tally.keys.len(), MAX_ANSWERED);
    for n in 0..5 {
        let key = format!("lock:{n}").into_bytes();
        assert!(
            tally.keys.iter().any(|(k, _)| *k == key),
            "lock:{n}, among the busiest, left out"
        );
    }
    assert_eq!(
        tally.others.handed_over, 10,
        "the keys cut are summed in others"
    );
    assert_eq!(
        tally.others.woken, 0,
        "a key the pattern drops is not in others"
    );
}

#[test]
fn nothing_is_kept_until_a_watch_asks() {
    let watch = KeyWatch::new();
    watch.count(KeyEvent::HandedOver, || b"lock:a");
    watch.count_watched(KeyEvent::Woken, b"lock:a", Instant::now());
    assert!(!watch.is_on());
    let tally = watch.asked(b"r1", Instant::now()).unwrap();
    assert!(
        tally.keys.is_empty(),
        "counted before the request: {tally:?}"
    );
    assert!(watch.is_on());
}

#[test]
fn after_a_request_each_key_is_counted_and_answered_once_per_request() {
    let watch = KeyWatch::new();
    let first = watch.asked(b"r1", Instant::now()).unwrap();
    watch.count(KeyEvent::HandedOver, || b"lock:a");
    watch.count(KeyEvent::HandedOver, || b"lock:a");
    watch.count(KeyEvent::Woken, || b"lock:a");
    watch.count(KeyEvent::Woken, || b"lock:b");
    assert_eq!(watch.asked(b"r1", Instant::now()), None, "answered twice");
    let mut tally = (watch.asked(b"r2", Instant::now()).unwrap()).narrowed(|key| key != b"lock:b");
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
    let first = watch.asked(b"r1", asked).unwrap();
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
    let again = watch.asked(b"r2", later).unwrap();
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
    watch.asked(b"r1", now).unwrap();
    for n in 0..MAX_KEYS + 5 {
        watch.count_watched(KeyEvent::HandedOver, format!("lock:{n}").as_bytes(), now);
    }
    watch.count_watched(KeyEvent::Woken, b"lock:0", now);
    let tally = watch.asked(b"r2", now).unwrap();
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
        .filter(|n| watch.asked(format!("r{n}").as_bytes(), now).is_some())
        .count();
    assert_eq!(answered, ANSWERS_PER_SECOND as usize);
    assert!(watch.is_on(), "still counting while the requests come");
    let next_second = now + Duration::from_secs(1);
    assert!(watch.asked(b"later", next_second).is_some());
}
