//! The `cjson` table Redis gives its scripts (lua-cjson 2.1 with Redis's defaults), for the
//! scripts that keep JSON records (syncguard's layout). It writes what Redis's writes for the
//! same Lua value: numbers `%.14g`, `/` as `\/`, a table with only positive whole keys as an
//! array, any other (and an empty one) as an object in Lua's own iteration order; and reads
//! JSON as Redis's does, `null` as `cjson.null`, with the same error texts.

use super::number::format_g;
use mlua::{LightUserData, Lua, MultiValue, Table, Value};

/// Nesting past this is refused, both ways (lua-cjson's default).
const MAX_DEPTH: usize = 1000;
/// A table whose largest index is above this and above twice its item count is too sparse
/// to write as an array (lua-cjson's `encode_sparse_array` defaults: an error, not an object).
const SPARSE_SAFE: f64 = 10.0;
const SPARSE_RATIO: f64 = 2.0;

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

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// The name Lua's `type()` gives a value.
fn type_name(value: &Value) -> &'static str {
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
fn write(value: &Value, out: &mut Vec<u8>) -> Result<(), String> {
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

/// Why a decode failed: bad JSON (lua-cjson's message, raised in the script), or the Lua
/// state itself (out of memory).
enum Failed {
    Json(String),
    Lua(mlua::Error),
}

impl From<mlua::Error> for Failed {
    fn from(err: mlua::Error) -> Self {
        Failed::Lua(err)
    }
}

#[derive(Debug)]
enum Token {
    ObjectBegin,
    ObjectEnd,
    ArrayBegin,
    ArrayEnd,
    Text(Vec<u8>),
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    /// What was wrong, as lua-cjson names it.
    Error(&'static str),
}

impl Token {
    /// How lua-cjson names a token it did not expect.
    fn name(&self) -> &'static str {
        match self {
            Token::ObjectBegin => "T_OBJ_BEGIN",
            Token::ObjectEnd => "T_OBJ_END",
            Token::ArrayBegin => "T_ARR_BEGIN",
            Token::ArrayEnd => "T_ARR_END",
            Token::Text(_) => "T_STRING",
            Token::Number(_) => "T_NUMBER",
            Token::Boolean(_) => "T_BOOLEAN",
            Token::Null => "T_NULL",
            Token::Colon => "T_COLON",
            Token::Comma => "T_COMMA",
            Token::End => "T_END",
            Token::Error(what) => what,
        }
    }
}

/// lua-cjson reads a C string: the text ends at its first NUL byte.
struct Parser<'a> {
    data: &'a [u8],
    at: usize,
    depth: usize,
}

/// A table being read: an array's next index, or an object's key for the value coming.
enum Reading {
    Array { table: Table, next: i64 },
    Object { table: Table, key: Vec<u8> },
}

/// Reads the JSON `data` without recursion, as lua-cjson reads it (its errors at the same
/// characters).
fn read(lua: &Lua, data: &[u8]) -> Result<Value, Failed> {
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(Failed::Json(
            "JSON parser does not support UTF-16 or UTF-32".into(),
        ));
    }
    let mut parser = Parser {
        data,
        at: 0,
        depth: 0,
    };
    let mut open: Vec<Reading> = Vec::new();
    let (mut token, mut index) = parser.next();
    loop {
        let mut done = match token {
            Token::Text(text) => Value::String(lua.create_string(text)?),
            Token::Number(n) => Value::Number(n),
            Token::Boolean(b) => Value::Boolean(b),
            Token::Null => null(),
            Token::ObjectBegin => {
                parser.descend()?;
                let table = lua.create_table()?;
                let (first, at) = parser.next();
                if matches!(first, Token::ObjectEnd) {
                    parser.depth -= 1;
                    Value::Table(table)
                } else {
                    let key = parser.key(first, at)?;
                    open.push(Reading::Object { table, key });
                    (token, index) = parser.next();
                    continue;
                }
            }
            Token::ArrayBegin => {
                parser.descend()?;
                let table = lua.create_table()?;
                let (first, at) = parser.next();
                if matches!(first, Token::ArrayEnd) {
                    parser.depth -= 1;
                    Value::Table(table)
                } else {
                    open.push(Reading::Array { table, next: 1 });
                    (token, index) = (first, at);
                    continue;
                }
            }
            other => return Err(unexpected("value", &other, index)),
        };
        // Into the tables it completes, until one wants another value.
        loop {
            let Some(top) = open.last_mut() else {
                let (end, at) = parser.next();
                if !matches!(end, Token::End) {
                    return Err(unexpected("the end", &end, at));
                }
                return Ok(done);
            };
            let (after, at) = parser.next();
            let closed = match top {
                Reading::Array { table, next } => {
                    table.raw_set(*next, done)?;
                    *next += 1;
                    match after {
                        Token::ArrayEnd => table.clone(),
                        Token::Comma => break,
                        other => return Err(unexpected("comma or array end", &other, at)),
                    }
                }
                Reading::Object { table, key } => {
                    table.raw_set(lua.create_string(&*key)?, done)?;
                    match after {
                        Token::ObjectEnd => table.clone(),
                        Token::Comma => {
                            let (next, at) = parser.next();
                            *key = parser.key(next, at)?;
                            break;
                        }
                        other => return Err(unexpected("comma or object end", &other, at)),
                    }
                }
            };
            open.pop();
            parser.depth -= 1;
            done = Value::Table(closed);
        }
        (token, index) = parser.next();
    }
}

fn unexpected(expected: &str, found: &Token, index: usize) -> Failed {
    Failed::Json(format!(
        "Expected {expected} but found {} at character {}",
        found.name(),
        index + 1
    ))
}

impl Parser<'_> {
    fn byte(&self, at: usize) -> u8 {
        self.data.get(at).copied().unwrap_or(0)
    }

    /// The next token and where it starts (for an error in a string: where it was found).
    fn next(&mut self) -> (Token, usize) {
        while matches!(self.byte(self.at), b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
        let start = self.at;
        let single = match self.byte(start) {
            0 => return (Token::End, start),
            b'{' => Token::ObjectBegin,
            b'}' => Token::ObjectEnd,
            b'[' => Token::ArrayBegin,
            b']' => Token::ArrayEnd,
            b',' => Token::Comma,
            b':' => Token::Colon,
            b'"' => return self.string(),
            b'-' | b'0'..=b'9' => return self.number(),
            _ => return self.word(),
        };
        self.at += 1;
        (single, start)
    }

    fn word(&mut self) -> (Token, usize) {
        let start = self.at;
        let rest = &self.data[start.min(self.data.len())..];
        for (word, token) in [
            (&b"true"[..], Token::Boolean(true)),
            (b"false", Token::Boolean(false)),
            (b"null", Token::Null),
        ] {
            if rest.starts_with(word) {
                self.at += word.len();
                return (token, start);
            }
        }
        // Read as C's strtod reads them (lua-cjson's decode_invalid_numbers is on).
        let lower = |n: usize| rest.get(..n).map(|s| s.to_ascii_lowercase());
        if rest.first() == Some(&b'+') || matches!(lower(3).as_deref(), Some(b"inf" | b"nan")) {
            return self.number();
        }
        (Token::Error("invalid token"), start)
    }

    fn number(&mut self) -> (Token, usize) {
        let start = self.at;
        match strtod(&self.data[start..]) {
            Some((value, used)) => {
                self.at += used;
                (Token::Number(value), start)
            }
            None => (Token::Error("invalid number"), start),
        }
    }

    fn string(&mut self) -> (Token, usize) {
        let start = self.at;
        self.at += 1;
        let mut text = Vec::new();
        loop {
            match self.byte(self.at) {
                b'"' => break,
                0 => return (Token::Error("unexpected end of string"), self.at),
                b'\\' => {
                    let escaped = match self.byte(self.at + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => b'\x08',
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => b'\x0c',
                        b'r' => b'\r',
                        b'u' => match self.unicode_escape(&mut text) {
                            true => continue,
                            false => return (Token::Error("invalid unicode escape code"), self.at),
                        },
                        _ => return (Token::Error("invalid escape code"), self.at),
                    };
                    text.push(escaped);
                    self.at += 2;
                }
                byte => {
                    text.push(byte);
                    self.at += 1;
                }
            }
        }
        self.at += 1;
        (Token::Text(text), start)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, i| {
            let digit = (self.byte(at + i) as char).to_digit(16)?;
            Some(acc << 4 | digit)
        })
    }

    /// `\uXXXX` (a UTF-16 pair as two of them) at `self.at`, appended as UTF-8.
    fn unicode_escape(&mut self, text: &mut Vec<u8>) -> bool {
        let Some(mut code) = self.hex4(self.at + 2) else {
            return false;
        };
        let mut length = 6;
        if code & 0xF800 == 0xD800 {
            if code & 0x400 != 0
                || self.byte(self.at + 6) != b'\\'
                || self.byte(self.at + 7) != b'u'
            {
                return false;
            }
            let Some(low) = self.hex4(self.at + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            code = (((code & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            length = 12;
        }
        // Every surrogate was paired or refused above.
        let Some(c) = char::from_u32(code) else {
            return false;
        };
        text.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes());
        self.at += length;
        true
    }

    fn descend(&mut self) -> Result<(), Failed> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Failed::Json(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.at
            )));
        }
        Ok(())
    }

    /// An object's key and its colon.
    fn key(&mut self, token: Token, index: usize) -> Result<Vec<u8>, Failed> {
        let Token::Text(key) = token else {
            return Err(unexpected("object key string", &token, index));
        };
        let (colon, at) = self.next();
        if !matches!(colon, Token::Colon) {
            return Err(unexpected("colon", &colon, at));
        }
        Ok(key)
    }
}

/// C's `strtod` on the start of `text`: the value and how many bytes it read, `None` when
/// no number starts there. Decimal and hexadecimal forms, `inf`, `infinity` and `nan`.
fn strtod(text: &[u8]) -> Option<(f64, usize)> {
    let (negative, sign) = match text.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let rest = &text[sign..];
    let lower: Vec<u8> = rest.iter().take(8).map(u8::to_ascii_lowercase).collect();
    let (value, used) = if lower.starts_with(b"infinity") {
        (f64::INFINITY, 8)
    } else if lower.starts_with(b"inf") {
        (f64::INFINITY, 3)
    } else if lower.starts_with(b"nan") {
        let close = match rest.get(3) {
            Some(b'(') => rest[4..]
                .iter()
                .position(|&b| b == b')')
                .filter(|&n| {
                    rest[4..4 + n]
                        .iter()
                        .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
                })
                .map(|n| n + 2),
            _ => None,
        };
        (f64::NAN, 3 + close.unwrap_or(0))
    } else if lower.starts_with(b"0x") && rest.get(2).is_some_and(u8::is_ascii_hexdigit) {
        hexadecimal(&rest[2..]).map(|(value, used)| (value, used + 2))?
    } else {
        decimal(rest)?
    };
    Some((if negative { -value } else { value }, sign + used))
}

fn digits(text: &[u8], from: usize, radix: u32) -> usize {
    text[from.min(text.len())..]
        .iter()
        .take_while(|b| (**b as char).is_digit(radix))
        .count()
}

fn decimal(text: &[u8]) -> Option<(f64, usize)> {
    let whole = digits(text, 0, 10);
    let mut used = whole;
    let mut fraction = 0;
    if text.get(used) == Some(&b'.') {
        fraction = digits(text, used + 1, 10);
        if whole + fraction > 0 {
            used += 1 + fraction;
        }
    }
    if whole + fraction == 0 {
        return None;
    }
    if matches!(text.get(used), Some(b'e' | b'E')) {
        let signed = matches!(text.get(used + 1), Some(b'+' | b'-')) as usize;
        let exponent = digits(text, used + 1 + signed, 10);
        if exponent > 0 {
            used += 1 + signed + exponent;
        }
    }
    let literal = std::str::from_utf8(&text[..used]).ok()?;
    let literal = literal.strip_suffix('.').unwrap_or(literal);
    literal.parse().ok().map(|value| (value, used))
}

fn hexadecimal(text: &[u8]) -> Option<(f64, usize)> {
    let whole = digits(text, 0, 16);
    let mut used = whole;
    let mut value = 0.0f64;
    for &b in &text[..whole] {
        value = value * 16.0 + f64::from((b as char).to_digit(16)?);
    }
    if text.get(used) == Some(&b'.') {
        let fraction = digits(text, used + 1, 16);
        let mut scale = 1.0 / 16.0;
        for &b in &text[used + 1..used + 1 + fraction] {
            value += f64::from((b as char).to_digit(16)?) * scale;
            scale /= 16.0;
        }
        used += 1 + fraction;
    }
    if matches!(text.get(used), Some(b'p' | b'P')) {
        let signed = matches!(text.get(used + 1), Some(b'+' | b'-'));
        let count = digits(text, used + 1 + signed as usize, 10);
        if count > 0 {
            let from = used + 1 + signed as usize;
            let power: i32 = std::str::from_utf8(&text[from..from + count])
                .ok()?
                .parse()
                .unwrap_or(i32::MAX);
            let power = if text[used + 1] == b'-' {
                -power
            } else {
                power
            };
            value *= 2f64.powi(power);
            used = from + count;
        }
    }
    Some((value, used))
}

#[cfg(test)]
#[path = "cjson_tests.rs"]
mod tests;
