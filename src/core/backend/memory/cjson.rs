//! The `cjson` table Redis gives its scripts (lua-cjson 2.1 with Redis's defaults), for the
//! scripts that keep JSON records (syncguard's layout). It writes what Redis's writes for the
//! same Lua value: numbers `%.14g`, `/` as `\/`, a table with only positive whole keys as an
//! array, any other (and an empty one) as an object in Lua's own iteration order; and reads
//! JSON as Redis's does, `null` as `cjson.null`, with the same error texts.

use super::cjson_read::{null, read, Failed};
use super::cjson_write::{type_name, write};
use super::number::format_g;
use mlua::{Lua, MultiValue, Value};

/// Sets the global `cjson` in `lua`. Its functions are Rust's, as lua-cjson's are C's: a
/// script that ends in `return cjson.encode(x)` keeps its own frame, so an error names the
/// script's line as Redis's does (see `raise`).
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let encode = lua.create_function(|lua, args: MultiValue| {
        let value = one(lua, "encode", args)?;
        let mut out = Vec::new();
        write(&value, &mut out).map_err(|message| raise(lua, message))?;
        lua.create_string(out)
    })?;
    let decode = lua.create_function(|lua, args: MultiValue| {
        let text = match one(lua, "decode", args)? {
            Value::String(text) => text.as_bytes().to_vec(),
            Value::Integer(n) => format_g(n as f64, 14).into_bytes(),
            Value::Number(n) => format_g(n, 14).into_bytes(),
            other => {
                let message = format!(
                    "bad argument #1 to 'decode' (string expected, got {})",
                    type_name(&other)
                );
                return Err(raise(lua, message));
            }
        };
        match read(lua, &text) {
            Ok(value) => Ok(value),
            Err(Failed::Lua(err)) => Err(err),
            Err(Failed::Json(message)) => Err(raise(lua, message)),
        }
    })?;
    let cjson = lua.create_table()?;
    cjson.raw_set("encode", encode)?;
    cjson.raw_set("decode", decode)?;
    cjson.raw_set("null", null())?;
    cjson.raw_set("_NAME", "cjson")?;
    cjson.raw_set("_VERSION", "2.1.0")?;
    lua.globals().raw_set("cjson", cjson)
}

/// The one argument lua-cjson's functions take.
fn one(lua: &Lua, name: &str, args: MultiValue) -> mlua::Result<Value> {
    let mut args = args.into_iter();
    match (args.next(), args.next()) {
        (Some(value), None) => Ok(value),
        _ => Err(raise(
            lua,
            format!("bad argument #1 to '{name}' (expected 1 argument)"),
        )),
    }
}

/// An error as lua-cjson raises it (`luaL_error`): prefixed with where its caller is, when
/// that is Lua code ("user_script:3: "), as Redis's error replies show it. It reaches the
/// script as a Rust error, which the host's error handler reads back as this message
/// (lua.rs): a script that `pcall`s cjson gets that error value, not a string.
fn raise(lua: &Lua, message: String) -> mlua::Error {
    let place = lua
        .inspect_stack(1, |debug| {
            let line = debug.current_line()?;
            let source = debug.source().short_src?.into_owned();
            Some(format!("{source}:{line}: "))
        })
        .flatten()
        .unwrap_or_default();
    mlua::Error::RuntimeError(format!("{place}{message}"))
}

/// A Rust function's error (cjson's) as Lua shows a C function's: its message alone, without
/// the Rust side's traceback.
pub(super) fn message_of(err: &mlua::Error) -> String {
    match err {
        mlua::Error::CallbackError { cause, .. } => message_of(cause),
        mlua::Error::RuntimeError(message) => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "cjson_tests.rs"]
mod tests;
