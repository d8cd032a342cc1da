//! A Sentinel set for the Rust tests: a master, a replica and three sentinels (each
//! `redis-server <conf> --sentinel`: the machine has no redis-sentinel binary), on free
//! loopback ports, stopped by pid when dropped. Taken by path, as `common/redlock.rs` is.

use crate::common::{free_port, RedisServer};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const NAME: &str = "mymaster";

pub struct Sentinel {
    pub port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct SentinelSet {
    pub servers: Vec<RedisServer>,
    pub sentinels: Vec<Sentinel>,
}

fn raw(port: u16) -> Option<redis::Connection> {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .ok()?
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()
}

/// Polls `check` every 50 ms until it holds, or panics after `within`.
pub fn until(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Sentinel {
    fn start(master_port: u16) -> Sentinel {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("nrl-sentinel-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let conf = dir.join("sentinel.conf");
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel resolve-hostnames no\n\
             sentinel monitor {NAME} 127.0.0.1 {master_port} 2\n\
             sentinel down-after-milliseconds {NAME} 1000\nsentinel failover-timeout {NAME} 3000\n",
            dir.display()
        );
        std::fs::write(&conf, text).expect("sentinel.conf");
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server must be installed to run these tests");
        Sentinel { port, child, dir }
    }

    /// The master's port this sentinel names now.
    pub fn master_port(&self) -> Option<u16> {
        let mut con = raw(self.port)?;
        let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(NAME)
            .query(&mut con)
            .ok()?;
        addr.map(|(_, port)| port)
    }

    fn knows(&self, what: &str) -> usize {
        let Some(mut con) = raw(self.port) else {
            return 0;
        };
        let listed: redis::RedisResult<Vec<redis::Value>> =
            redis::cmd("SENTINEL").arg(what).arg(NAME).query(&mut con);
        listed.map(|l| l.len()).unwrap_or(0)
    }
}

impl SentinelSet {
    /// Ready when every sentinel names the master and knows the replica and the two others.
    pub fn start() -> SentinelSet {
        let master = RedisServer::start();
        let master_port = master.port.to_string();
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master_port]);
        let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(master.port)).collect();
        let set = SentinelSet {
            servers: vec![master, replica],
            sentinels,
        };
        let port = set.servers[0].port;
        until(
            Duration::from_secs(20),
            "the sentinels found the set",
            || {
                set.sentinels.iter().all(|s| {
                    s.master_port() == Some(port)
                        && s.knows("replicas") == 1
                        && s.knows("sentinels") == 2
                })
            },
        );
        set
    }

    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{NAME}", hosts.join(","))
    }

    /// The data server on `port`.
    pub fn server(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|s| s.port == port)
            .expect("a server of the set")
    }

    /// `SENTINEL FAILOVER`, then waits until every sentinel names another master that says it
    /// is one; its port.
    pub fn failover(&self) -> u16 {
        let old = self.sentinels[0].master_port().expect("a master");
        let mut con = raw(self.sentinels[0].port).expect("a sentinel");
        let _: () = redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(NAME)
            .query(&mut con)
            .expect("SENTINEL FAILOVER");
        let mut new = 0;
        until(Duration::from_secs(15), "a replica was promoted", || {
            let ports: Vec<Option<u16>> =
                self.sentinels.iter().map(Sentinel::master_port).collect();
            let Some(Some(first)) = ports.first().copied() else {
                return false;
            };
            if first == old || ports.iter().any(|p| *p != Some(first)) {
                return false;
            }
            new = first;
            let role: redis::RedisResult<Vec<redis::Value>> = raw(first)
                .map(|mut c| redis::cmd("ROLE").query(&mut c))
                .unwrap_or_else(|| Ok(Vec::new()));
            matches!(role.ok().and_then(|r| r.into_iter().next()), Some(redis::Value::BulkString(b)) if b == b"master")
        });
        new
    }
}
