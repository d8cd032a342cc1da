//! The lock engine: Redis, tokio and time, and nothing of JavaScript. Six layers, each
//! using only itself and the ones below it (see ARCHITECTURE.md, checked by
//! scripts/check-layers.js): `front` (one per public API) over `ops` (the lock operations)
//! over `wait` (waiters and owners, plain state) over `backend` (what runs our scripts)
//! over `proto` (what each operation sends and what its reply means) over `basics`. `api` names what the binding may use beside the fronts and basics.

pub mod api;
pub mod backend;
pub mod basics;
pub mod front;
pub mod ops;
pub mod proto;
pub mod wait;
