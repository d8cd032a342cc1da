//! The commands an operation writes (`Wire`, the one definition of each operation), kept as
//! the keyspace takes them: each argument's bytes side by side, with no RESP framing to write
//! and then read back, for calls run inline (inline.rs).

use crate::core::proto::Wire;
use redis::Script;

/// Commands in the order written: their arguments' bytes end to end, where each argument
/// ends, and where each command's arguments end.
#[derive(Default)]
pub struct Commands {
    bytes: Vec<u8>,
    arg_ends: Vec<usize>,
    command_ends: Vec<usize>,
}

impl Commands {
    /// Room for a call's usual request (a transaction of a few commands) without growing.
    pub fn new() -> Self {
        Commands {
            bytes: Vec::with_capacity(256),
            arg_ends: Vec::with_capacity(24),
            command_ends: Vec::with_capacity(8),
        }
    }

    fn push(&mut self, arg: &[u8]) {
        self.bytes.extend_from_slice(arg);
        self.arg_ends.push(self.bytes.len());
    }

    fn end_command(&mut self) {
        self.command_ends.push(self.arg_ends.len());
    }

    /// `run` of each command's arguments, borrowed, as the keyspace runs them: listed on
    /// the stack for a call's usual request, in two lists made for a larger one.
    pub fn split<R>(&self, run: impl FnOnce(&[&[&[u8]]]) -> R) -> R {
        const ARGS: usize = 32;
        const COMMANDS: usize = 8;
        let count = self.command_ends.len();
        if self.arg_ends.len() <= ARGS && count <= COMMANDS {
            let mut args: [&[u8]; ARGS] = [&[]; ARGS];
            self.args_into(&mut args);
            let mut commands: [&[&[u8]]; COMMANDS] = [&[]; COMMANDS];
            self.commands_into(&args, &mut commands);
            return run(&commands[..count]);
        }
        let mut args: Vec<&[u8]> = vec![&[]; self.arg_ends.len()];
        self.args_into(&mut args);
        let mut commands: Vec<&[&[u8]]> = vec![&[]; count];
        self.commands_into(&args, &mut commands);
        run(&commands)
    }

    /// Each argument's bytes, in order, into the first slots of `args`.
    fn args_into<'a>(&'a self, args: &mut [&'a [u8]]) {
        let mut start = 0;
        for (slot, &end) in args.iter_mut().zip(&self.arg_ends) {
            *slot = &self.bytes[start..end];
            start = end;
        }
    }

    /// Each command's arguments (`args`, from `args_into`), into the first slots of
    /// `commands`.
    fn commands_into<'a>(&self, args: &'a [&'a [u8]], commands: &mut [&'a [&'a [u8]]]) {
        let mut first = 0;
        for (slot, &last) in commands.iter_mut().zip(&self.command_ends) {
            *slot = &args[first..last];
            first = last;
        }
    }

    /// Empty, its room kept for the next call's commands (bar what an outsized one took).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.bytes.shrink_to(4096);
        self.arg_ends.clear();
        self.command_ends.clear();
    }
}

impl Wire for Commands {
    fn script(&mut self, script: &'static Script, keys: &[&[u8]], args: &[&[u8]]) {
        self.push(b"EVALSHA");
        self.push(script.get_hash().as_bytes());
        self.push(crate::core::basics::resp::decimal(keys.len() as u64).as_bytes());
        for part in keys.iter().chain(args) {
            self.push(part);
        }
        self.end_command();
    }

    fn command(&mut self, parts: &[&[u8]]) {
        for part in parts {
            self.push(part);
        }
        self.end_command();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::proto::scripts;

    #[test]
    fn keeps_each_command_s_arguments_apart() {
        let mut commands = Commands::new();
        commands.command(&[b"MULTI"]);
        commands.command(&[b"SET", b"k", b"", b"NX"]);
        commands.script(&scripts::RELEASE, &[b"k"], &[b"t"]);
        let hash = scripts::RELEASE.get_hash().as_bytes();
        let split = commands.split(|split| format!("{split:?}"));
        let want: [&[&[u8]]; 3] = [
            &[b"MULTI"],
            &[b"SET", b"k", b"", b"NX"],
            &[b"EVALSHA", hash, b"1", b"k", b"t"],
        ];
        assert_eq!(split, format!("{want:?}"));
        commands.clear();
        assert!(commands.split(|split| split.is_empty()));
    }
}
