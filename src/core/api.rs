//! What the binding uses of the core beside its fronts (`front`) and `basics`: the values
//! that cross between them. scripts/check-layers.js holds every binding file to `front`,
//! `basics` and this list, so the rest of the core can change without the binding knowing.

pub use super::backend::direct::{AttemptForm, TxSupport};
/// Where a connection goes: the binding converts JS connection options into one.
pub use super::backend::endpoint::{Endpoint, EndpointSpec};
/// One command on a `memory://` keyspace, for tests that read and write beside the locks.
pub use super::backend::memory::command as memory_command;
/// A call carried on the JS thread's own socket: the core says what it writes, what a reply
/// means and what follows; `direct` opens that socket.
pub use super::ops::carried::{Carried, Later, Step};
/// A lock handed to a JS caller that has not claimed it yet: freed if nobody will.
pub use super::ops::delivery::Unclaimed;
pub use super::ops::direct;
/// News of a held lock for its listeners, and the JS loop's beat.
pub use super::ops::signals::{Confirmed, Heartbeat, Sink};
/// On whose behalf calls run (a JS environment, ended with it).
pub use super::wait::owner::Owner;
/// A call as a waiter that a release on its own thread may answer.
pub use super::wait::wake::Caller;
