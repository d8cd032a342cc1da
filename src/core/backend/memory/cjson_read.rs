//! cjson's `decode` (see cjson.rs): JSON read as lua-cjson reads it, with its errors at the
//! same characters.

use super::cjson_write::MAX_DEPTH;
use super::number::strtod;
use mlua::{LightUserData, Lua, Table, Value};

/// `cjson.null`: what JSON's `null` reads as (a Lua table cannot hold nil).
pub(super) fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Why a decode failed: bad JSON (lua-cjson's message, raised in the script), or the Lua
/// state itself (out of memory).
pub(super) enum Failed {
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
pub(super) fn read(lua: &Lua, data: &[u8]) -> Result<Value, Failed> {
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
