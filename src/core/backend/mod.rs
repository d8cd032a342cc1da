//! What keeps the locks, answering for each lock operation of `proto` (`LockStore`, with
//! `Caps` saying what it offers): one Redis server (`RedisStore` over `Link`) or `memory://`
//! (`MemoryStore`), chosen per endpoint (`Backend`). Nothing here knows waiters or the
//! watchdog: published messages go to whoever installed the listener.

pub mod boundary;
mod cluster_declared;
mod cluster_store;
mod cluster_wire;
pub mod direct;
pub mod endpoint;
pub mod endpoint_multi;
#[cfg(test)]
#[path = "fake_resp_tests.rs"]
mod fake_resp;
mod link;
pub mod lock_store;
pub mod memory;
pub mod mismatch;
mod quarantine;
pub mod redis_store;
mod redlock_book;
mod redlock_conclude;
mod redlock_detached;
pub mod redlock_late;
mod redlock_owed;
mod redlock_pool;
mod redlock_refresh;
pub mod redlock_store;
mod redlock_syncguard;
pub mod redlock_tally;
mod refusals;
mod sentinel;
pub mod silences;
mod staleness;
mod upstream;
pub mod wire;
