//! A command's answer, as Redis would send it over RESP2 (scripts see RESP2 whatever the
//! client speaks), and its form as the redis crate's `Value`.

use redis::Value;
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq)]
pub enum MemoryReply {
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    /// Borrowed for the fixed ones (OK, a type's name): no allocation per SET.
    Status(Cow<'static, str>),
    /// The whole error line without its '-': "CODE detail".
    Error(String),
    Array(Vec<MemoryReply>),
}

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const SYNTAX: &str = "ERR syntax error";

impl MemoryReply {
    pub fn ok() -> Self {
        MemoryReply::Status(Cow::Borrowed("OK"))
    }

    pub fn error(text: impl Into<String>) -> Self {
        MemoryReply::Error(text.into())
    }

    pub fn arity(command: &str) -> Self {
        MemoryReply::Error(format!(
            "ERR wrong number of arguments for '{}' command",
            command.to_ascii_lowercase()
        ))
    }

    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Self {
        MemoryReply::Bulk(bytes.into())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, MemoryReply::Error(_))
    }

    pub fn into_value(self) -> Value {
        match self {
            MemoryReply::Int(n) => Value::Int(n),
            MemoryReply::Bulk(bytes) => Value::BulkString(bytes),
            MemoryReply::Nil => Value::Nil,
            MemoryReply::Status(status) if status == "OK" => Value::Okay,
            MemoryReply::Status(status) => Value::SimpleString(status.into_owned()),
            MemoryReply::Error(text) => error_value(&text),
            MemoryReply::Array(items) => {
                Value::Array(items.into_iter().map(MemoryReply::into_value).collect())
            }
        }
    }
}

/// The crate builds its `ServerError`s only while parsing, so the error line is parsed as if
/// it had come off the wire: the code, the `kind` and `NOSCRIPT` handling come out exactly
/// as for a real server.
pub fn error_value(text: &str) -> Value {
    // One line, as Redis sends errors: it turns newlines into spaces too.
    let line: String = text
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect();
    let line = if line.is_empty() {
        "ERR".to_owned()
    } else {
        line
    };
    redis::parse_redis_value(format!("-{line}\r\n").as_bytes())
        .unwrap_or_else(|_| Value::SimpleString(format!("-{line}")))
}
