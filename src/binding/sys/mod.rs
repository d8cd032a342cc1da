//! Every `unsafe` line of the binding: raw Node-API, libuv and libc, behind safe types whose
//! invariants hold inside. Nothing here knows of locks; the rest of the binding has no
//! `unsafe` (scripts/check-safety.js fails on any).

pub mod check;
pub mod env;
pub mod memory;
pub mod promise;
pub mod socket_poll;
pub mod timer;
pub mod uv;
pub mod waker;
