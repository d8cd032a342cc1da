//! What each backend says it offers, and the clock it answers with.
use super::*;
use crate::core::backend::endpoint::EndpointSpec;
use crate::core::backend::fake_resp::Deaf;
use crate::core::backend::lock_store::{Caps, Fairness, FastPath, Fencing, Handover, WakeKind};

fn open(url: &str) -> Backend {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(url.into()),
        ..Default::default()
    })
    .unwrap();
    Backend::open(endpoint, Arc::new(Deaf))
}

#[test]
fn one_redis_offers_the_socket_memory_runs_inline_both_take_transactions() {
    let redis = open("redis://127.0.0.1:1").caps();
    assert!(matches!(open("redis://127.0.0.1:1"), Backend::Redis(_)));
    assert_eq!(redis.fast_path, FastPath::Socket);
    assert!(redis.transactions);
    let memory = open("memory://caps").caps();
    assert!(matches!(open("memory://caps"), Backend::Memory(_)));
    assert_eq!(memory.fast_path, FastPath::Inline);
    assert!(memory.transactions);
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
    let time = memory
        .server_time(b"k", Duration::from_secs(1))
        .await
        .unwrap();
    let after = SystemTime::now();
    let slack = Duration::from_millis(50);
    assert!(time + slack >= before && time <= after + slack);
}

#[test]
fn a_redlock_of_independent_masters_offers_quorum_fences_and_a_socket_per_node_when_all_allow_one()
{
    let node = |port: u16| {
        Endpoint::from_spec(EndpointSpec {
            url: Some(format!("redis://127.0.0.1:{port}")),
            ..Default::default()
        })
        .unwrap()
    };
    let endpoint = Endpoint::redlock(vec![node(1), node(2), node(3)], "redis").unwrap();
    let redlock = Backend::open(endpoint, Arc::new(Deaf));
    assert!(matches!(redlock, Backend::Redlock(_)));
    let caps = redlock.caps();
    assert_eq!(caps.fencing, Fencing::Quorum);
    assert_eq!(caps.handover, Handover::Quorum);
    assert_eq!(caps.fairness, Fairness::None);
    assert_eq!(caps.fast_path, FastPath::Quorum);
    assert_eq!(caps.wake, WakeKind::Broadcast);
    assert!(caps.transactions);
    // One node over TLS (or a Unix socket) has no JS-thread socket: the runtime carries all.
    let tls = Endpoint::from_spec(EndpointSpec {
        url: Some("rediss://127.0.0.1:4".into()),
        ..Default::default()
    })
    .unwrap();
    let endpoint = Endpoint::redlock(vec![node(1), node(2), tls], "redis").unwrap();
    let redlock = Backend::open(endpoint, Arc::new(Deaf));
    assert_eq!(redlock.caps().fast_path, FastPath::None);
}

#[test]
fn a_redlock_refuses_fewer_than_three_nodes_the_same_server_twice_and_memory_naming_the_argument() {
    let spec = |url: &str| {
        Endpoint::from_spec(EndpointSpec {
            url: Some(url.into()),
            ..Default::default()
        })
        .unwrap()
    };
    let refused = |nodes: Vec<Endpoint>| match Endpoint::redlock(nodes, "redis") {
        Err(LockError::Invalid { arg, message, .. }) => (arg, message),
        other => panic!(
            "expected a refusal, got {:?}",
            other.map(|e| format!("{e:?}"))
        ),
    };
    let (arg, message) = refused(vec![]);
    assert_eq!(arg, "redis");
    assert!(message.contains("at least 3"), "{message}");
    let two = vec![
        spec("redis://127.0.0.1:7001"),
        spec("redis://127.0.0.1:7002"),
    ];
    let (_, message) = refused(two);
    assert!(message.contains("got 2"), "{message}");
    let a = spec("redis://127.0.0.1:7001");
    let (_, message) = refused(vec![a.clone(), spec("redis://127.0.0.1:7002"), a]);
    assert!(
        message.contains("redis[2]") && message.contains("same server"),
        "{message}"
    );
    // The same server however written: localhost for the loopback, an IPv4-mapped IPv6.
    for (first, again) in [
        ("redis://127.0.0.1:7001", "redis://localhost:7001"),
        ("redis://LOCALHOST.:7001", "redis://[::1]:7001"),
        ("redis://10.0.0.5:7001", "redis://[::ffff:10.0.0.5]:7001"),
        (
            "redis://Redis-A.example:7001",
            "redis://redis-a.example.:7001/2",
        ),
    ] {
        let nodes = vec![spec(first), spec("redis://127.0.0.1:7002"), spec(again)];
        let (_, message) = refused(nodes);
        assert!(message.contains("redis[2]"), "{first} {again}: {message}");
    }
    let distinct = [
        "redis://127.0.0.1:7001",
        "redis://127.0.0.2:7001",
        "redis://localhost:7002",
    ];
    assert!(Endpoint::redlock(distinct.map(spec).to_vec(), "redis").is_ok());
    let memory = vec![
        spec("memory://x"),
        spec("redis://127.0.0.1:7002"),
        spec("redis://127.0.0.1:7003"),
    ];
    let (_, message) = refused(memory);
    assert!(message.contains("redis[0]"), "{message}");
}

/// ARCHITECTURE.md's "Where the next backends plug in", as the code answers it: a Sentinel
/// set's master is one Redis kept off the JS thread (the master may move under a socket);
/// a cluster keeps every call on the runtime and takes no transaction.
#[test]
fn sentinel_and_cluster_offer_what_architecture_says() {
    let sentinel = open("redis+sentinel://127.0.0.1:1/mymaster");
    assert!(
        matches!(sentinel, Backend::Redis(_)),
        "no variant of its own"
    );
    let caps = sentinel.caps();
    assert_strict_line_off_the_js_thread(caps);
    assert_eq!(caps.wake, WakeKind::QueueChecked);
    assert!(caps.transactions);
    let cluster = open("redis+cluster://127.0.0.1:1,127.0.0.1:2");
    assert!(matches!(cluster, Backend::Cluster(_)));
    let caps = cluster.caps();
    assert_strict_line_off_the_js_thread(caps);
    assert_eq!(caps.wake, WakeKind::Queue);
    assert!(!caps.transactions);
}

/// What Sentinel and Cluster share: strict fences, hand-over in the script, a fair line, and
/// every call on the runtime.
fn assert_strict_line_off_the_js_thread(caps: Caps) {
    assert_eq!(
        (caps.fencing, caps.handover, caps.fairness, caps.fast_path),
        (
            Fencing::Strict,
            Handover::InScript,
            Fairness::Line,
            FastPath::None
        )
    );
}
