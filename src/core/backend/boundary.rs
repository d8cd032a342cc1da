//! The boundary between the lock operations and what keeps their locks: a connection that
//! runs our scripts (one atomic script per operation, on the keys of one lock), plain
//! commands and pipelines, and carries the wake-up messages the scripts publish. The
//! operations never look behind it. Today: one Redis server (the redis crate's multiplexed
//! ConnectionManager) and the embedded `memory://` keyspace, which runs the same scripts in
//! process. A Cluster, a Sentinel-watched master or Redlock's N masters are further kinds of
//! this connection: the operations need no change for them.

use super::memory::MemoryConnection;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

#[derive(Clone)]
pub enum Backend {
    Redis(ConnectionManager),
    Memory(MemoryConnection),
}

impl Backend {
    /// Starts receiving what the scripts publish on `channel` (see store.rs for who listens).
    pub async fn subscribe(&mut self, channel: &[u8]) -> RedisResult<()> {
        match self {
            // The manager subscribes again by itself after a reconnect.
            Backend::Redis(manager) => manager.subscribe(channel).await,
            Backend::Memory(memory) => {
                redis::cmd("SUBSCRIBE")
                    .arg(channel)
                    .exec_async(memory)
                    .await
            }
        }
    }

    pub async fn unsubscribe(&mut self, channels: Vec<Vec<u8>>) -> RedisResult<()> {
        match self {
            Backend::Redis(manager) => manager.unsubscribe(channels).await,
            Backend::Memory(memory) => {
                redis::cmd("UNSUBSCRIBE")
                    .arg(channels)
                    .exec_async(memory)
                    .await
            }
        }
    }
}

impl ConnectionLike for Backend {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Backend::Redis(manager) => manager.req_packed_command(cmd),
            Backend::Memory(memory) => memory.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Backend::Redis(manager) => manager.req_packed_commands(cmd, offset, count),
            Backend::Memory(memory) => memory.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Backend::Redis(manager) => manager.get_db(),
            Backend::Memory(memory) => memory.get_db(),
        }
    }
}
