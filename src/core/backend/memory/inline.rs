//! A `memory://` keyspace run where its caller is: the commands a call wrote for a socket
//! (RESP, as the JS thread's connection sends them) run now, on the caller's thread, under
//! the keyspace's lock, with no hop to the runtime. Its messages reach their subscribers as
//! those of any command do, once the lock is released (see instance.rs).

use super::instance::{instance, Instance};
use super::reply::error_value;
use redis::Value;
use std::sync::Arc;

/// The keyspace `memory://name`, for calls run inline.
#[derive(Clone)]
pub struct MemoryInline {
    instance: Arc<Instance>,
}

impl MemoryInline {
    pub fn open(name: &str) -> Self {
        MemoryInline {
            instance: instance(name),
        }
    }

    /// Runs the RESP commands in `request` as one atomic step and answers as a socket's
    /// reader would for the call that wrote them: the first error among all but the last
    /// reply, otherwise the last.
    pub fn run_now(&self, request: &[u8]) -> Value {
        let Some(commands) = commands(request) else {
            return error_value("ERR Protocol error: a call wrote an unreadable request");
        };
        let mut replies = self.instance.run(&commands);
        let Some(last) = replies.pop() else {
            return error_value("ERR no reply");
        };
        match replies.into_iter().find(|reply| reply.is_error()) {
            Some(error) => error.into_value(),
            None => last.into_value(),
        }
    }
}

/// The commands of a RESP request (arrays of bulk strings), borrowed from it; `None` when it
/// is not one.
fn commands(mut request: &[u8]) -> Option<Vec<Vec<&[u8]>>> {
    let mut commands = Vec::with_capacity(1);
    while !request.is_empty() {
        let (count, rest) = header(request, b'*')?;
        request = rest;
        let mut args = Vec::with_capacity(count);
        for _ in 0..count {
            let (len, rest) = header(request, b'$')?;
            let arg = rest.get(..len)?;
            request = rest.get(len..)?.strip_prefix(b"\r\n")?;
            args.push(arg);
        }
        commands.push(args);
    }
    Some(commands)
}

/// `<kind><decimal>\r\n` at the start of `input`: the number and what follows.
fn header(input: &[u8], kind: u8) -> Option<(usize, &[u8])> {
    let rest = input.strip_prefix(&[kind])?;
    let end = rest.iter().position(|&byte| byte == b'\r')?;
    // Digits only (as `usize`'s parse takes them, bar a '+'), read here: a request has a
    // header per argument, and the general parse cost more than the rest of reading it.
    let digits = &rest[..end];
    if digits.is_empty() {
        return None;
    }
    let mut number: usize = 0;
    for &byte in digits {
        let digit = byte.checked_sub(b'0').filter(|digit| *digit <= 9)?;
        number = number.checked_mul(10)?.checked_add(usize::from(digit))?;
    }
    Some((number, rest[end..].strip_prefix(b"\r\n")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::basics::resp::write_command;

    #[test]
    fn runs_what_a_call_wrote_and_answers_with_the_first_error() {
        let memory = MemoryInline::open("inline-unit");
        let mut out = Vec::new();
        write_command(&mut out, &[b"SET", b"k", b"v"]);
        write_command(&mut out, &[b"GET", b"k"]);
        assert_eq!(memory.run_now(&out), Value::BulkString(b"v".to_vec()));
        let mut out = Vec::new();
        write_command(&mut out, &[b"NOSUCH"]);
        write_command(&mut out, &[b"GET", b"k"]);
        assert!(matches!(memory.run_now(&out), Value::ServerError(_)));
        assert!(matches!(
            memory.run_now(b"*1\r\n$3\r\nGE"),
            Value::ServerError(_)
        ));
    }

    #[test]
    fn a_header_is_digits_then_crlf_and_nothing_else() {
        assert_eq!(header(b"*12\r\nrest", b'*'), Some((12, &b"rest"[..])));
        assert_eq!(header(b"$0\r\n", b'$'), Some((0, &b""[..])));
        assert_eq!(header(b"*-1\r\n", b'*'), None);
        assert_eq!(header(b"*\r\n", b'*'), None);
        assert_eq!(header(b"*1x\r\n", b'*'), None);
        assert_eq!(header(b"$3\r\n", b'*'), None);
        assert_eq!(header(b"*99999999999999999999999\r\n", b'*'), None);
        assert_eq!(header(b"*3\rx", b'*'), None);
    }
}
