//! Runs our Lua scripts the way Redis 7 does: Lua 5.1, `redis.call` / `redis.pcall` and the
//! reply helpers, KEYS and ARGV, and Redis's conversions between its replies and Lua values.
//! One Lua state per keyspace, used under the keyspace's lock, so a script is atomic.

use super::keyspace::{command_name, Keyspace};
use super::number::format_g17;
use super::reply::MemoryReply;
use mlua::{BorrowedBytes, Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use std::borrow::Cow;
use std::collections::HashMap;

/// Redis names every script's chunk so; errors point into it ("@user_script:12").
const CHUNK_NAME: &str = "@user_script";
/// Deeper replies than this are cut short: a table that contains itself must not overflow
/// the stack.
const MAX_DEPTH: usize = 1000;

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
        let raw = lua.create_function(raw_command)?;
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
        lua.set_app_data(LentKeyspace(None));
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
        match sha.bytes().any(|byte| byte.is_ascii_uppercase()) {
            true => self.scripts.contains_key(&sha.to_ascii_lowercase()),
            false => self.scripts.contains_key(sha),
        }
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
        // The clock was read as the step began (instance.rs `Instance::run`).
        let lent = KeyspaceLoan::new(&self.lua, keyspace);
        let reply = self.invoke(function, keys, args).unwrap_or_else(|err| {
            ScriptOutcome::Done(MemoryReply::error(format!(
                "ERR Error running script (call to f_{sha}): {err}"
            )))
        });
        drop(lent);
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

    fn invoke(
        &self,
        function: &Function,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> mlua::Result<ScriptOutcome> {
        let globals = self.lua.globals();
        globals.raw_set("KEYS", self.strings(keys)?)?;
        globals.raw_set("ARGV", self.strings(args)?)?;
        let (ok, value): (bool, Value) = self.runner.call(function)?;
        if ok {
            return Ok(ScriptOutcome::Done(to_reply(&value, 0)));
        }
        let Value::Table(table) = value else {
            return Ok(ScriptOutcome::Failed {
                err: format!("ERR {}", describe(&value)),
                source: None,
                line: None,
            });
        };
        let err: Option<mlua::LuaString> = table.raw_get("err")?;
        let source: Option<mlua::LuaString> = table.raw_get("source")?;
        let line: Option<i64> = table.raw_get("line")?;
        Ok(ScriptOutcome::Failed {
            err: err.map_or_else(|| "ERR unknown error".to_owned(), |e| e.to_string_lossy()),
            source: source.map(|s| s.to_string_lossy()),
            line,
        })
    }

    fn strings(&self, items: &[&[u8]]) -> mlua::Result<Table> {
        // Text (every key and argument of ours) goes straight onto Lua's stack, with no
        // handle made per string; any other bytes take the general way.
        if items.iter().all(|item| std::str::from_utf8(item).is_ok()) {
            return self.lua.create_sequence_from(
                items
                    .iter()
                    .map(|item| std::str::from_utf8(item).unwrap_or_default()),
            );
        }
        let table = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, item) in items.iter().enumerate() {
            table.raw_seti(i + 1, self.lua.create_string(item)?)?;
        }
        Ok(table)
    }
}

enum ScriptOutcome {
    Done(MemoryReply),
    Failed {
        err: String,
        source: Option<String>,
        line: Option<i64>,
    },
}

/// Where `redis.call` finds the keyspace of the script running: set up once with the Lua
/// state, so that lending it is a move, not an allocation.
struct LentKeyspace(Option<Keyspace>);

/// Lends the keyspace to the Lua state for one script (`redis.call` finds it there), and
/// takes it back however the script ends, even by a panic unwinding through here.
struct KeyspaceLoan<'a> {
    lua: &'a Lua,
    home: &'a mut Keyspace,
}

impl<'a> KeyspaceLoan<'a> {
    fn new(lua: &'a Lua, home: &'a mut Keyspace) -> Self {
        let keyspace = std::mem::replace(home, home.placeholder());
        match lua.app_data_mut::<LentKeyspace>() {
            Some(mut slot) => slot.0 = Some(keyspace),
            // Never so (the slot is made with the state); the script then finds no keyspace.
            None => *home = keyspace,
        }
        KeyspaceLoan { lua, home }
    }
}

impl Drop for KeyspaceLoan<'_> {
    fn drop(&mut self) {
        if let Some(keyspace) = self
            .lua
            .app_data_mut::<LentKeyspace>()
            .and_then(|mut slot| slot.0.take())
        {
            *self.home = keyspace;
        }
    }
}

/// `redis.call` / `redis.pcall`'s Rust side: `(true, reply)` or `(false, error table)`.
fn raw_command(lua: &Lua, mut args: MultiValue) -> mlua::Result<(bool, Value)> {
    let raising = matches!(args.pop_front(), Some(Value::Boolean(true)));
    let reply = match command_args(&args) {
        Err(message) => MemoryReply::Error(message),
        Ok(argv) => {
            let argv: Vec<&[u8]> = argv.iter().map(CommandArg::bytes).collect();
            let mut slot = lua.app_data_mut::<LentKeyspace>();
            match slot.as_mut().and_then(|slot| slot.0.as_mut()) {
                Some(keyspace) => script_command(keyspace, &argv),
                None => MemoryReply::error("ERR no keyspace for this script"),
            }
        }
    };
    if let MemoryReply::Error(text) = &reply {
        let table = error_table(lua, text)?;
        if raising {
            // Where in the script the command was called (level 0 is this function, 1 the
            // Lua side of redis.call).
            if let Some(Some((source, line))) = lua.inspect_stack(2, script_place) {
                table.raw_set("source", source)?;
                table.raw_set("line", line)?;
            }
        }
        return Ok((false, Value::Table(table)));
    }
    Ok((true, to_lua(lua, reply, 0)?))
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

/// One argument of a `redis.call`: a Lua string read in place (no copy per argument), or
/// a number as Redis prints it.
enum CommandArg {
    Text(BorrowedBytes),
    Number(String),
}

impl CommandArg {
    fn bytes(&self) -> &[u8] {
        match self {
            CommandArg::Text(bytes) => bytes,
            CommandArg::Number(text) => text.as_bytes(),
        }
    }
}

/// Lua arguments as Redis reads them: strings as they are, numbers printed `%.17g`.
fn command_args(args: &MultiValue) -> Result<Vec<CommandArg>, String> {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call".into());
    }
    args.iter()
        .map(|arg| match arg {
            Value::String(s) => Ok(CommandArg::Text(s.as_bytes())),
            // Lua 5.1 numbers are all doubles; mlua merely hands integral ones over as
            // integers.
            Value::Integer(n) => Ok(CommandArg::Number(format_g17(*n as f64))),
            Value::Number(n) => Ok(CommandArg::Number(format_g17(*n))),
            _ => Err("ERR Lua redis lib command arguments must be strings or integers".into()),
        })
        .collect()
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

/// A Redis reply as Redis gives it to Lua (RESP2): integer -> number, bulk -> string,
/// nil -> false, array -> table, status -> {ok=..}, error -> {err=..}.
fn to_lua(lua: &Lua, reply: MemoryReply, depth: usize) -> mlua::Result<Value> {
    Ok(match reply {
        MemoryReply::Int(n) => Value::Number(n as f64),
        MemoryReply::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        MemoryReply::Nil => Value::Boolean(false),
        MemoryReply::Status(text) => {
            let table = lua.create_table()?;
            table.raw_set("ok", text)?;
            Value::Table(table)
        }
        MemoryReply::Error(text) => Value::Table(error_table(lua, &text)?),
        MemoryReply::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                let value = if depth >= MAX_DEPTH {
                    Value::Boolean(false)
                } else {
                    to_lua(lua, item, depth + 1)?
                };
                table.raw_seti(i + 1, value)?;
            }
            Value::Table(table)
        }
    })
}

/// A script's result as Redis replies it: number -> integer (truncated), string -> bulk,
/// true -> 1, false/nil -> nil, {err=..} -> error, {ok=..} -> status, other tables -> array
/// up to the first nil.
pub fn to_reply(value: &Value, depth: usize) -> MemoryReply {
    match value {
        Value::String(s) => MemoryReply::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(true) => MemoryReply::Int(1),
        Value::Integer(n) => MemoryReply::Int(*n),
        // `as` truncates towards zero and saturates, as near as Rust gets to C's cast.
        Value::Number(n) => MemoryReply::Int(*n as i64),
        Value::Table(table) => {
            if let Ok(Some(err)) = table.raw_get::<Option<mlua::LuaString>>("err") {
                return MemoryReply::Error(err.to_string_lossy());
            }
            if let Ok(Some(ok)) = table.raw_get::<Option<mlua::LuaString>>("ok") {
                return MemoryReply::Status(ok.to_string_lossy().into());
            }
            if depth >= MAX_DEPTH {
                return MemoryReply::error("ERR reached lua stack limit");
            }
            let mut items = Vec::new();
            for i in 1.. {
                match table.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(item) => items.push(to_reply(&item, depth + 1)),
                }
            }
            MemoryReply::Array(items)
        }
        _ => MemoryReply::Nil,
    }
}
