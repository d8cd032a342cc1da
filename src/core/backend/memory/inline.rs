//! A `memory://` keyspace run where its caller is: the commands a call wrote for a socket
//! (RESP, as the JS thread's connection sends them) run now, on the caller's thread, under
//! the keyspace's lock, with no hop to the runtime. Its messages reach their subscribers as
//! those of any command do, once the lock is released (see instance.rs).

use super::commands::Commands;
use super::instance::{instance, Instance};
use super::reply::{error_value, MemoryReply};
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
    /// reply, otherwise the last. A request that is one `MULTI` … `EXEC` answers with EXEC's
    /// array, as Redis would.
    pub fn run_now(&self, request: &[u8]) -> Value {
        let Some(commands) = commands(request) else {
            return error_value("ERR Protocol error: a call wrote an unreadable request");
        };
        self.answer(&commands.iter().map(Vec::as_slice).collect::<Vec<_>>())
    }

    /// As `run_now`, for commands written straight to the keyspace: the same request with
    /// no RESP to read back.
    pub fn run(&self, commands: &Commands) -> Value {
        commands.split(|commands| self.answer(commands))
    }

    fn answer(&self, commands: &[&[&[u8]]]) -> Value {
        if let Some(queued) = transaction(commands) {
            return self.exec(queued);
        }
        // An empty transaction ahead (an attempt that asks whether MULTI works before its
        // script, proto/acquire.rs `Untried`) answers OK and an empty array: neither an
        // error, nor the last reply.
        let commands = match commands.split_at_checked(2) {
            Some((ahead, rest)) if !rest.is_empty() && transaction(ahead).is_some() => rest,
            _ => commands,
        };
        let mut replies = self.instance.run(commands);
        let Some(last) = replies.pop() else {
            return error_value("ERR no reply");
        };
        match replies.into_iter().find(|reply| reply.is_error()) {
            Some(error) => error.into_value(),
            None => last.into_value(),
        }
    }

    /// EXEC of `queued`: each command's reply, errors among them, as one atomic step. Redis
    /// refuses an unknown command or a wrong count of arguments while queueing, and then
    /// runs none of the transaction; here that error comes back in the array and the rest
    /// runs. The core writes neither.
    fn exec(&self, queued: &[&[&[u8]]]) -> Value {
        let replies = self.instance.run(queued);
        Value::Array(replies.into_iter().map(MemoryReply::into_value).collect())
    }
}

/// The commands between `MULTI` and `EXEC` when `commands` is exactly one transaction.
fn transaction<'a, 'r>(commands: &'a [&'r [&'r [u8]]]) -> Option<&'a [&'r [&'r [u8]]]> {
    let is = |args: &[&[u8]], name: &[u8]| args.len() == 1 && args[0].eq_ignore_ascii_case(name);
    let [first, queued @ .., last] = commands else {
        return None;
    };
    let nested = |args: &&[&[u8]]| {
        (args.first()).is_some_and(|name| {
            name.eq_ignore_ascii_case(b"MULTI") || name.eq_ignore_ascii_case(b"EXEC")
        })
    };
    (is(first, b"MULTI") && is(last, b"EXEC") && !queued.iter().any(nested)).then_some(queued)
}

/// The commands of a RESP request (arrays of bulk strings), borrowed from it; `None` when it
/// is not one.
fn commands(mut request: &[u8]) -> Option<Vec<Vec<&[u8]>>> {
    // A transaction is MULTI, its commands and EXEC: room for one without growing.
    let mut commands = Vec::with_capacity(6);
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
    fn a_transaction_answers_with_exec_s_array() {
        let memory = MemoryInline::open("inline-exec");
        let mut out = Vec::new();
        write_command(&mut out, &[b"MULTI"]);
        write_command(&mut out, &[b"SET", b"k", b"v", b"NX", b"PX", b"60000"]);
        write_command(&mut out, &[b"INCRBY", b"k", b"2"]);
        write_command(&mut out, &[b"INCRBY", b"n", b"2"]);
        write_command(&mut out, &[b"EXEC"]);
        let Value::Array(items) = memory.run_now(&out) else {
            panic!("EXEC answers an array");
        };
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], Value::Okay);
        // A command that fails inside a transaction fails alone, as in Redis.
        assert!(matches!(items[1], Value::ServerError(_)));
        assert_eq!(items[2], Value::Int(2));
        let mut out = Vec::new();
        write_command(&mut out, &[b"MULTI"]);
        write_command(&mut out, &[b"SET", b"k", b"w", b"NX"]);
        write_command(&mut out, &[b"EXEC"]);
        assert_eq!(memory.run_now(&out), Value::Array(vec![Value::Nil]));
        // An empty transaction ahead of a command: the command's reply.
        let mut out = Vec::new();
        write_command(&mut out, &[b"MULTI"]);
        write_command(&mut out, &[b"EXEC"]);
        write_command(&mut out, &[b"GET", b"k"]);
        assert_eq!(memory.run_now(&out), Value::BulkString(b"v".to_vec()));
        // Not one transaction: run as commands, MULTI refused as by a script's keyspace.
        let mut out = Vec::new();
        write_command(&mut out, &[b"MULTI"]);
        write_command(&mut out, &[b"MULTI"]);
        write_command(&mut out, &[b"EXEC"]);
        assert!(matches!(memory.run_now(&out), Value::ServerError(_)));
    }

    /// What the JS thread's continuation reads of a request run here.
    impl crate::core::proto::acquire::forms_tests::Conn for MemoryInline {
        fn send(&mut self, bytes: &[u8], _replies: usize) -> Value {
            self.run_now(bytes)
        }
    }

    /// The inline path writes plain attempts as transactions (ops/inline.rs): the issue's
    /// rule for that form (proto/acquire_forms_tests.rs) holds on this keyspace as on Redis.
    #[test]
    fn the_script_and_the_transaction_answer_alike_here_too() {
        use crate::core::proto::acquire::forms_tests::{run_on, step};
        use proptest::prelude::*;
        use std::sync::atomic::{AtomicU32, Ordering};

        let cases = AtomicU32::new(0);
        proptest!(ProptestConfig::with_cases(48), |(steps in proptest::collection::vec(step(), 1..40))| {
            let mut memory = MemoryInline::open("inline-forms");
            run_on(&mut memory, cases.fetch_add(1, Ordering::Relaxed), &steps);
        });
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
