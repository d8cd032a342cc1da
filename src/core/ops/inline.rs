//! A call run where its caller is (`memory://`, see route.rs): written as for the caller's
//! socket, run at once on the embedded keyspace, and read by the very continuation a socket's
//! reply goes to (`FastCall::answered`), so each operation still means one thing whatever
//! carries it. Nothing here waits: no bound, no late reply, no broken connection.

use super::fast::FastCall;
use crate::core::backend::endpoint::{Address, Endpoint};
use crate::core::backend::memory::{Commands, MemoryInline};
use crate::core::proto::acquire::AttemptForm;
use redis::Value;
use std::cell::Cell;

/// The keyspace calls to `endpoint` run on inline, when it is one (`memory://`).
pub fn open(endpoint: &Endpoint) -> Option<MemoryInline> {
    match &endpoint.address {
        Address::Memory(name) => Some(MemoryInline::open(name)),
        _ => None,
    }
}

thread_local! {
    /// The thread's room for its calls' commands, reused: three allocations a call fewer. A
    /// call made while one runs (a listener's) finds it taken and makes its own.
    static ROOM: Cell<Commands> = Cell::new(Commands::new());
}

/// Runs `call`'s request on `memory` now: the reply its `answered` reads, after its
/// follow-up (if any) ran as a socket's would, behind it. A script the keyspace does not
/// know yet is refused as a socket's server refuses it, and the call goes on through the
/// runtime, which loads it.
pub fn reply_to<C: FastCall>(memory: &MemoryInline, call: &C) -> Value {
    // Written as the keyspace takes them: RESP written only to be read back here, and the
    // lists made for it, cost some 15 % of a pair's instructions (256 in flight).
    let mut commands = ROOM.try_with(Cell::take).unwrap_or_default();
    // As on a socket new to its server (`Untried`): a plain attempt goes as the
    // transaction, whose commands run natively where a script's would run in Lua, whose
    // calls into the keyspace cost most of a pair (about 15 us of CPU an acquire + release
    // pair with the script, 9 us with the transaction, 256 in flight); ExclusiveLock's as
    // the script, which writes its owner key at once, and which this keyspace runs natively
    // as well (memory/native.rs), as it runs the releases.
    call.write(&mut commands, AttemptForm::Untried);
    let reply = memory.run(&commands);
    commands.clear();
    let _kept = ROOM.try_with(|room| room.set(commands));
    let mut request = Vec::new();
    if call.follow_up(&reply, &mut request) {
        // Its reply is nobody's, as on a socket.
        let _counted = memory.run_now(&request);
    }
    reply
}
