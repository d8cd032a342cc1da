//! What the binding and the Rust integration tests (`tests/`) use of the core beside its
//! fronts (`front`) and `basics`: the values that cross between them. scripts/check-layers.js
//! holds every binding file to `front`, `basics` and this list, and `tests/` to `basics` and
//! this list, so the rest of the core (plans, waiters, fast calls) can change without
//! either knowing.

/// A server's address and the connect bound used when the settings give none.
pub use super::backend::endpoint::{Address, DEFAULT_CONNECT_TIMEOUT};
/// Where a connection goes: the binding converts JS connection options into one.
pub use super::backend::endpoint::{Endpoint, EndpointSpec};
/// What keeps the locks, answering for each lock operation, and what it offers.
pub use super::backend::lock_store::{Caps, LockStore};
/// `memory://` calls run now on the caller's thread.
pub use super::backend::memory::MemoryInline;
/// One command on a `memory://` keyspace, for tests that read and write beside the locks,
/// and several as one transaction, for tests that hold it against Redis.
pub use super::backend::memory::{command as memory_command, transaction as memory_transaction};
/// When a connection's unanswered calls show its server silent (the JS thread's sockets
/// decide so as the runtime's connections do).
pub use super::backend::silences::SilenceBar;
/// The connection the fronts take.
pub use super::front::connection::LockConnection;
/// syncguard's backend, as the binding will call it (tests/syncguard_engine.rs drives it).
pub use super::front::syncguard::{
    ReleasedById, Syncguard, SyncguardCall, SyncguardGranted, SyncguardSettings, SyncguardWon,
};
/// syncguard's backend on a caller's object with only `eval`: each call's script and reply.
pub use super::front::syncguard_eval::{EvalCall, EvalWon, SyncguardEval};
/// What one attempt found.
pub use super::ops::attempt::Attempt;
/// A lock handed to a JS caller that has not claimed it yet: freed if nobody will.
pub use super::ops::delivery::Unclaimed;
pub use super::ops::direct;
/// One node's part of a call sent to every node of a Redlock on the JS thread's sockets.
pub use super::ops::fast::quorum::{NodeCall, Told};
pub use super::ops::fast::undo::UndoSent;
/// A fast call, sent on the JS thread's own socket: the core says what it writes, what a reply
/// means and what follows; `direct` opens that socket.
pub use super::ops::fast::{FastCall, Later, Step};
/// A call run where its caller is, on a `memory://` keyspace.
pub use super::ops::inline;
/// A connection's lock operations, one at a time (the tests drive them directly).
pub use super::ops::lock::Locker;
/// Which transport a call takes (the fronts ask; the binding offers the transports).
pub use super::ops::route::{Route, Way};
/// News of a held lock for its listeners, and the JS loop's beat.
pub use super::ops::signals::{Confirmed, Heartbeat, Sink};
/// The connection as the operations use it.
pub use super::ops::store::Store;
/// Refreshes of held locks.
pub use super::ops::watchdog::{Limits, Target, Watch, Watchdog};
/// How the JS thread's socket writes an attempt, as its server lets it.
pub use super::proto::acquire::{AttemptForm, TxSupport};
/// The Lua scripts, for tests that run them beside the locks.
pub use super::proto::scripts;
/// Script names by SHA1, for `DEBUG` lines of the JS thread's connection.
pub use super::proto::scripts::name_of as script_name;
/// On whose behalf calls run (a JS environment, ended with it).
pub use super::wait::owner::Owner;
/// How long a process keeps a lock before its release grants it on, and when a lock it freed
/// quietly is kicked to the ring (tests set a connection's own).
pub use super::wait::tenure::{TenureTerms, KICK_AFTER, TENURE};
/// How many hand-overs in a row within a process a release makes, in a ring, before it
/// grants the lock across.
pub use super::wait::wake::HANDOVER_CHAIN;
/// A call as a waiter that a release on its own thread may answer.
pub use super::wait::wake::{Caller, ClaimedTask, Parking, Parks};
