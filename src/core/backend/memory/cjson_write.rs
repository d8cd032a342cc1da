//! cjson's `encode` (see cjson.rs): a Lua value written as lua-cjson writes it.

use super::number::format_g;
use mlua::{Table, Value};

/// Nesting past this is refused, both ways (lua-cjson's default).
pub(super) const MAX_DEPTH: usize = 1000;
/// A table whose largest index is above this and above twice its item count is too sparse
/// to write as an array (lua-cjson's `encode_sparse_array` defaults: an error, not an object).
const SPARSE_SAFE: f64 = 10.0;
const SPARSE_RATIO: f64 = 2.0;

/// The name Lua's `type()` gives a value.
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// A table being written: what is left of it.
enum Writing {
    Array {
        table: Table,
        length: f64,
        next: f64,
    },
    Object {
        entries: std::vec::IntoIter<(Value, Value)>,
        first: bool,
    },
}

/// Writes `value` without recursion (nesting may go 1000 deep on any thread's stack).
pub(super) fn write(value: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    let mut open: Vec<Writing> = Vec::new();
    let mut pending = Some(value.clone());
    loop {
        if let Some(value) = pending.take() {
            match value {
                Value::Table(table) => open.push(start_table(table, open.len() + 1, out)?),
                scalar => write_scalar(&scalar, out)?,
            }
        }
        let Some(top) = open.last_mut() else {
            return Ok(());
        };
        match top {
            Writing::Array {
                table,
                length,
                next,
            } if *next <= *length => {
                if *next > 1.0 {
                    out.push(b',');
                }
                pending = Some(table.raw_get(*next).map_err(|err| err.to_string())?);
                *next += 1.0;
            }
            Writing::Array { .. } => {
                out.push(b']');
                open.pop();
            }
            Writing::Object { entries, first } => match entries.next() {
                Some((key, value)) => {
                    if !*first {
                        out.push(b',');
                    }
                    *first = false;
                    write_key(&key, out)?;
                    pending = Some(value);
                }
                None => {
                    out.push(b'}');
                    open.pop();
                }
            },
        }
    }
}

fn start_table(table: Table, depth: usize, out: &mut Vec<u8>) -> Result<Writing, String> {
    if depth > MAX_DEPTH {
        return Err(format!("Cannot serialise, excessive nesting ({depth})"));
    }
    if let Some(length) = array_length(&table)?.filter(|&length| length > 0.0) {
        out.push(b'[');
        return Ok(Writing::Array {
            table,
            length,
            next: 1.0,
        });
    }
    out.push(b'{');
    let entries: Vec<(Value, Value)> = table
        .pairs::<Value, Value>()
        .collect::<mlua::Result<_>>()
        .map_err(|err| err.to_string())?;
    Ok(Writing::Object {
        entries: entries.into_iter(),
        first: true,
    })
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    match value {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(data) if data.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(true) => out.extend_from_slice(b"true"),
        Value::Boolean(false) => out.extend_from_slice(b"false"),
        Value::Integer(n) => write_number(*n as f64, out)?,
        Value::Number(n) => write_number(*n, out)?,
        Value::String(text) => write_string(&text.as_bytes(), out),
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                type_name(other)
            ))
        }
    }
    Ok(())
}

/// An object's key: a string, or a number written as one.
fn write_key(key: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    match key {
        Value::Integer(_) | Value::Number(_) => {
            out.push(b'"');
            write_scalar(key, out)?;
            out.extend_from_slice(b"\":");
        }
        Value::String(text) => {
            write_string(&text.as_bytes(), out);
            out.push(b':');
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: table key must be a number or string",
                type_name(other)
            ))
        }
    }
    Ok(())
}

fn write_number(n: f64, out: &mut Vec<u8>) -> Result<(), String> {
    if !n.is_finite() {
        return Err("Cannot serialise number: must not be NaN or Inf".into());
    }
    out.extend_from_slice(format_g(n, 14).as_bytes());
    Ok(())
}

fn write_string(text: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in text {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{byte:04x}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

/// The largest index of a table whose keys are all whole numbers from 1 (`None`: an
/// object), refusing one too sparse to write as an array.
fn array_length(table: &Table) -> Result<Option<f64>, String> {
    let (mut max, mut items) = (0.0f64, 0.0f64);
    for pair in table.clone().pairs::<Value, Value>() {
        let (key, _) = pair.map_err(|err| err.to_string())?;
        let index = match key {
            Value::Integer(n) => n as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if index < 1.0 || index.floor() != index {
            return Ok(None);
        }
        max = max.max(index);
        items += 1.0;
    }
    if max > items * SPARSE_RATIO && max > SPARSE_SAFE {
        return Err("Cannot serialise table: excessively sparse array".into());
    }
    Ok(Some(max))
}
