//! The JS-thread connection's side of the protocol (see binding/js/socket): commands written
//! straight into its output buffer, and RESP2 replies read from a byte buffer that may end
//! mid-reply. Only what our commands get back is needed, but every RESP2 type is read, so an
//! unexpected reply is reported as such instead of desynchronising the stream.

use crate::core::basics::error::LockError;
use redis::Value;

/// A reply that breaks the protocol: the connection cannot be trusted any further.
#[derive(Debug, PartialEq, Eq)]
pub struct ProtocolError(pub &'static str);

/// Nesting beyond this is not a reply to any of our commands.
const MAX_DEPTH: usize = 8;

/// One complete reply at the start of `buf` and its length in bytes; `None` when `buf` holds
/// only part of it so far.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, ProtocolError> {
    let mut at = 0;
    Ok(value(buf, &mut at, 0)?.map(|v| (v, at)))
}

fn value(buf: &[u8], at: &mut usize, depth: usize) -> Result<Option<Value>, ProtocolError> {
    if depth > MAX_DEPTH {
        return Err(ProtocolError("reply nested too deeply"));
    }
    let start = *at;
    let Some(line) = line(buf, at) else {
        return Ok(None);
    };
    let (&kind, rest) = line
        .split_first()
        .ok_or(ProtocolError("empty reply line"))?;
    Ok(Some(match kind {
        b'+' => Value::SimpleString(text(rest)?),
        b'-' => error(&buf[start..*at])?,
        b':' => Value::Int(number(rest)?),
        b'$' => {
            let Ok(len) = usize::try_from(number(rest)?) else {
                return Ok(Some(Value::Nil));
            };
            let end = at.checked_add(len).ok_or(ProtocolError("bulk too long"))?;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError("bulk string without its CRLF"));
            }
            let bytes = buf[*at..end].to_vec();
            *at = end + 2;
            Value::BulkString(bytes)
        }
        b'*' => {
            let Ok(len) = usize::try_from(number(rest)?) else {
                return Ok(Some(Value::Nil));
            };
            // The count comes from the wire: grow as elements arrive, not all at once.
            let mut items = Vec::with_capacity(len.min(16));
            for _ in 0..len {
                match value(buf, at, depth + 1)? {
                    Some(item) => items.push(item),
                    None => return Ok(None),
                }
            }
            Value::Array(items)
        }
        _ => return Err(ProtocolError("unknown reply type")),
    }))
}

/// The next CRLF-terminated line, without its CRLF.
fn line<'a>(buf: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let start = *at;
    let end = start + buf.get(start..)?.windows(2).position(|w| w == b"\r\n")?;
    *at = end + 2;
    Some(&buf[start..end])
}

fn text(bytes: &[u8]) -> Result<String, ProtocolError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtocolError("reply line is not UTF-8"))
}

fn number(bytes: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ProtocolError("malformed number"))
}

/// `-CODE detail`, as the redis crate reads it, so the rest of the core sees the server
/// error it already understands. `line` is the whole line, `-` and CRLF included.
fn error(line: &[u8]) -> Result<Value, ProtocolError> {
    match redis::parse_redis_value(line) {
        Ok(value @ Value::ServerError(_)) => Ok(value),
        _ => Err(ProtocolError("malformed error reply")),
    }
}

/// Appends one command, as a RESP array of bulk strings.
pub fn write_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    // Room for the whole command at once (a header is at most 23 bytes, an argument's
    // framing 25): a call writes several commands, each growing the buffer otherwise.
    out.reserve(23 + args.iter().map(|arg| arg.len() + 25).sum::<usize>());
    out.push(b'*');
    write_decimal(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        write_decimal(out, arg.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// `n` in decimal, as command arguments carry numbers.
pub fn decimal(n: u64) -> Decimal {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    Decimal { digits, at }
}

/// The digits of a number, kept on the stack.
pub struct Decimal {
    digits: [u8; 20],
    at: usize,
}

impl Decimal {
    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[self.at..]
    }
}

fn write_decimal(out: &mut Vec<u8>, n: u64) {
    // Most are lengths and counts under 100, written a request's dozen times or more: two
    // pushes cost less than a copy of a slice whose length is known only at run time.
    match n {
        0..=9 => out.push(b'0' + n as u8),
        10..=99 => {
            out.push(b'0' + (n / 10) as u8);
            out.push(b'0' + (n % 10) as u8);
        }
        _ => out.extend_from_slice(decimal(n).as_bytes()),
    }
}

/// A reply read outside the redis crate's connection, as that connection would convert it.
pub fn typed<T: redis::FromRedisValue>(reply: Value) -> Result<T, LockError> {
    let reply = reply.extract_error()?;
    redis::from_redis_value(reply).map_err(|err| LockError::from(redis::RedisError::from(err)))
}

#[cfg(test)]
#[path = "resp_tests.rs"]
mod tests;
