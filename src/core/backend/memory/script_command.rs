//! `redis.call` / `redis.pcall`'s Rust side, on Lua's C API: the arguments read where they lie
//! on Lua's stack, the command run on the keyspace lent to the script, and its reply pushed
//! as Redis gives it to Lua. Through mlua's callbacks each argument and each reply value took
//! a registry reference of its own: a `memory://` acquire + release spent more there than in
//! the commands themselves.

use super::keyspace::{command_name, Keyspace};
use super::number::format_g17;
use super::reply::MemoryReply;
use super::script_stack::{bytes_at, push_bytes, push_error_table, push_reply};
use mlua::ffi;
use std::cell::Cell;
use std::ffi::{c_int, CStr};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Redis names every script's chunk so; errors point into it ("@user_script:12").
pub(super) const CHUNK_NAME: &str = "@user_script";

thread_local! {
    /// The keyspace of the script running on this thread, null when none: a script runs
    /// start to end on the thread that called it, holding its keyspace's lock.
    static LENT: Cell<*mut Keyspace> = const { Cell::new(std::ptr::null_mut()) };
}

/// Lends a keyspace to the script about to run on this thread (`redis.call` finds it), for
/// as long as the loan lives, however the script ends.
pub(super) struct KeyspaceLoan<'a> {
    previous: *mut Keyspace,
    _keyspace: PhantomData<&'a mut Keyspace>,
}

impl<'a> KeyspaceLoan<'a> {
    pub(super) fn new(keyspace: &'a mut Keyspace) -> Self {
        let previous = LENT.with(|lent| lent.replace(keyspace));
        KeyspaceLoan {
            previous,
            _keyspace: PhantomData,
        }
    }
}

impl Drop for KeyspaceLoan<'_> {
    fn drop(&mut self) {
        LENT.with(|lent| lent.set(self.previous));
    }
}

/// `raw(raising, command, args...)`, called by the prelude's `redis.call` and
/// `redis.pcall`: pushes `true, reply`, or `false, error table` (with where in the script the
/// command was called, when `raising`).
///
/// # Safety
/// Called by Lua only, as a C function: `state` is the running thread, with the arguments on
/// its stack.
pub(super) unsafe extern "C-unwind" fn raw_command(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua calls this with a valid state and at least LUA_MINSTACK free slots (two
    // pushes here; `push_reply` checks the stack for more); the strings read stay on the
    // stack, so alive, until the command has run. Only a memory error (longjmp) can leave
    // midway, leaking the reply being pushed.
    unsafe {
        let raising = ffi::lua_toboolean(state, 1) != 0;
        match run_command(state) {
            MemoryReply::Error(text) => {
                ffi::lua_pushboolean(state, 0);
                push_error_table(state, &text);
                if raising {
                    // Level 0 is this function, 1 the Lua side of redis.call.
                    if let Some(line) = script_line(state, 2) {
                        push_bytes(state, b"source");
                        push_bytes(state, CHUNK_NAME.as_bytes());
                        ffi::lua_rawset(state, -3);
                        push_bytes(state, b"line");
                        ffi::lua_pushnumber(state, f64::from(line));
                        ffi::lua_rawset(state, -3);
                    }
                }
            }
            reply => {
                ffi::lua_pushboolean(state, 1);
                push_reply(state, reply, 0);
            }
        }
        2
    }
}

/// The command whose name and arguments follow the flag on the stack, run on the lent
/// keyspace.
///
/// # Safety
/// `state` is a running thread whose stack holds `raw`'s arguments.
unsafe fn run_command(state: *mut ffi::lua_State) -> MemoryReply {
    // SAFETY: indexes from 2 to the top are on the stack; the strings read there live until
    // this returns.
    unsafe {
        let top = ffi::lua_gettop(state);
        if top < 2 {
            return MemoryReply::error(
                "ERR Please specify at least one argument for this redis lib call",
            );
        }
        // Lua numbers are doubles, printed as Redis prints them (`%.17g`).
        let mut numbers = Vec::new();
        for index in 2..=top {
            match ffi::lua_type(state, index) {
                ffi::LUA_TSTRING => {}
                ffi::LUA_TNUMBER => numbers.push(format_g17(ffi::lua_tonumber(state, index))),
                _ => {
                    return MemoryReply::error(
                        "ERR Lua redis lib command arguments must be strings or integers",
                    )
                }
            }
        }
        let mut numbers = numbers.iter();
        let mut argv: Vec<&[u8]> = Vec::with_capacity(usize::try_from(top - 1).unwrap_or(0));
        for index in 2..=top {
            if ffi::lua_type(state, index) == ffi::LUA_TSTRING {
                argv.push(bytes_at(state, index));
            } else {
                argv.push(numbers.next().map_or(&b""[..], |text| text.as_bytes()));
            }
        }
        let keyspace = LENT.with(Cell::get);
        if keyspace.is_null() {
            return MemoryReply::error("ERR no keyspace for this script");
        }
        // SAFETY: a `KeyspaceLoan` on this thread set it from a `&mut Keyspace` that it holds
        // for the whole script, and nothing else touches that keyspace meanwhile.
        let keyspace = &mut *keyspace;
        // A bug of ours must come back as an error reply, not unwind through Lua.
        catch_unwind(AssertUnwindSafe(|| script_command(keyspace, &argv)))
            .unwrap_or_else(|_| MemoryReply::error("ERR internal error in the memory:// backend"))
    }
}

/// Commands a script may not send (Redis refuses them with the same words).
fn script_command(keyspace: &mut Keyspace, argv: &[&[u8]]) -> MemoryReply {
    let mut buf = [0; 32];
    match &*command_name(argv[0], &mut buf) {
        "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO" | "SCRIPT" | "MULTI" | "EXEC"
        | "SUBSCRIBE" | "SSUBSCRIBE" | "PSUBSCRIBE" | "UNSUBSCRIBE" | "SUNSUBSCRIBE"
        | "PUNSUBSCRIBE" | "WATCH" | "CLIENT" | "HELLO" => {
            MemoryReply::error("ERR This Redis command is not allowed from script")
        }
        _ => keyspace.execute(argv),
    }
}

/// The line the stack frame `level` is at, if that frame is the script's own code.
///
/// # Safety
/// `state` is a running thread.
pub(super) unsafe fn script_line(state: *mut ffi::lua_State, level: c_int) -> Option<c_int> {
    // SAFETY: `lua_Debug` is a plain C struct (numbers, pointers, a char array), valid when
    // zeroed; Lua fills it, and `source` points at a string of the function, alive while the
    // frame is.
    unsafe {
        let mut debug: ffi::lua_Debug = std::mem::zeroed();
        if ffi::lua_getstack(state, level, &mut debug) == 0
            || ffi::lua_getinfo(state, c"Sl".as_ptr(), &mut debug) == 0
            || debug.source.is_null()
        {
            return None;
        }
        let ours = CStr::from_ptr(debug.source).to_bytes() == CHUNK_NAME.as_bytes();
        (ours && debug.currentline >= 0).then_some(debug.currentline)
    }
}
