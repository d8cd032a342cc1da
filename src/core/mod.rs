//! The lock engine: Redis, tokio and time, and nothing of JavaScript.

pub mod background;
pub mod backoff;
pub mod clock;
pub mod direct;
pub mod endpoint;
pub mod error;
pub mod exclusive;
pub mod forsaken;
pub mod keys;
pub mod lease;
pub mod lent;
pub mod lock;
pub mod memory;
pub mod owner;
pub mod pages;
pub mod release;
pub mod resp;
pub mod schedule;
pub mod scripts;
pub mod store;
pub mod sync;
pub mod token;
pub mod validate;
pub mod wake;
pub mod watchdog;
pub mod watched;
