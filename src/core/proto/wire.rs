//! Where an operation's command is written: RESP bytes for the JS-thread socket, or a
//! request for the runtime's connection built from the very same parts (a script call keeps
//! its `Script`, so the connection can load it and send again on NOSCRIPT, or send it
//! `whole`).

use super::{scripts, Op};
use crate::core::basics::resp;
use redis::{Arg, Cmd, Script};

/// What an operation writes its command into.
pub trait Wire {
    /// `EVALSHA` of `script` with `keys` and `args`.
    fn script(&mut self, script: &'static Script, keys: &[&[u8]], args: &[&[u8]]);
    /// A plain command.
    fn command(&mut self, parts: &[&[u8]]);
}

impl Wire for Vec<u8> {
    fn script(&mut self, script: &'static Script, keys: &[&[u8]], args: &[&[u8]]) {
        write_script(self, script, keys, args);
    }

    fn command(&mut self, parts: &[&[u8]]) {
        resp::write_command(self, parts);
    }
}

/// `EVALSHA` of `script` with `keys` and `args`, appended to `out`.
pub fn write_script(out: &mut Vec<u8>, script: &Script, keys: &[&[u8]], args: &[&[u8]]) {
    let count = resp::decimal(keys.len() as u64);
    let mut parts: Vec<&[u8]> = Vec::with_capacity(3 + keys.len() + args.len());
    parts.extend([
        b"EVALSHA".as_slice(),
        script.get_hash().as_bytes(),
        count.as_bytes(),
    ]);
    parts.extend(keys.iter().chain(args).copied());
    resp::write_command(out, &parts);
}

/// An operation's command for the JS-thread socket with its script sent whole (EVAL of the
/// text) rather than by its hash. For a command whose reply nobody reads (one freeing what an
/// attempt won after its caller stopped waiting): a NOSCRIPT there, after a SCRIPT FLUSH or a
/// failover to a server that never loaded it, would go unseen and leave the lock to its TTL.
/// Only for rare commands: the text costs its bytes on every send.
pub fn write_whole<O: Op>(op: &O, out: &mut Vec<u8>) {
    op.encode(&mut Whole(out));
}

/// RESP bytes with every script call an EVAL of the script's text.
struct Whole<'a>(&'a mut Vec<u8>);

impl Wire for Whole<'_> {
    fn script(&mut self, script: &'static Script, keys: &[&[u8]], args: &[&[u8]]) {
        // Every script of ours has its text here; one that had not would still go by hash.
        let Some(source) = scripts::source_of(script.get_hash().as_bytes()) else {
            return write_script(self.0, script, keys, args);
        };
        let count = resp::decimal(keys.len() as u64);
        let mut parts: Vec<&[u8]> = Vec::with_capacity(3 + keys.len() + args.len());
        parts.extend([b"EVAL".as_slice(), source.as_bytes(), count.as_bytes()]);
        parts.extend(keys.iter().chain(args).copied());
        resp::write_command(self.0, &parts);
    }

    fn command(&mut self, parts: &[&[u8]]) {
        resp::write_command(self.0, parts);
    }
}

/// An operation's command as the runtime's connection sends it.
pub enum Request {
    /// The `EVALSHA`, written once: a Redlock sends the one request to every node, and a
    /// resend after NOSCRIPT sends it again as it is.
    Script {
        script: &'static Script,
        evalsha: Cmd,
    },
    Command(Cmd),
}

impl Request {
    pub fn of<O: Op>(op: &O) -> Request {
        let mut request = Request::Command(Cmd::new());
        op.encode(&mut request);
        request
    }
}

impl Wire for Request {
    fn script(&mut self, script: &'static Script, keys: &[&[u8]], args: &[&[u8]]) {
        let count = resp::decimal(keys.len() as u64);
        let hash = script.get_hash().as_bytes();
        let parts = || keys.iter().chain(args);
        let size = parts().map(|part| part.len()).sum::<usize>() + hash.len() + 16;
        let mut evalsha = Cmd::with_capacity(3 + keys.len() + args.len(), size);
        evalsha
            .arg(b"EVALSHA".as_slice())
            .arg(hash)
            .arg(count.as_bytes());
        for part in parts() {
            evalsha.arg(*part);
        }
        *self = Request::Script { script, evalsha };
    }

    fn command(&mut self, parts: &[&[u8]]) {
        let mut cmd = Cmd::new();
        for part in parts {
            cmd.arg(*part);
        }
        *self = Request::Command(cmd);
    }
}

/// An EVALSHA of one of our scripts as an EVAL of the script's text, with the same keys and
/// arguments. A cluster routes both by the first key, so it goes to the node that answered
/// NOSCRIPT, runs there and leaves the script cached on that node alone. `None` for any other
/// command.
pub fn whole(evalsha: &Cmd) -> Option<Cmd> {
    let mut args = evalsha.args_iter();
    let (Some(Arg::Simple(name)), Some(Arg::Simple(sha))) = (args.next(), args.next()) else {
        return None;
    };
    if !name.eq_ignore_ascii_case(b"EVALSHA") {
        return None;
    }
    let source = scripts::source_of(sha)?;
    let mut eval = Cmd::with_capacity(args.len() + 2, source.len() + 64);
    eval.arg(b"EVAL".as_slice()).arg(source);
    for arg in args {
        match arg {
            Arg::Simple(bytes) => eval.arg(bytes),
            // No call of ours has a cursor (or another kind); copying one over would misplace
            // its arguments.
            _ => return None,
        };
    }
    Some(eval)
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
