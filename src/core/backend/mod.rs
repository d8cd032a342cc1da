//! What keeps the locks: a connection that runs our scripts on the keys of one lock, plain
//! commands and pipelines, and delivers what the scripts publish. Nothing here knows locks,
//! waiters or the watchdog: published messages go to whoever installed the listener.

pub mod boundary;
pub mod direct;
pub mod endpoint;
pub mod link;
pub mod memory;
pub mod mismatch;
