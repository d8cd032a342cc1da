use super::*;

/// The q-quantile of `sorted` as `quantile_us` defines it: `sorted[ceil(q * n) - 1]`.
fn exact(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

fn check(values: &[u64]) {
    let histogram = WaitHistogram::default();
    for us in values {
        histogram.record(Duration::from_micros(*us));
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    for q in [0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0] {
        let want = exact(&sorted, q);
        let got = histogram.quantile_us(q);
        // The bucket's top is at most 1/8 above its bottom; never above the maximum.
        assert!(got >= want, "q={q}: {got} < {want}");
        assert!(
            got <= want + want / 8 + 1,
            "q={q}: {got} too far above {want}"
        );
    }
    assert_eq!(histogram.max_us(), *sorted.last().unwrap_or(&0));
    assert_eq!(histogram.count(), values.len() as u64);
}

#[test]
fn quantiles_match_a_sorted_vector_within_a_bucket() {
    check(&[5]);
    check(&(0..1000).collect::<Vec<_>>());
    check(&[1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000]);
    // A pseudo-random spread over six decades.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let values: Vec<u64> = (0..10_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 10_000_000
        })
        .collect();
    check(&values);
}

#[test]
fn buckets_cover_every_value_in_order() {
    let mut last = 0;
    for us in (0..200_000).chain([u64::MAX / 2, u64::MAX]) {
        let bucket = bucket_of(us);
        assert!(bucket >= last && bucket < BUCKETS, "{us} -> {bucket}");
        assert!(us.min((1 << (TOP_BIT + 1)) - 1) <= bucket_high(bucket));
        last = bucket;
    }
}

#[test]
fn an_empty_histogram_answers_zero() {
    let histogram = WaitHistogram::default();
    assert_eq!(histogram.quantile_us(0.5), 0);
    assert_eq!(histogram.max_us(), 0);
}

/// One of each count: a 3 ms wait, the three kinds of wait news, a refresh, a loss, an abort.
fn count_one_of_each(stats: &CallCounters) {
    stats.acquired(Duration::from_millis(3));
    stats.contended("k");
    stats.woken("k");
    stats.handed_over("k");
    stats.refreshed();
    stats.lost();
    stats.error(&LockError::Aborted);
}

#[test]
fn counters_and_errors_by_code() {
    let stats = CallCounters::default();
    count_one_of_each(&stats);
    stats.acquired(Duration::from_millis(1));
    stats.error(&LockError::Aborted);
    stats.error(&LockError::Timeout("x".into()));
    let snap = stats.snapshot();
    assert_eq!(snap.acquisitions, 2);
    assert_eq!((snap.contended, snap.woken, snap.handed_over), (1, 1, 1));
    assert_eq!((snap.refreshes, snap.lost), (1, 1));
    assert_eq!(snap.errors, vec![("ETIMEDOUT", 1), ("EABORTED", 2)]);
    assert_eq!(snap.wait_max_ms, 3.0);
    assert!(snap.wait_p50_ms >= 1.0 && snap.wait_p50_ms <= 1.125);
}

#[test]
fn counters_made_off_stay_zero_and_still_tell_the_observer() {
    struct Count(std::sync::atomic::AtomicUsize);
    impl Observer for Count {
        fn seen(&self, _seen: WaitNews, _key: &str) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let stats = CallCounters::new(false);
    let heard = Arc::new(Count(std::sync::atomic::AtomicUsize::new(0)));
    assert!(stats.observe(heard.clone()));
    count_one_of_each(&stats);
    stats.ended::<()>(Instant::now(), &Ok(Some(())), false);
    let snap = stats.snapshot();
    assert!(!snap.enabled);
    assert_eq!(
        (
            snap.acquisitions,
            snap.contended,
            snap.woken,
            snap.handed_over
        ),
        (0, 0, 0, 0)
    );
    assert_eq!((snap.refreshes, snap.lost), (0, 0));
    assert!(snap.errors.is_empty());
    assert_eq!(snap.wait_max_ms, 0.0);
    assert_eq!(heard.0.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert!(CallCounters::default().snapshot().enabled);
}

#[test]
fn error_codes_list_every_code() {
    for code in ERROR_CODES {
        assert_eq!(ERROR_CODES.iter().filter(|c| **c == code).count(), 1);
    }
    assert_eq!(LockError::Aborted.code(), ERROR_CODES[8]);
}

#[test]
fn an_observer_hears_each_wait_with_its_key() {
    struct Heard(std::sync::Mutex<Vec<(WaitNews, String)>>);
    impl Observer for Heard {
        fn seen(&self, seen: WaitNews, key: &str) {
            if let Ok(mut heard) = self.0.lock() {
                heard.push((seen, key.to_owned()));
            }
        }
    }
    let stats = CallCounters::default();
    stats.contended("before");
    let heard = Arc::new(Heard(Default::default()));
    assert!(stats.observe(heard.clone()));
    assert!(!stats.observe(heard.clone()));
    stats.contended("a");
    stats.woken("b");
    stats.handed_over("c");
    let got = heard.0.lock().map(|h| h.clone()).unwrap_or_default();
    let want = [
        (WaitNews::Contended, "a"),
        (WaitNews::Woken, "b"),
        (WaitNews::HandedOver, "c"),
    ];
    assert_eq!(got, want.map(|(s, k)| (s, k.to_owned())).to_vec());
    assert_eq!(stats.snapshot().contended, 2);
}
