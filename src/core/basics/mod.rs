//! Small utilities the other layers share: errors and input checks, key names, time, tokens,
//! back-off, leases, locking helpers, RESP parsing, background tasks, paged tables. They use
//! only each other.

pub mod background;
pub mod backoff;
pub mod cancel;
pub mod clock;
pub mod drops;
pub mod error;
pub mod glob;
pub mod key_counts;
pub mod keys;
pub mod lease;
pub mod pace;
pub mod pages;
pub mod resp;
pub mod slots;
pub mod stats;
pub mod sync;
pub mod token;
pub mod trace;
pub mod validate;

/// A private redis-server for the unit tests of every layer, as the integration tests start
/// one.
#[cfg(test)]
#[path = "../../../tests/common/mod.rs"]
pub(crate) mod test_server;
