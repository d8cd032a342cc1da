//! Values on Lua's stack as Redis converts them, on Lua's C API: a command's reply pushed as
//! a script sees it, a script's result read as the reply Redis sends, KEYS and ARGV set. mlua
//! would take a registry reference for every value crossing; these read and push in place.

use super::number::format_g17;
use super::reply::MemoryReply;
use mlua::ffi;
use std::ffi::{c_int, CStr};

/// Deeper replies than this are cut short: a table that contains itself must not overflow
/// the stack.
const MAX_DEPTH: usize = 1000;

/// What a script's run came to.
pub(super) enum ScriptOutcome {
    Done(MemoryReply),
    Failed {
        err: String,
        source: Option<String>,
        line: Option<i64>,
    },
}

/// The bytes of the string at `index`.
///
/// # Safety
/// The value at `index` is a string; the slice lives as long as it stays on the stack.
pub(super) unsafe fn bytes_at<'a>(state: *mut ffi::lua_State, index: c_int) -> &'a [u8] {
    // SAFETY: a Lua string is `len` bytes at `text`, never moved while it is reachable.
    unsafe {
        let mut len = 0;
        let text = ffi::lua_tolstring(state, index, &mut len);
        if text.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(text.cast::<u8>(), len)
    }
}

/// # Safety
/// `state` has a free stack slot.
pub(super) unsafe fn push_bytes(state: *mut ffi::lua_State, bytes: &[u8]) {
    // SAFETY: Lua copies the `len` bytes at the pointer.
    unsafe { ffi::lua_pushlstring_(state, bytes.as_ptr().cast(), bytes.len()) }
}

/// `{err = text}`, as Redis hands a failed command's error to Lua.
///
/// # Safety
/// `state` has two free stack slots.
pub(super) unsafe fn push_error_table(state: *mut ffi::lua_State, text: &str) {
    // SAFETY: a new table, then its one field.
    unsafe {
        ffi::lua_createtable(state, 0, 1);
        push_bytes(state, b"err");
        push_bytes(state, text.as_bytes());
        ffi::lua_rawset(state, -3);
    }
}

/// A Redis reply as Redis gives it to Lua (RESP2): integer -> number, bulk -> string,
/// nil -> false, array -> table, status -> {ok=..}, error -> {err=..}.
///
/// # Safety
/// `state` has two free stack slots; each level of an array checks for its own.
pub(super) unsafe fn push_reply(state: *mut ffi::lua_State, reply: MemoryReply, depth: usize) {
    // SAFETY: each arm leaves exactly one value pushed.
    unsafe {
        match reply {
            MemoryReply::Int(n) => ffi::lua_pushnumber(state, n as f64),
            MemoryReply::Bulk(bytes) => push_bytes(state, &bytes),
            MemoryReply::Nil => ffi::lua_pushboolean(state, 0),
            MemoryReply::Status(text) => {
                ffi::lua_createtable(state, 0, 1);
                push_bytes(state, b"ok");
                push_bytes(state, text.as_bytes());
                ffi::lua_rawset(state, -3);
            }
            MemoryReply::Error(text) => push_error_table(state, &text),
            MemoryReply::Array(items) => {
                ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
                for (i, item) in items.into_iter().enumerate() {
                    let Ok(at) = c_int::try_from(i + 1) else {
                        break;
                    };
                    if depth >= MAX_DEPTH || ffi::lua_checkstack(state, 3) == 0 {
                        ffi::lua_pushboolean(state, 0);
                    } else {
                        push_reply(state, item, depth + 1);
                    }
                    ffi::lua_rawseti_(state, -2, at);
                }
            }
        }
    }
}

/// Sets the global `name` to a new sequence of `items`, as Redis sets KEYS and ARGV for each
/// script.
///
/// # Safety
/// `state` has three free stack slots.
pub(super) unsafe fn set_strings(state: *mut ffi::lua_State, name: &CStr, items: &[&[u8]]) {
    // SAFETY: the name, then the table, filled one string at a time, both taken by the
    // rawset.
    unsafe {
        push_bytes(state, name.to_bytes());
        ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
        for (i, item) in items.iter().enumerate() {
            let Ok(at) = c_int::try_from(i + 1) else {
                break;
            };
            push_bytes(state, item);
            ffi::lua_rawseti_(state, -2, at);
        }
        ffi::lua_rawset(state, ffi::LUA_GLOBALSINDEX);
    }
}

/// A script's result at `index` (absolute) as Redis replies it: number -> integer
/// (truncated), string -> bulk, true -> 1, false/nil -> nil, {err=..} -> error, {ok=..} ->
/// status, other tables -> array up to the first nil.
///
/// # Safety
/// `index` is an absolute index on `state`'s stack, which has a free slot.
pub(super) unsafe fn read_reply(
    state: *mut ffi::lua_State,
    index: c_int,
    depth: usize,
) -> MemoryReply {
    // SAFETY: every push here is popped before the next value is read.
    unsafe {
        match ffi::lua_type(state, index) {
            ffi::LUA_TSTRING => MemoryReply::Bulk(bytes_at(state, index).to_vec()),
            ffi::LUA_TBOOLEAN if ffi::lua_toboolean(state, index) != 0 => MemoryReply::Int(1),
            // `as` truncates towards zero and saturates, as near as Rust gets to C's cast.
            ffi::LUA_TNUMBER => MemoryReply::Int(ffi::lua_tonumber(state, index) as i64),
            ffi::LUA_TTABLE => {
                if let Some(err) = text_field(state, index, b"err") {
                    return MemoryReply::Error(err);
                }
                if let Some(ok) = text_field(state, index, b"ok") {
                    return MemoryReply::Status(ok);
                }
                if depth >= MAX_DEPTH || ffi::lua_checkstack(state, 2) == 0 {
                    return MemoryReply::error("ERR reached lua stack limit");
                }
                let mut items = Vec::new();
                for at in 1..c_int::MAX {
                    ffi::lua_rawgeti_(state, index, at);
                    if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
                        ffi::lua_pop(state, 1);
                        break;
                    }
                    items.push(read_reply(state, ffi::lua_gettop(state), depth + 1));
                    ffi::lua_pop(state, 1);
                }
                MemoryReply::Array(items)
            }
            _ => MemoryReply::Nil,
        }
    }
}

/// What a script that failed left at `index` (absolute): the error handler's table, or
/// (should the handler itself fail) a bare value.
///
/// # Safety
/// As `read_reply`.
pub(super) unsafe fn read_failure(state: *mut ffi::lua_State, index: c_int) -> ScriptOutcome {
    // SAFETY: as in `read_reply`.
    unsafe {
        if ffi::lua_type(state, index) != ffi::LUA_TTABLE {
            return ScriptOutcome::Failed {
                err: format!("ERR {}", describe(state, index)),
                source: None,
                line: None,
            };
        }
        let err = text_field(state, index, b"err");
        let source = text_field(state, index, b"source");
        push_bytes(state, b"line");
        ffi::lua_rawget_(state, index);
        let line = (ffi::lua_isnumber(state, -1) != 0).then(|| ffi::lua_tonumber(state, -1) as i64);
        ffi::lua_pop(state, 1);
        ScriptOutcome::Failed {
            err: err.unwrap_or_else(|| "ERR unknown error".to_owned()),
            source,
            line,
        }
    }
}

/// The field `name` of the table at `index` (absolute) as text, when it is a string or a
/// number (which Lua prints as text), as mlua read it before.
///
/// # Safety
/// As `read_reply`.
unsafe fn text_field(state: *mut ffi::lua_State, index: c_int, name: &[u8]) -> Option<String> {
    // SAFETY: the key is pushed, replaced by the field, and popped.
    unsafe {
        push_bytes(state, name);
        ffi::lua_rawget_(state, index);
        let text = match ffi::lua_type(state, -1) {
            ffi::LUA_TSTRING | ffi::LUA_TNUMBER => {
                Some(String::from_utf8_lossy(bytes_at(state, -1)).into_owned())
            }
            _ => None,
        };
        ffi::lua_pop(state, 1);
        text
    }
}

/// A value that is not an error table, in an error's words.
///
/// # Safety
/// As `read_reply`.
unsafe fn describe(state: *mut ffi::lua_State, index: c_int) -> String {
    // SAFETY: reads only; a number is copied before Lua prints it.
    unsafe {
        match ffi::lua_type(state, index) {
            ffi::LUA_TSTRING => String::from_utf8_lossy(bytes_at(state, index)).into_owned(),
            ffi::LUA_TNUMBER => {
                let n = ffi::lua_tonumber(state, index);
                // Whole numbers as integers, as mlua handed them over before.
                if n.fract() == 0.0 && n.abs() < 9.2e18 {
                    (n as i64).to_string()
                } else {
                    format_g17(n)
                }
            }
            ffi::LUA_TNIL => "nil".into(),
            kind => CStr::from_ptr(ffi::lua_typename(state, kind))
                .to_string_lossy()
                .into_owned(),
        }
    }
}
