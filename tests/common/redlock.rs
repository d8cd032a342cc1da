// Each test binary that takes this module by path uses only part of it.
#![allow(dead_code)]

//! Independent redis-servers for a Redlock, each on a free port and stopped by its pid.
//! Not in `common/mod.rs`, which the library's unit tests include too: the Redlock tests
//! take it by path.

use crate::common::RedisServer;
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use std::time::Duration;

pub fn servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start()).collect()
}

/// A Redlock over `servers`. Settings that differ in anything (here the connect timeout)
/// get connections of their own, as another process would have.
pub fn endpoint(servers: &[RedisServer], timeout: Duration) -> Endpoint {
    let nodes = servers
        .iter()
        .map(|server| {
            Endpoint::from_spec(EndpointSpec {
                url: Some(server.url()),
                connect_timeout: Some(timeout),
                ..Default::default()
            })
            .expect("endpoint")
        })
        .collect();
    Endpoint::redlock(nodes, "redis").expect("redlock endpoint")
}

/// A seed from `REDLOCK_SEED`, else the clock; printed, so a failure can be replayed.
pub fn seed() -> u64 {
    let seed = std::env::var("REDLOCK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("REDLOCK_SEED={seed}");
    seed
}

/// xorshift64*.
pub struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
