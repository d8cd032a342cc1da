//! `MemoryConnection`: a `redis::aio::ConnectionLike` onto a process-wide `memory://`
//! keyspace, for the store to use instead of a Redis connection. It answers as a RESP3
//! connection to Redis 7 would (pushes for pub/sub) without any I/O: every future is ready
//! when returned.

use super::instance::{instance, Instance};
use super::pubsub::{ChannelKind, Pushes};
use super::reply::{error_value, MemoryReply};
use crate::core::basics::sync::lock;
use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, Pipeline, PushKind, RedisFuture, Value};
use std::sync::{Arc, Mutex};

/// One connection: clones share it (its subscriptions and any open MULTI), as clones of a
/// ConnectionManager share theirs.
#[derive(Clone)]
pub struct MemoryConnection {
    inner: Arc<Inner>,
}

struct Inner {
    id: u64,
    instance: Arc<Instance>,
    pushes: Option<Pushes>,
    /// Commands queued since MULTI, when one is open.
    multi: Mutex<Option<Vec<Vec<Vec<u8>>>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.instance.drop_connection(self.id);
    }
}

impl std::fmt::Debug for MemoryConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryConnection")
            .field("id", &self.inner.id)
            .finish()
    }
}

impl MemoryConnection {
    /// A connection to the keyspace `name` (`memory://name`), shared by every connection
    /// to that name in the process. Messages on channels it subscribes to go to `pushes`
    /// as `PushKind::Message` (SUBSCRIBE) or `PushKind::SMessage` (SSUBSCRIBE).
    pub fn open(name: &str, pushes: Option<Arc<dyn Fn(redis::PushInfo) + Send + Sync>>) -> Self {
        let instance = instance(name);
        MemoryConnection {
            inner: Arc::new(Inner {
                id: instance.new_connection_id(),
                instance,
                pushes,
                multi: Mutex::new(None),
            }),
        }
    }

    /// This connection's number within its keyspace (what CLIENT ID answers).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Runs one command; its replies (several only for a (un)subscription to several
    /// channels, one confirmation each, as Redis sends them).
    fn command(&self, args: Vec<Vec<u8>>) -> Vec<Value> {
        let name = args
            .first()
            .map(|name| String::from_utf8_lossy(name).to_ascii_uppercase())
            .unwrap_or_default();
        {
            let mut multi = lock(&self.inner.multi);
            if let Some(queued) = multi.as_mut() {
                match name.as_str() {
                    "EXEC" => {}
                    "DISCARD" => {
                        *multi = None;
                        return vec![Value::Okay];
                    }
                    "MULTI" => return vec![error_value("ERR MULTI calls can not be nested")],
                    _ => {
                        queued.push(args);
                        return vec![Value::SimpleString("QUEUED".into())];
                    }
                }
            }
        }
        let rest = &args[args.len().min(1)..];
        match name.as_str() {
            "MULTI" => {
                *lock(&self.inner.multi) = Some(Vec::new());
                vec![Value::Okay]
            }
            "EXEC" => vec![self.exec()],
            "DISCARD" => vec![error_value("ERR DISCARD without MULTI")],
            "SUBSCRIBE" => self.subscribe(ChannelKind::Plain, rest),
            "SSUBSCRIBE" => self.subscribe(ChannelKind::Sharded, rest),
            "UNSUBSCRIBE" => self.unsubscribe(ChannelKind::Plain, rest),
            "SUNSUBSCRIBE" => self.unsubscribe(ChannelKind::Sharded, rest),
            "PSUBSCRIBE" | "PUNSUBSCRIBE" => vec![error_value(
                "ERR pattern subscriptions are not supported by memory://",
            )],
            "PING" => vec![match rest {
                [] => Value::SimpleString("PONG".into()),
                [message] => Value::BulkString(message.clone()),
                _ => MemoryReply::arity("ping").into_value(),
            }],
            "ECHO" => vec![match rest {
                [message] => Value::BulkString(message.clone()),
                _ => MemoryReply::arity("echo").into_value(),
            }],
            "SELECT" => vec![match rest {
                [db] if db.as_slice() == b"0" => Value::Okay,
                [_] => error_value("ERR DB index is out of range"),
                _ => MemoryReply::arity("select").into_value(),
            }],
            "HELLO" => vec![self.hello(rest)],
            "CLIENT" => vec![self.client(rest)],
            "AUTH" | "QUIT" | "RESET" | "READONLY" | "READWRITE" => vec![Value::Okay],
            _ => {
                let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                self.inner
                    .instance
                    .run(&[args])
                    .into_iter()
                    .map(MemoryReply::into_value)
                    .collect()
            }
        }
    }

    fn exec(&self) -> Value {
        let Some(queued) = lock(&self.inner.multi).take() else {
            return error_value("ERR EXEC without MULTI");
        };
        let commands: Vec<Vec<&[u8]>> = queued
            .iter()
            .map(|args| args.iter().map(Vec::as_slice).collect())
            .collect();
        Value::Array(
            self.inner
                .instance
                .run(&commands)
                .into_iter()
                .map(MemoryReply::into_value)
                .collect(),
        )
    }

    fn subscribe(&self, kind: ChannelKind, channels: &[Vec<u8>]) -> Vec<Value> {
        let (push_kind, name) = match kind {
            ChannelKind::Plain => (PushKind::Subscribe, "subscribe"),
            ChannelKind::Sharded => (PushKind::SSubscribe, "ssubscribe"),
        };
        if channels.is_empty() {
            return vec![MemoryReply::arity(name).into_value()];
        }
        channels
            .iter()
            .map(|channel| {
                let count = self.inner.instance.subscribe(
                    self.inner.id,
                    kind,
                    channel,
                    self.inner.pushes.clone(),
                );
                confirmation(push_kind.clone(), Value::BulkString(channel.clone()), count)
            })
            .collect()
    }

    /// With no channels, from every channel of that kind; with none to leave, one
    /// confirmation naming no channel, as Redis sends.
    fn unsubscribe(&self, kind: ChannelKind, channels: &[Vec<u8>]) -> Vec<Value> {
        let push_kind = match kind {
            ChannelKind::Plain => PushKind::Unsubscribe,
            ChannelKind::Sharded => PushKind::SUnsubscribe,
        };
        let channels = if channels.is_empty() {
            self.inner.instance.channels_of(self.inner.id, kind)
        } else {
            channels.to_vec()
        };
        if channels.is_empty() {
            return vec![confirmation(push_kind, Value::Nil, 0)];
        }
        channels
            .into_iter()
            .map(|channel| {
                let count = self
                    .inner
                    .instance
                    .unsubscribe(self.inner.id, kind, &channel);
                confirmation(push_kind.clone(), Value::BulkString(channel), count)
            })
            .collect()
    }

    fn hello(&self, args: &[Vec<u8>]) -> Value {
        let protocol = match args.first().map(Vec::as_slice) {
            None | Some(b"3") => 3,
            Some(b"2") => 2,
            Some(_) => return error_value("NOPROTO unsupported protocol version"),
        };
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        Value::Map(vec![
            (text("server"), text("redis")),
            (text("version"), text("7.0.0")),
            (text("proto"), Value::Int(protocol)),
            (text("id"), Value::Int(self.inner.id as i64)),
            (text("mode"), text("standalone")),
            (text("role"), text("master")),
            (text("modules"), Value::Array(Vec::new())),
        ])
    }

    fn client(&self, args: &[Vec<u8>]) -> Value {
        let sub = args
            .first()
            .map(|sub| String::from_utf8_lossy(sub).to_ascii_uppercase())
            .unwrap_or_default();
        match sub.as_str() {
            "ID" => Value::Int(self.inner.id as i64),
            "GETNAME" => Value::Nil,
            "" => MemoryReply::arity("client").into_value(),
            _ => Value::Okay,
        }
    }
}

fn confirmation(kind: PushKind, channel: Value, count: i64) -> Value {
    Value::Push {
        kind,
        data: vec![channel, Value::Int(count)],
    }
}

fn args_of(cmd: &Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .map(|arg| match arg {
            Arg::Simple(bytes) => bytes.to_vec(),
            // A cursor command's cursor; no command of ours uses one.
            _ => b"0".to_vec(),
        })
        .collect()
}

fn is_subscription(cmd: &Cmd) -> bool {
    cmd.args_iter().next().is_some_and(|name| match name {
        Arg::Simple(name) => {
            let name = name.to_ascii_uppercase();
            matches!(
                name.as_slice(),
                b"SUBSCRIBE" | b"SSUBSCRIBE" | b"UNSUBSCRIBE" | b"SUNSUBSCRIBE"
            )
        }
        _ => false,
    })
}

impl ConnectionLike for MemoryConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let mut replies = self.command(args_of(cmd));
        // Several confirmations answer one (un)subscription; the caller reads the last, as
        // it would off a socket once the others were passed to the push sender.
        let reply = replies.pop().unwrap_or(Value::Nil);
        Box::pin(std::future::ready(Ok(reply)))
    }

    /// Answers as the multiplexed connection does: of every reply the pipeline's commands
    /// get (with MULTI and EXEC around a transaction's), `count` after the first `offset`;
    /// a pipeline of one (un)subscription gets all its confirmations.
    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let mut commands: Vec<Vec<Vec<u8>>> = Vec::with_capacity(pipeline.len() + 2);
        if pipeline.is_transaction() {
            commands.push(vec![b"MULTI".to_vec()]);
        }
        commands.extend(pipeline.cmd_iter().map(args_of));
        if pipeline.is_transaction() {
            commands.push(vec![b"EXEC".to_vec()]);
        }
        let single_subscription = !pipeline.is_transaction()
            && pipeline.len() == 1
            && pipeline.cmd_iter().all(is_subscription);
        let replies: Vec<Value> = commands
            .into_iter()
            .flat_map(|args| self.command(args))
            .collect();
        let replies = if single_subscription {
            replies
        } else {
            replies.into_iter().skip(offset).take(count).collect()
        };
        Box::pin(std::future::ready(Ok(replies)))
    }

    fn get_db(&self) -> i64 {
        0
    }
}
