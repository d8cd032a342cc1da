//! The #[napi] layer: converts arguments, calls the core, maps errors. No lock logic here.

pub mod cancel;
pub mod completions;
pub mod connection;
pub mod diagnostics;
pub mod direct;
pub mod distributed_lock;
pub mod error;
pub mod events;
pub mod exclusive_lock;
pub mod handle;
pub mod heartbeat;
pub mod lock_service;
pub mod options;
pub mod promises;
pub mod reply;
pub mod runtime;
pub mod sys;
pub mod teardown;
pub mod ticker;
