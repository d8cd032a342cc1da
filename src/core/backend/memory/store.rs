//! `memory://` keeping the locks: each lock operation is its `proto` op run on the
//! process-wide keyspace, through the same Lua scripts as on Redis, with nothing in
//! between: no connection to emulate, no timeout to wait out (a call is over when it
//! returns), and what the scripts publish goes straight to the listener.

use super::commands::Commands;
use super::instance::{instance, Instance};
use super::pubsub::{ChannelKind, Pushes};
use super::reply::MemoryReply;
use crate::core::backend::endpoint::Endpoint;
use crate::core::backend::lock_store::{
    published, Caps, Fairness, FastPath, Fencing, Handover, Listener, LockStore, ScriptsFor,
    Subscriptions, WakeKind, IDLE_SUBSCRIPTIONS,
};
use crate::core::basics::drops::Drops;
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::proto::acquire::{AcquireAttempt, Acquired};
use crate::core::proto::refresh::RefreshBatch;
use crate::core::proto::{scripts, Op};
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

pub struct MemoryStore {
    endpoint: Endpoint,
    instance: Arc<Instance>,
    /// Our subscriptions' owner in the keyspace.
    id: u64,
    pushes: Pushes,
    /// Every script is loaded (cleared by a NOSCRIPT: a SCRIPT FLUSH).
    scripts_ready: AtomicBool,
    /// Never signalled: nothing here can drop.
    lost: Drops,
    /// Serialises (un)subscribing, so idle channels are taken once.
    switching: Mutex<()>,
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        self.instance.drop_connection(self.id);
    }
}

impl MemoryStore {
    /// The keyspace `endpoint` names (`memory://name`), made on first use.
    pub fn open(endpoint: Endpoint, name: &str, listener: Arc<dyn Listener>) -> MemoryStore {
        let instance = instance(name);
        let pushes: Pushes = Arc::new(move |push: redis::PushInfo| {
            if let Some((channel, payload)) = published(&push) {
                listener.message(channel, payload);
            }
        });
        MemoryStore {
            endpoint,
            id: instance.new_connection_id(),
            instance,
            pushes,
            scripts_ready: AtomicBool::new(false),
            lost: Drops::default(),
            switching: Mutex::new(()),
        }
    }

    /// One command, reloading the scripts once if the keyspace lost them (as the redis
    /// crate's script call does on NOSCRIPT).
    fn execute(&self, args: &[&[u8]]) -> Value {
        let reply = self.once(args);
        if !is_noscript(&reply) {
            return reply.into_value();
        }
        self.scripts_ready.store(false, Ordering::Relaxed);
        self.load_scripts();
        self.once(args).into_value()
    }

    fn once(&self, args: &[&[u8]]) -> MemoryReply {
        let mut replies = self.instance.run(&[args]);
        replies
            .pop()
            .unwrap_or_else(|| MemoryReply::error("ERR no reply"))
    }

    fn load_scripts(&self) {
        for source in scripts::ALL_SOURCES {
            let _hash = self.once(&[b"SCRIPT", b"LOAD", source.as_bytes()]);
        }
        self.scripts_ready.store(true, Ordering::Relaxed);
    }

    fn unsubscribe(&self, channels: Vec<Vec<u8>>) {
        for channel in channels {
            self.instance
                .unsubscribe(self.id, ChannelKind::Sharded, &channel);
        }
    }
}

impl LockStore for MemoryStore {
    fn caps(&self) -> Caps {
        Caps {
            fencing: Fencing::Strict,
            handover: Handover::InScript,
            fairness: Fairness::Line,
            fast_path: FastPath::Inline,
            wake: WakeKind::QueueChecked,
            // Its inline calls (`MemoryInline`) take MULTI; its own are scripts, as the
            // runtime's are on Redis.
            transactions: true,
            doubt_unconfirmed: false,
        }
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// A server error is an error, as on Redis.
    async fn run<O: Op + Sync>(&self, op: &O, _: Duration) -> Result<O::Out, LockError>
    where
        O::Out: Send,
    {
        let mut commands = Commands::new();
        op.encode(&mut commands);
        // The runtime sends an operation's last command alone (its script).
        let reply = commands.split(|commands| self.execute(commands.last().unwrap_or(&&[][..])));
        op.decode(reply.extract_error()?)
    }

    /// Never left running: nothing to free behind it.
    async fn acquire(
        &self,
        op: &AcquireAttempt<'_>,
        bound: Duration,
    ) -> Result<Acquired, LockError> {
        self.run(op, bound).await
    }

    /// Each command on its own, as a pipeline's are.
    async fn refresh(&self, batch: &RefreshBatch, _: Duration) -> Vec<Option<bool>> {
        let replies = batch
            .commands()
            .iter()
            .map(|cmd| {
                let args: Vec<&[u8]> = cmd
                    .args_iter()
                    .filter_map(|arg| match arg {
                        redis::Arg::Simple(bytes) => Some(bytes),
                        _ => None,
                    })
                    .collect();
                self.execute(&args).extract_error().ok()
            })
            .collect();
        batch.answers(replies)
    }

    async fn listen(&self, channel: &[u8], subs: &dyn Subscriptions, _: Duration) -> bool {
        let _switching = lock(&self.switching);
        if subs.is_subscribed(channel) {
            return true;
        }
        if !subs.is_wanted(channel) {
            return false;
        }
        self.unsubscribe(subs.take_idle(IDLE_SUBSCRIPTIONS));
        self.instance.subscribe(
            self.id,
            ChannelKind::Sharded,
            channel,
            Some(self.pushes.clone()),
        );
        subs.mark_subscribed(channel);
        true
    }

    async fn drop_idle(&self, subs: &dyn Subscriptions, _: Duration) {
        let _switching = lock(&self.switching);
        self.unsubscribe(subs.take_idle(IDLE_SUBSCRIPTIONS / 2));
    }

    async fn prepare(&self, _: Duration, _: ScriptsFor) -> Result<(), LockError> {
        if !self.scripts_ready.load(Ordering::Relaxed) {
            self.load_scripts();
        }
        Ok(())
    }

    fn is_prepared(&self) -> bool {
        self.scripts_ready.load(Ordering::Relaxed)
    }

    fn lost(&self) -> &Drops {
        &self.lost
    }

    /// The keyspace's own clock, as its TIME answers.
    async fn server_time(&self, _: &[u8], _: Duration) -> Result<SystemTime, LockError> {
        let (secs, micros): (u64, u64) =
            crate::core::basics::resp::typed(self.execute(&[b"TIME"]))?;
        Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros))
    }
}

fn is_noscript(reply: &MemoryReply) -> bool {
    matches!(reply, MemoryReply::Error(text) if text.starts_with("NOSCRIPT"))
}
