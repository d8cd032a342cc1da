//! The JS-thread runtime: how a JS thread's calls are answered. Each file uses only those
//! before it (scripts/check-layers.js keeps it so), and outside this folder only `sys`,
//! `error` and `runtime`:
//! `outcome` (how a call ended) < `in_call` (a call answered inside the JS call that made
//! it) < `thread` (its promises, settled on the JS thread) <
//! `settle` (the runtime's side of them) < `socket` (the JS thread's own connection) <
//! `responder` (the `Reply` the fronts answer through) < `teardown` (the end of a JS
//! environment) < `completions` (`NativeCompletions`, which puts them together).

pub mod completions;
pub mod in_call;
pub mod outcome;
pub mod responder;
pub mod settle;
pub mod socket;
pub mod teardown;
pub mod thread;
