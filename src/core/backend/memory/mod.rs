//! `memory://`: an embedded, in-process stand-in for Redis that runs our same Lua scripts
//! on a process-wide keyspace, so lock decisions stay written once, in the scripts, and a
//! single process (every worker thread of it) can lock without a server. The hottest of
//! them also have a native form (native.rs), proven to answer and write as the script does.
//! Only the commands our scripts and the store send are implemented, with Redis 7's
//! semantics and replies.

mod cjson;
mod cjson_read;
mod cjson_write;
mod clock;
mod commands;
mod deadlines;
mod hashes;
mod inline;
mod instance;
mod keyspace;
mod lua;
mod native;
mod number;
mod pubsub;
mod reply;
mod sorted_set;
mod store;
mod strings;
mod zset;

#[cfg(test)]
mod memory_tests;

pub use commands::Commands;
pub use inline::MemoryInline;
pub use store::MemoryStore;

/// Runs one plain command on the keyspace `name` (without `memory://`), as Redis would
/// answer it: what a test reads and writes beside the locks, on the very keyspace they use.
pub fn command(name: &str, args: &[&[u8]]) -> redis::Value {
    let mut replies = instance::instance(name).run(&[args]);
    match replies.pop() {
        Some(reply) => reply.into_value(),
        None => reply::error_value("ERR no reply"),
    }
}

/// Runs `commands` on the keyspace `name` as one atomic step, as an EXEC would, and
/// answers its replies: what a test compares with a transaction on Redis.
pub fn transaction(name: &str, commands: &[Vec<&[u8]>]) -> Vec<redis::Value> {
    instance::instance(name)
        .run(commands)
        .into_iter()
        .map(reply::MemoryReply::into_value)
        .collect()
}
pub use lua::sha1_hex;
