//! The #[napi] layer: converts arguments, calls the core, maps errors. No lock logic here.

pub mod admin;
pub mod cancel;
pub mod connection;
pub mod diagnostics;
pub mod distributed_lock;
pub mod error;
pub mod events;
pub mod exclusive_lock;
pub mod handle;
pub mod heartbeat;
pub mod js;
pub mod lock_service;
pub mod options;
pub mod runtime;
pub mod stats;
pub mod syncguard;
pub mod syncguard_eval;
pub mod sys;
pub mod ticker;
