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
