//! What a Redis Cluster's connection sends again by itself (a real 3-master cluster started on
//! loopback, stopped by pid): an extend whose reply is lost with its connection, after the
//! master ran it, is not run a second time, yet one turned away by an ASK still goes where
//! its key went; and a lock's server time is its own master's.

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use cluster::RedisCluster;
use common::calls;
use native_redis_lock::core::api::{scripts, Attempt, LockStore, Locker, Store};
use native_redis_lock::core::basics::keys;
use native_redis_lock::core::basics::lease::Lease;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "rs:";

fn locker(cluster: &RedisCluster) -> Locker {
    Locker::new(Store::shared(cluster.endpoint(MS(2000))), PREFIX, MS(2000))
}

async fn take(locks: &Locker, key: &str, ttl: Duration) -> Lease {
    match locks.attempt(key, ttl).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} unexpectedly held"),
    }
}

/// One cluster for every case (starting one costs seconds on two cores).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_runs_an_extend_once_and_times_a_lock_on_its_master() {
    let cluster = RedisCluster::start(3, 0);
    let masters = cluster.master_ports();
    assert_eq!(masters.len(), 3);
    the_time_of_a_key_is_its_masters(&cluster, &masters).await;
    an_extend_follows_an_ask_while_its_slot_migrates(&cluster, &masters).await;
    an_extend_whose_reply_is_lost_runs_once(&cluster, &masters).await;
}

/// TIME for a lock key runs on the master of its slot, whichever master that is.
async fn the_time_of_a_key_is_its_masters(cluster: &RedisCluster, masters: &[u16]) {
    let locks = locker(cluster);
    let backend = locks.store().backend();
    let times = || -> Vec<i64> {
        masters
            .iter()
            .map(|&port| calls(&mut cluster.node(port).raw(), "time"))
            .collect()
    };
    for (i, &port) in masters.iter().enumerate() {
        let key = format!("{PREFIX}{}", cluster.key_on(port, PREFIX, "time:"));
        for _ in 0..3 {
            let before = times();
            let wall = std::time::SystemTime::now();
            let time = backend
                .server_time(key.as_bytes(), MS(2000))
                .await
                .expect("TIME");
            let slack = MS(5000);
            assert!(time + slack >= wall && time <= std::time::SystemTime::now() + slack);
            let after = times();
            let mut expected = before.clone();
            expected[i] += 1;
            assert_eq!(after, expected, "TIME of {key} ran on {port} alone");
        }
    }
}

/// The lock's slot is being moved and its keys already went: its master answers ASK, which
/// the connection that retries nothing follows itself (ASKING on the importing node), once.
/// Once the slot has moved, the lock's TIME is the new master's.
async fn an_extend_follows_an_ask_while_its_slot_migrates(cluster: &RedisCluster, masters: &[u16]) {
    let (from, to) = (masters[1], masters[2]);
    let key = cluster.key_on(from, PREFIX, "ask:");
    let lock_key = format!("{PREFIX}{key}");
    let slot = keys::slot(lock_key.as_bytes());
    let locks = locker(cluster);
    let lease = take(&locks, &key, MS(5000)).await;
    let id = |port: u16| -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut cluster.node(port).raw())
            .expect("CLUSTER MYID")
    };
    let setslot = |port: u16, state: &str, node: &str| {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(state)
            .arg(node)
            .query(&mut cluster.node(port).raw())
            .expect("CLUSTER SETSLOT");
    };
    setslot(to, "IMPORTING", &id(from));
    setslot(from, "MIGRATING", &id(to));
    let moving: Vec<Vec<u8>> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query(&mut cluster.node(from).raw())
        .expect("GETKEYSINSLOT");
    assert!(
        moving.contains(&lock_key.clone().into_bytes()),
        "{moving:?}"
    );
    let _: () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(to)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(&moving)
        .query(&mut cluster.node(from).raw())
        .expect("MIGRATE");

    locks
        .extend(&lease, MS(20_000))
        .await
        .expect("extend while the slot migrates");
    // The importing node serves the slot to a connection that asked first.
    let (ttl,): (i64,) = redis::pipe()
        .cmd("ASKING")
        .ignore()
        .cmd("PTTL")
        .arg(&lock_key)
        .query(&mut cluster.node(to).raw())
        .expect("PTTL");
    assert!((20_000..=25_000).contains(&ttl), "extended once: {ttl}");

    for &port in masters {
        setslot(port, "NODE", &id(to));
    }
    // The connection's slot map still names the old master: its TIME follows the MOVED.
    let times = || {
        (
            calls(&mut cluster.node(from).raw(), "time"),
            calls(&mut cluster.node(to).raw(), "time"),
        )
    };
    let before = times();
    locks
        .store()
        .backend()
        .server_time(lock_key.as_bytes(), MS(2000))
        .await
        .expect("TIME after the move");
    assert_eq!(
        times(),
        (before.0, before.1 + 1),
        "TIME ran on the new master"
    );
    assert!(locks.release(&lease).await.expect("release after the move"));
}

/// The master of the lock is reached through a proxy it announces as its address, which
/// passes an EXTEND to it and then closes the connection in place of the reply: the master
/// ran it, the client cannot know. The crate's own retry would send it again on a new
/// connection (adding the time twice); the call must rather fail, the extend run once.
async fn an_extend_whose_reply_is_lost_runs_once(cluster: &RedisCluster, masters: &[u16]) {
    let port = masters[0];
    let key = cluster.key_on(port, PREFIX, "cut:");
    let lock_key = format!("{PREFIX}{key}");
    let cut = ReplyCut::start(port, scripts::EXTEND.get_hash().as_bytes().to_vec()).await;
    announce(cluster, port, cut.port);

    let locks = locker(cluster);
    let lease = take(&locks, &key, MS(5000)).await;
    // A first extend opens the connection it goes on; the cut is armed after it.
    locks.extend(&lease, MS(1000)).await.expect("extend");
    let ran = || {
        calls(&mut cluster.node(port).raw(), "evalsha")
            + calls(&mut cluster.node(port).raw(), "eval")
    };
    let before = ran();
    cut.arm();
    let extended = locks.extend(&lease, MS(60_000)).await;
    assert!(cut.fired(), "the proxy cut the extend's reply");
    let after = ran();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&lock_key)
        .query(&mut cluster.node(port).raw())
        .expect("PTTL");
    assert_eq!(
        after - before,
        1,
        "the extend ran once: {extended:?}, ttl {ttl}"
    );
    assert!(
        (55_000..=66_000).contains(&ttl),
        "60 s added once to about 6 s: {ttl} ({extended:?})"
    );
    // Nobody can tell whether a lost reply's extend ran: it is an error, not a success.
    assert!(extended.is_err(), "{extended:?}");
    assert_eq!(
        cluster.get(port, lock_key.as_bytes()),
        Some(lease.token.clone())
    );
    // The node is reached again at once: nothing of the connection's is left broken.
    locks
        .extend(&lease, MS(1000))
        .await
        .expect("extend after the cut");
    assert!(locks.release(&lease).await.expect("release"));
    announce(cluster, port, port);
}

/// Has the master at `port` announce `to` as its port, and waits until every node says so.
fn announce(cluster: &RedisCluster, port: u16, to: u16) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("cluster-announce-port")
        .arg(if to == port { 0 } else { to })
        .query(&mut cluster.node(port).raw())
        .expect("CONFIG SET cluster-announce-port");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = cluster.nodes.iter().all(|node| {
            let nodes: String = redis::cmd("CLUSTER")
                .arg("NODES")
                .query(&mut node.raw())
                .unwrap_or_default();
            nodes
                .lines()
                .any(|line| line.contains(&format!(":{to}@")) && (line.contains("master")))
        });
        if seen {
            return;
        }
        assert!(Instant::now() < deadline, "{to} was not announced");
        std::thread::sleep(MS(50));
    }
}

/// A loopback proxy to one node that, once armed, lets the next request carrying `marker`
/// through and closes that connection instead of passing its reply on.
struct ReplyCut {
    port: u16,
    armed: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
    accepting: tokio::task::JoinHandle<()>,
}

impl ReplyCut {
    async fn start(upstream: u16, marker: Vec<u8>) -> ReplyCut {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let armed = Arc::new(AtomicBool::new(false));
        let fired = Arc::new(AtomicBool::new(false));
        let (a, f) = (armed.clone(), fired.clone());
        let marker = Arc::new(marker);
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await {
                    tokio::spawn(pipe(client, server, marker.clone(), a.clone(), f.clone()));
                }
            }
        });
        ReplyCut {
            port,
            armed,
            fired,
            accepting,
        }
    }

    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for ReplyCut {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn pipe(
    client: TcpStream,
    server: TcpStream,
    marker: Arc<Vec<u8>>,
    armed: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let doomed = Arc::new(AtomicBool::new(false));
    let marked = doomed.clone();
    let up = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from_client.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let chunk = &buf[..n];
            if chunk.windows(marker.len()).any(|w| w == marker.as_slice())
                && armed.swap(false, Ordering::SeqCst)
            {
                marked.store(true, Ordering::SeqCst);
            }
            if to_server.write_all(chunk).await.is_err() {
                break;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from_server.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if doomed.load(Ordering::SeqCst) {
            fired.store(true, Ordering::SeqCst);
            break;
        }
        if to_client.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    up.abort();
    let _ = to_client.shutdown().await;
}
