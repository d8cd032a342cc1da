//! What each backend says it offers, and the clock it answers with.
use super::*;
use crate::core::backend::endpoint::EndpointSpec;
use crate::core::backend::lock_store::{FastPath, LostScope};

struct Deaf;

impl Listener for Deaf {
    fn message(&self, _: &[u8], _: &[u8]) {}
    fn connection_lost(&self, _: LostScope) {}
}

fn open(url: &str) -> Backend {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(url.into()),
        ..Default::default()
    })
    .unwrap();
    Backend::open(endpoint, Arc::new(Deaf))
}

#[test]
fn one_redis_offers_the_socket_and_transactions_memory_runs_inline_and_scripts_only() {
    let redis = open("redis://127.0.0.1:1").caps();
    assert!(matches!(open("redis://127.0.0.1:1"), Backend::Redis(_)));
    assert_eq!(redis.fast_path, FastPath::Socket);
    assert!(redis.transactions);
    let memory = open("memory://caps").caps();
    assert!(matches!(open("memory://caps"), Backend::Memory(_)));
    assert_eq!(memory.fast_path, FastPath::Inline);
    assert!(!memory.transactions);
    assert_eq!(
        (redis.fencing, redis.handover, redis.fairness, redis.wake),
        (
            memory.fencing,
            memory.handover,
            memory.fairness,
            memory.wake
        ),
        "the same scripts give both the same guarantees"
    );
}

#[tokio::test]
async fn memory_answers_the_time_of_its_own_clock() {
    let memory = open("memory://time");
    let before = SystemTime::now();
    let time = memory.server_time(Duration::from_secs(1)).await.unwrap();
    let after = SystemTime::now();
    let slack = Duration::from_millis(50);
    assert!(time + slack >= before && time <= after + slack);
}
