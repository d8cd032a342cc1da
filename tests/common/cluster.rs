//! A Redis Cluster on loopback for the tests: 3 masters and a replica each, every node a
//! `RedisServer` on free ports (its bus port too), joined by `redis-cli --cluster create`,
//! stopped by pid when dropped. Taken by path, as `redlock.rs`.
#![allow(dead_code)]

use crate::common::RedisServer;
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

pub struct RedisCluster {
    /// Every node, masters first as `redis-cli` made them.
    pub nodes: Vec<RedisServer>,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

impl RedisCluster {
    pub fn start(masters: usize, replicas: usize) -> RedisCluster {
        let count = masters * (1 + replicas);
        let nodes: Vec<RedisServer> = (0..count)
            .map(|_| {
                let bus = free_port().to_string();
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "1000",
                    "--cluster-port",
                    &bus,
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("redis-cli must be installed to run these tests (it comes with redis-server)");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = RedisCluster { nodes };
        cluster.wait_ok(masters);
        cluster
    }

    /// Until every node says the cluster is ok, knows every master, and each replica's link
    /// to its master is up.
    fn wait_ok(&self, masters: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = self.nodes.iter().all(|node| {
                let mut raw = node.raw();
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut raw)
                    .unwrap_or_default();
                let replication: String = redis::cmd("INFO")
                    .arg("replication")
                    .query(&mut raw)
                    .unwrap_or_default();
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_size:{masters}"))
                    && (replication.contains("role:master")
                        || replication.contains("master_link_status:up"))
            });
            if ok && self.slot_map().len() == masters {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster did not become ok");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Each master's port and its slot ranges, as a node sees them.
    pub fn slot_map(&self) -> Vec<(u16, Vec<(u16, u16)>)> {
        for node in &self.nodes {
            let Ok(mut raw) = node.raw_checked() else {
                continue;
            };
            let Ok(slots) = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query::<Vec<redis::Value>>(&mut raw)
            else {
                continue;
            };
            let mut map: Vec<(u16, Vec<(u16, u16)>)> = Vec::new();
            for range in slots {
                let redis::Value::Array(parts) = range else {
                    continue;
                };
                let (
                    Some(redis::Value::Int(from)),
                    Some(redis::Value::Int(to)),
                    Some(redis::Value::Array(master)),
                ) = (parts.first(), parts.get(1), parts.get(2))
                else {
                    continue;
                };
                let Some(redis::Value::Int(port)) = master.get(1) else {
                    continue;
                };
                let port = *port as u16;
                match map.iter_mut().find(|(p, _)| *p == port) {
                    Some((_, ranges)) => ranges.push((*from as u16, *to as u16)),
                    None => map.push((port, vec![(*from as u16, *to as u16)])),
                }
            }
            map.sort();
            return map;
        }
        Vec::new()
    }

    /// The ports of the masters, in a stable order.
    pub fn master_ports(&self) -> Vec<u16> {
        self.slot_map().into_iter().map(|(port, _)| port).collect()
    }

    /// The port of the master serving `key`.
    pub fn master_of(&self, key: &[u8]) -> u16 {
        let slot = native_redis_lock::core::basics::keys::slot(key);
        self.slot_map()
            .into_iter()
            .find(|(_, ranges)| ranges.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
            .map(|(port, _)| port)
            .expect("every slot is served")
    }

    /// A key `<prefix><n>` whose `<lock prefix><key>` lives on the master at `port`.
    pub fn key_on(&self, port: u16, lock_prefix: &str, prefix: &str) -> String {
        (0..)
            .map(|n| format!("{prefix}{n}"))
            .find(|key| self.master_of(format!("{lock_prefix}{key}").as_bytes()) == port)
            .expect("some key lands on every master")
    }

    /// GET `key` on the node at `port` (which must serve it: no MOVED is followed).
    pub fn get(&self, port: u16, key: &[u8]) -> Option<String> {
        redis::cmd("GET")
            .arg(key)
            .query(&mut self.node(port).raw())
            .expect("GET")
    }

    /// Stops the node at `port` (SIGSTOP, by pid) until the guard drops.
    pub fn pause(&self, port: u16) -> Paused<'_> {
        let node = self.node(port);
        node.signal("-STOP");
        Paused(node)
    }

    /// Lets the live masters serve while one is marked failed with no replica to take over:
    /// its slots are then uncovered, and by default every master answers CLUSTERDOWN.
    pub fn allow_partial_coverage(&self) {
        for port in self.master_ports() {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("cluster-require-full-coverage")
                .arg("no")
                .query(&mut self.node(port).raw())
                .expect("CONFIG SET");
        }
    }

    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .expect("a node of the cluster")
    }

    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }

    pub fn endpoint(&self, timeout: Duration) -> Endpoint {
        Endpoint::from_spec(EndpointSpec {
            url: Some(self.url()),
            connect_timeout: Some(timeout),
            ..Default::default()
        })
        .expect("cluster endpoint")
    }
}

/// Sends SIGCONT when dropped, so a failing assertion never leaves a node stopped.
pub struct Paused<'a>(&'a RedisServer);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.signal("-CONT");
    }
}
