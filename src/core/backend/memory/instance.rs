//! The process-wide keyspaces, one per `memory://` name, each with its Lua state behind one
//! lock: a command or a whole script (or a MULTI/EXEC) runs with the lock held, messages it
//! published are delivered once the lock is released.

use super::keyspace::{command_name, unknown_command, Keyspace};
use super::lua::LuaHost;
use super::native;
use super::number::parse_i64;
use super::pubsub::{deliver, ChannelKind, Pushes};
use super::reply::{MemoryReply, NOT_INTEGER};
use crate::core::basics::sync::lock;
use std::borrow::Cow;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

static INSTANCES: LazyLock<Mutex<HashMap<String, Arc<Instance>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

pub struct Instance {
    engine: Mutex<Engine>,
    next_connection: AtomicU64,
}

struct Engine {
    keyspace: Keyspace,
    /// `Err` keeps why no Lua state could be made; every script then fails with it.
    lua: Result<LuaHost, String>,
}

/// The keyspace named `name`, made on first use; it lives as long as the process.
pub fn instance(name: &str) -> Arc<Instance> {
    let mut instances = lock(&INSTANCES);
    instances
        .entry(name.to_owned())
        .or_insert_with(|| {
            Arc::new(Instance {
                engine: Mutex::new(Engine {
                    keyspace: Keyspace::new(),
                    lua: LuaHost::new().map_err(|err| format!("ERR no Lua state: {err}")),
                }),
                next_connection: AtomicU64::new(1),
            })
        })
        .clone()
}

impl Instance {
    pub fn new_connection_id(&self) -> u64 {
        self.next_connection.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `commands` one after the other as one atomic step: one command, or a
    /// transaction's.
    pub fn run(&self, commands: &[Vec<&[u8]>]) -> Vec<MemoryReply> {
        let (replies, outbox) = {
            let mut engine = lock(&self.engine);
            let replies = commands
                .iter()
                .map(|args| {
                    // A bug of ours must come back as an error reply, not unwind into the
                    // caller (or through Node).
                    catch_unwind(AssertUnwindSafe(|| engine.execute(args))).unwrap_or_else(|_| {
                        MemoryReply::error("ERR internal error in the memory:// backend")
                    })
                })
                .collect();
            (replies, engine.keyspace.pubsub.take_outbox())
        };
        deliver(outbox);
        replies
    }

    pub fn subscribe(
        &self,
        id: u64,
        kind: ChannelKind,
        channel: &[u8],
        pushes: Option<Pushes>,
    ) -> i64 {
        lock(&self.engine)
            .keyspace
            .pubsub
            .subscribe(id, kind, channel, pushes)
    }

    pub fn unsubscribe(&self, id: u64, kind: ChannelKind, channel: &[u8]) -> i64 {
        lock(&self.engine)
            .keyspace
            .pubsub
            .unsubscribe(id, kind, channel)
    }

    pub fn drop_connection(&self, id: u64) {
        lock(&self.engine).keyspace.pubsub.drop_connection(id);
    }
}

impl Engine {
    fn execute(&mut self, args: &[&[u8]]) -> MemoryReply {
        let Some(name) = args.first() else {
            return MemoryReply::error("ERR empty command");
        };
        let mut buf = [0; 32];
        let name = command_name(name, &mut buf);
        match &*name {
            "EVALSHA" | "EVAL" => self.eval(&name, &args[1..]),
            "SCRIPT" => self.script(&args[1..]),
            _ => {
                self.keyspace.tick();
                self.keyspace.execute(args)
            }
        }
    }

    /// EVALSHA sha numkeys key... arg... / EVAL source numkeys key... arg...
    fn eval(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [script, numkeys, rest @ ..] = args else {
            return MemoryReply::arity(name);
        };
        let Some(numkeys) = parse_i64(numkeys) else {
            return MemoryReply::error(NOT_INTEGER);
        };
        if numkeys < 0 {
            return MemoryReply::error("ERR Number of keys can't be negative");
        }
        let Some(numkeys) = usize::try_from(numkeys).ok().filter(|n| *n <= rest.len()) else {
            return MemoryReply::error("ERR Number of keys can't be greater than number of args");
        };
        let lua = match &mut self.lua {
            Ok(lua) => lua,
            Err(why) => return MemoryReply::Error(why.clone()),
        };
        let sha = if name == "EVAL" {
            match lua.load(script) {
                Ok(sha) => Cow::Owned(sha),
                Err(reply) => return reply,
            }
        } else {
            String::from_utf8_lossy(script)
        };
        let (keys, argv) = rest.split_at(numkeys);
        // Run natively only what the script would run: one not loaded is refused alike.
        if let Some(form) = native::form(&sha).filter(|_| lua.exists(&sha)) {
            self.keyspace.tick();
            if let Some(reply) = form(&mut self.keyspace, keys, argv) {
                return reply;
            }
        }
        lua.run(&mut self.keyspace, &sha, keys, argv)
    }

    /// SCRIPT LOAD | EXISTS | FLUSH
    fn script(&mut self, args: &[&[u8]]) -> MemoryReply {
        let lua = match &mut self.lua {
            Ok(lua) => lua,
            Err(why) => return MemoryReply::Error(why.clone()),
        };
        let Some(sub) = args.first() else {
            return MemoryReply::arity("script");
        };
        match String::from_utf8_lossy(sub).to_ascii_uppercase().as_str() {
            "LOAD" => match &args[1..] {
                [source] => lua.load(source).map_or_else(|err| err, MemoryReply::bulk),
                _ => MemoryReply::arity("script|load"),
            },
            "EXISTS" if args.len() > 1 => MemoryReply::Array(
                args[1..]
                    .iter()
                    .map(|sha| {
                        MemoryReply::Int(i64::from(lua.exists(&String::from_utf8_lossy(sha))))
                    })
                    .collect(),
            ),
            "FLUSH" => {
                lua.flush();
                MemoryReply::ok()
            }
            _ => unknown_command("script", args),
        }
    }
}
