//! Runs our Lua scripts the way Redis 7 does: Lua 5.1, `redis.call` / `redis.pcall` and the
//! reply helpers, KEYS and ARGV, and Redis's conversions between its replies and Lua values.
//! One Lua state per keyspace, used under the keyspace's lock, so a script is atomic. A
//! script's run and its commands go through Lua's C API (script_command.rs, script_stack.rs):
//! they are what every `memory://` call costs.

use super::keyspace::Keyspace;
use super::number::format_g17;
use super::reply::MemoryReply;
use super::script_command::{raw_command, KeyspaceLoan, CHUNK_NAME};
use super::script_stack::{read_failure, read_reply, set_strings, ScriptOutcome};
use mlua::{ffi, Function, Lua, LuaOptions, StdLib, Table, Value};
use std::borrow::Cow;
use std::collections::HashMap;

/// The `redis` table's Lua side: `call` raises a failed command's error table, `pcall` hands
/// it back; `raw` (Rust) runs the command and says which it was.
const PRELUDE: &str = r#"
local raw, error_reply, status_reply, sha1hex, handler = ...
local error = error
redis = {
  call = function(...)
    local ok, reply = raw(true, ...)
    if ok then return reply end
    error(reply)
  end,
  pcall = function(...)
    local _, reply = raw(false, ...)
    return reply
  end,
  error_reply = error_reply,
  status_reply = status_reply,
  sha1hex = sha1hex,
  replicate_commands = function() return true end,
  set_repl = function() end,
  log = function() end,
  setresp = function() end,
  REPL_ALL = 3, REPL_AOF = 1, REPL_REPLICA = 2, REPL_SLAVE = 2, REPL_NONE = 0,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
}
loadfile = nil
dofile = nil
local xpcall = xpcall
return function(f) return xpcall(f, handler) end
"#;

pub struct LuaHost {
    lua: Lua,
    runner: Function,
    scripts: HashMap<String, Function>,
}

/// The SHA-1 Redis knows a script by (what `redis::Script::get_hash` computes).
pub fn sha1_hex(source: &[u8]) -> String {
    sha1_smol::Sha1::from(source).digest().to_string()
}

impl LuaHost {
    pub fn new() -> mlua::Result<Self> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        // SAFETY: `raw_command` is a C function of Lua's own calling convention, reading
        // only its arguments and pushing its two results.
        let raw = unsafe { lua.create_c_function(raw_command)? };
        let error_reply = lua.create_function(|lua, text: mlua::LuaString| {
            error_table(lua, &error_reply_text(&text.as_bytes()))
        })?;
        let status_reply = lua.create_function(|lua, text: mlua::LuaString| {
            let table = lua.create_table()?;
            table.raw_set("ok", text)?;
            Ok(table)
        })?;
        let sha1hex =
            lua.create_function(|_, text: mlua::LuaString| Ok(sha1_hex(&text.as_bytes())))?;
        let handler = lua.create_function(error_handler)?;
        super::cjson::install(&lua)?;
        let runner: Function = lua.load(PRELUDE).set_name("=redis").call((
            raw,
            error_reply,
            status_reply,
            sha1hex,
            handler,
        ))?;
        Ok(LuaHost {
            lua,
            runner,
            scripts: HashMap::new(),
        })
    }

    /// Compiles and caches `source`; its SHA-1, or the error Redis gives for a script that
    /// does not compile.
    pub fn load(&mut self, source: &[u8]) -> Result<String, MemoryReply> {
        let sha = sha1_hex(source);
        if !self.scripts.contains_key(&sha) {
            let function = self
                .lua
                .load(source)
                .set_name(CHUNK_NAME)
                .into_function()
                .map_err(|err| {
                    let message = match err {
                        mlua::Error::SyntaxError { message, .. } => message,
                        other => other.to_string(),
                    };
                    MemoryReply::error(format!(
                        "ERR Error compiling script (new function): {message}"
                    ))
                })?;
            self.scripts.insert(sha.clone(), function);
        }
        Ok(sha)
    }

    pub fn exists(&self, sha: &str) -> bool {
        self.scripts.contains_key(&sha.to_ascii_lowercase())
    }

    pub fn flush(&mut self) {
        self.scripts.clear();
    }

    /// EVALSHA: runs a cached script against `keyspace`, atomically (the caller holds the
    /// keyspace's lock throughout).
    pub fn run(
        &self,
        keyspace: &mut Keyspace,
        sha: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> MemoryReply {
        // Clients send the SHA as `Script::get_hash` prints it, in lowercase: no copy then.
        let sha = match sha.bytes().any(|byte| byte.is_ascii_uppercase()) {
            true => Cow::Owned(sha.to_ascii_lowercase()),
            false => Cow::Borrowed(sha),
        };
        let Some(function) = self.scripts.get(&*sha) else {
            return MemoryReply::error("NOSCRIPT No matching script. Please use EVAL.");
        };
        keyspace.tick();
        let loan = KeyspaceLoan::new(keyspace);
        let mut outcome = None;
        // SAFETY: the closure runs protected, on the state's stack with the runner and the
        // script pushed (indexes 1 and 2), and leaves nothing on it.
        let called = unsafe {
            self.lua.exec_raw::<()>((&self.runner, function), |state| {
                outcome = Some(invoke(state, keys, args));
            })
        };
        drop(loan);
        let reply = match (called, outcome) {
            (Ok(()), Some(outcome)) => outcome,
            (Err(err), _) => ScriptOutcome::Done(MemoryReply::error(format!(
                "ERR Error running script (call to f_{sha}): {err}"
            ))),
            (Ok(()), None) => ScriptOutcome::Done(MemoryReply::error(format!(
                "ERR Error running script (call to f_{sha}): it did not run"
            ))),
        };
        match reply {
            ScriptOutcome::Done(reply) => reply,
            ScriptOutcome::Failed { err, source, line } => match (source, line) {
                (Some(source), Some(line)) => {
                    MemoryReply::Error(format!("{err} script: {sha}, on {source}:{line}."))
                }
                _ => MemoryReply::Error(err),
            },
        }
    }
}

/// Sets KEYS and ARGV, calls the runner (index 1) with the script (index 2), and reads what
/// came of it.
///
/// # Safety
/// Runs protected (`exec_raw`), with the runner and the script on `state`'s stack.
unsafe fn invoke(state: *mut ffi::lua_State, keys: &[&[u8]], args: &[&[u8]]) -> ScriptOutcome {
    // SAFETY: a protected C function has LUA_MINSTACK slots: 3 for each table set, 2 for the
    // call, its 2 results and a free slot to read them.
    unsafe {
        set_strings(state, c"KEYS", keys);
        set_strings(state, c"ARGV", args);
        ffi::lua_pushvalue(state, 1);
        ffi::lua_pushvalue(state, 2);
        ffi::lua_call(state, 1, 2);
        let value = ffi::lua_gettop(state);
        let outcome = if ffi::lua_toboolean(state, value - 1) != 0 {
            ScriptOutcome::Done(read_reply(state, value, 0))
        } else {
            read_failure(state, value)
        };
        ffi::lua_settop(state, 0);
        outcome
    }
}

fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set("err", text)?;
    Ok(table)
}

/// `redis.error_reply`'s text: "-CODE detail" and "CODE detail" keep their code, a single
/// word gets ERR.
fn error_reply_text(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let text = text.strip_prefix('-').unwrap_or(&text);
    let text = text.trim_end_matches(['\r', '\n']);
    if text.contains(' ') {
        text.to_owned()
    } else {
        format!("ERR {text}")
    }
}

/// xpcall's handler, as Redis's `__redis__err__handler`: every error becomes a table with
/// `err`, and where it was raised.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let table = match &err {
        Value::Table(table) if table.raw_get::<Option<mlua::LuaString>>("err")?.is_some() => {
            table.clone()
        }
        other => error_table(lua, &format!("ERR {}", describe(other)))?,
    };
    if table
        .raw_get::<Option<mlua::LuaString>>("source")?
        .is_none()
    {
        // The script's innermost frame: past C functions (error, a library call) and our
        // own Lua wrappers. A script that tail-called redis.call has no frame left there
        // (Lua 5.1 drops it), so that error names an outer line, or none.
        for level in 1..=8 {
            match lua.inspect_stack(level, script_place) {
                None => break,
                Some(Some((source, line))) => {
                    table.raw_set("source", source)?;
                    table.raw_set("line", line)?;
                    break;
                }
                Some(None) => {}
            }
        }
    }
    Ok(table)
}

/// Where a stack frame is, if it is the script's own code.
fn script_place(debug: &mlua::debug::Debug) -> Option<(String, i64)> {
    let source = debug.source().source?.into_owned();
    let line = debug.current_line()?;
    (source == CHUNK_NAME).then_some((source, line as i64))
}

fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => s.to_string_lossy(),
        Value::Error(err) => super::cjson::message_of(err),
        Value::Number(n) => format_g17(*n),
        Value::Integer(n) => n.to_string(),
        Value::Nil => "nil".into(),
        other => other.type_name().into(),
    }
}
