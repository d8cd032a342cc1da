//! The process-wide keyspaces, one per `memory://` name, each with its Lua state behind one
//! lock: a command or a whole script (or a MULTI/EXEC) runs with the lock held, messages it
//! published are delivered once the lock is released.

use super::keyspace::{unknown_command, Keyspace};
use super::lua::LuaHost;
use super::native;
use super::number::parse_i64;
use super::pubsub::{deliver, ChannelKind, Pushes};
use super::reply::{MemoryReply, NOT_INTEGER};
use crate::core::basics::sync::lock;
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
    /// Which scripts with a native form (bit `native::index`) the Lua state has loaded:
    /// read by each EVALSHA of one, instead of a look-up of its SHA-1 in the state.
    natives: u8,
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
                    natives: 0,
                }),
                next_connection: AtomicU64::new(1),
            })
        })
        .clone()
}

/// What a step answers for a bug of ours (a panic caught before it reaches the caller).
fn internal_error() -> MemoryReply {
    MemoryReply::error("ERR internal error in the memory:// backend")
}

impl Instance {
    pub fn new_connection_id(&self) -> u64 {
        self.next_connection.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `commands` one after the other as one atomic step, at one reading of the
    /// clock: one command, a transaction's, or the several commands of one call (which
    /// Redis would time one by one outside MULTI; nothing can tell, as no other step runs
    /// between them).
    pub fn run<'a, C: AsRef<[&'a [u8]]>>(&self, commands: &[C]) -> Vec<MemoryReply> {
        let (replies, outbox) = {
            let mut engine = lock(&self.engine);
            // One reading of the clock for the whole step, as Redis 7.2+ gives a transaction
            // or a script: its commands see time stand still (and a pair reads the clock
            // twice, not once per command). The tick sweeps expired keys, so a bug there is
            // caught as the commands' are.
            if catch_unwind(AssertUnwindSafe(|| engine.keyspace.tick())).is_err() {
                return commands.iter().map(|_| internal_error()).collect();
            }
            let replies = commands
                .iter()
                .map(|args| {
                    // A bug of ours must come back as an error reply, not unwind into the
                    // caller (or through Node).
                    catch_unwind(AssertUnwindSafe(|| engine.execute(args.as_ref())))
                        .unwrap_or_else(|_| internal_error())
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
        // Compared in place: a copy of the name in capitals per command cost more than
        // most commands themselves.
        if name.eq_ignore_ascii_case(b"EVALSHA") {
            self.eval("EVALSHA", &args[1..])
        } else if name.eq_ignore_ascii_case(b"EVAL") {
            self.eval("EVAL", &args[1..])
        } else if name.eq_ignore_ascii_case(b"SCRIPT") {
            self.script(&args[1..])
        } else {
            self.keyspace.execute(args)
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
        let loaded;
        let sha = if name == "EVAL" {
            match lua.load(script) {
                Ok(sha) => {
                    self.natives |= native_bit(&sha);
                    loaded = sha;
                    loaded.as_bytes()
                }
                Err(reply) => return reply,
            }
        } else {
            script
        };
        let (keys, argv) = rest.split_at(numkeys);
        // Run natively only what the script would run: one not loaded is refused alike.
        if let Some((_, form)) = native::form(sha).filter(|(at, _)| self.natives & (1 << at) != 0) {
            if let Some(reply) = form(&mut self.keyspace, keys, argv) {
                return reply;
            }
        }
        lua.run(
            &mut self.keyspace,
            &String::from_utf8_lossy(sha),
            keys,
            argv,
        )
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
                [source] => match lua.load(source) {
                    Ok(sha) => {
                        self.natives |= native_bit(&sha);
                        MemoryReply::bulk(sha)
                    }
                    Err(err) => err,
                },
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
                self.natives = 0;
                MemoryReply::ok()
            }
            _ => unknown_command("script", args),
        }
    }
}

/// The bit of `Engine::natives` for the script `sha` just loaded (none when it has no
/// native form).
fn native_bit(sha: &str) -> u8 {
    native::index(sha.as_bytes()).map_or(0, |at| 1 << at)
}
