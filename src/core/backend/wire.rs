//! What `Link`'s call loop needs of a connection, so that one loop (deadline, refusals, RESP3
//! fallback, scripts, subscriptions) serves every kind: one server's `ConnectionManager` here,
//! a cluster's connection in `cluster_wire.rs`. A wire opens lazily and knows nothing of locks.

use super::endpoint::Endpoint;
use super::lock_store::{published, unsubscribed, Listener, LostScope};
use super::staleness::Staleness;
use super::upstream::Upstream;
use crate::core::basics::drops::Drops;
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::basics::trace::{self, ScriptNames};
use crate::core::proto::scripts;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, Pipeline, RedisResult, Value};
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::time::Instant;

/// A `DEBUG` line (basics/trace.rs) for a command this layer sends beside the lock calls
/// (scripts loaded, subscriptions, a script sent again after NOSCRIPT), as theirs are
/// written: `packed` is made only when tracing is on.
pub(super) fn trace_sent<T>(
    packed: impl FnOnce() -> Vec<u8>,
    started: std::time::Instant,
    result: &RedisResult<T>,
) {
    trace_named(packed, started, result, scripts::name_of);
}

/// `trace_sent`, naming scripts with `names`.
pub(super) fn trace_named<T>(
    packed: impl FnOnce() -> Vec<u8>,
    started: std::time::Instant,
    result: &RedisResult<T>,
    names: ScriptNames,
) {
    if !trace::on() {
        return;
    }
    // A server's refusal by its own code (NOSCRIPT, NOPERM...), anything else by ours.
    let outcome = match result {
        Ok(_) => "ok",
        Err(err) => err
            .code()
            .unwrap_or_else(|| LockError::from(err.clone()).code()),
    };
    trace::call("runtime", &packed(), started.elapsed(), outcome, names);
}

/// The bytes of one command, for a `DEBUG` line.
pub(super) fn packed(cmd: &Cmd) -> Vec<u8> {
    cmd.get_packed_command()
}

/// The channels a connection subscribed to, as the crate's resubscription after a reconnect
/// sends them (`set_automatic_resubscription`: SUBSCRIBE, then SSUBSCRIBE, each naming all).
#[derive(Clone, Default)]
pub struct Subscribed {
    plain: BTreeSet<Vec<u8>>,
    sharded: BTreeSet<Vec<u8>>,
}

impl Subscribed {
    pub(super) fn add(&mut self, channel: &[u8], sharded: bool) {
        match sharded {
            true => self.sharded.insert(channel.to_vec()),
            false => self.plain.insert(channel.to_vec()),
        };
    }

    pub(super) fn remove(&mut self, channels: &[Vec<u8>]) {
        for channel in channels {
            self.plain.remove(channel);
            self.sharded.remove(channel);
        }
    }

    /// A new connection subscribes to nothing until asked.
    pub(super) fn clear(&mut self) {
        *self = Subscribed::default();
    }

    /// The resubscription's commands, after `setup`'s.
    fn again(&self, setup: &mut Pipeline) {
        for (name, channels) in [("SUBSCRIBE", &self.plain), ("SSUBSCRIBE", &self.sharded)] {
            if !channels.is_empty() {
                setup.cmd(name).arg(channels.iter().collect::<Vec<_>>());
            }
        }
    }
}

/// With `DEBUG` on: since when the crate's setup of a (re)opened connection is untraced, and
/// what it subscribes to again (nothing on a new connection).
pub(super) struct Untraced {
    pub(super) since: std::time::Instant,
    pub(super) resubscribed: Subscribed,
}

/// The setup untraced from now on, unless one is already: after a drop, with what
/// `subscribed` holds then.
pub(super) fn untraced_from_now(
    setup: &std::sync::Mutex<Option<Untraced>>,
    subscribed: &std::sync::Mutex<Subscribed>,
) {
    let mut setup = lock(setup);
    if setup.is_none() {
        *setup = Some(Untraced {
            since: std::time::Instant::now(),
            resubscribed: lock(subscribed).clone(),
        });
    }
}

/// Where a connection's pushes go: messages to the listener, a dropped socket to the
/// watchdog (through `dropped`) and to the waiters, and the scripts marked unloaded.
#[derive(Clone)]
pub struct PushSink {
    pub(super) dropped: Arc<Drops>,
    /// With `DEBUG` on: since when a reconnect's setup is untraced (see `Conduit::setup`).
    pub(super) setup: Arc<std::sync::Mutex<Option<Untraced>>>,
    /// What the connection subscribed to, which the crate subscribes to again.
    pub(super) subscribed: Arc<std::sync::Mutex<Subscribed>>,
    pub(super) scripts_ready: Arc<AtomicBool>,
    pub(super) scripts_refused: Arc<AtomicBool>,
    pub(super) listener: Arc<dyn Listener>,
    /// Set on a dropped socket when the server behind it can change (a Sentinel set's
    /// master may have been demoted): `Link` then asks where it is now.
    pub(super) stale: Option<Arc<Staleness>>,
    /// Which connection this is, and which is `Link`'s now: a connection already replaced
    /// (still alive in a call that took it before) has had its drop dealt with at the switch.
    pub(super) id: u64,
    pub(super) current: Arc<AtomicU64>,
    /// `Link::up`: a call was answered since the last drop signalled, by a push or a call.
    pub(super) up: Arc<AtomicBool>,
}

impl PushSink {
    pub fn deliver(&self, push: &redis::PushInfo) {
        match push.kind {
            redis::PushKind::Disconnection => {
                if self.current.load(Ordering::Acquire) != self.id {
                    // Marked, it would be the new connection that is replaced.
                    return;
                }
                // A call that met the drop first signalled it (`Link::call`): one drop.
                let untold = self.up.swap(false, Ordering::AcqRel);
                match &self.stale {
                    // Signalled just below: the switch adds no drop of its own.
                    Some(stale) if untold => stale.mark_told(),
                    Some(stale) => stale.mark(),
                    None => {}
                }
                self.scripts_ready.store(false, Ordering::Relaxed);
                self.scripts_refused.store(false, Ordering::Relaxed);
                if trace::on() {
                    // The manager reconnects now, and sends its setup again.
                    untraced_from_now(&self.setup, &self.subscribed);
                }
                if untold {
                    self.dropped.signal();
                }
                self.listener.connection_lost(LostScope::All);
            }
            redis::PushKind::SUnsubscribe => {
                if let Some(channel) = unsubscribed(push) {
                    self.listener.unsubscribed(channel);
                }
            }
            _ => {
                if let Some((channel, payload)) = published(push) {
                    self.listener.message(channel, payload);
                }
            }
        }
    }
}

/// Where a connection to one server goes: a fixed address, or the master a Sentinel set names,
/// asked before `deadline` (`upstream.rs`).
pub struct Destination<'a> {
    pub(super) upstream: &'a Upstream,
    pub(super) deadline: Instant,
}

/// How the scripts reach the servers a connection's EVALSHAs go to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ScriptLoading {
    /// All of them, in one round trip after each (re)connect and before the first call that
    /// needs them (`load_scripts`); a NOSCRIPT loads that script and sends the call again.
    Upfront,
    /// None ahead: a call answered NOSCRIPT is sent again whole (EVAL) where it went, which
    /// caches the script on that node. A cluster's SCRIPT LOAD goes to every node and waits
    /// on any that is down, which must not hold up calls on the others.
    ByCall,
}

/// A connection `Link` drives. Cloning is cheap and shares the connection.
pub trait Conduit: ConnectionLike + Clone + Send + Sync + 'static {
    const SCRIPTS: ScriptLoading;

    /// Whether a call left unanswered past its bound leaves the connection fit for the next
    /// ones, so it is kept: each node's replies are matched to its requests in order, a slow
    /// or paused node answers later on the same socket, and a socket that dies is
    /// reconnected by the connection itself. A single server's manager is opened afresh
    /// instead (see `Link::call`).
    const KEPT_ON_TIMEOUT: bool = false;

    /// The slot `cmd` goes to, where the connection routes by slot: what a call on it left
    /// unanswered puts in doubt (`Drops::signal_slot`).
    fn slot_of(_cmd: &Cmd) -> Option<u16> {
        None
    }

    /// The slot `key` is in, where the connection routes by slot (see `slot_of`).
    fn slot_of_key(_key: &[u8]) -> Option<u16> {
        None
    }

    /// Opens lazily: reaches no server but the Sentinel set `destination` may ask where its
    /// master is. `resp3: false` carries no pushes.
    fn open<'a>(
        endpoint: &'a Endpoint,
        destination: Destination<'a>,
        resp3: bool,
        pushes: PushSink,
    ) -> impl Future<Output = Result<Self, LockError>> + Send + 'a;

    /// Loads every script where this connection's EVALSHAs may go, in one round trip where
    /// the connection allows it. Asked only of an `Upfront` connection.
    fn load_scripts(
        &mut self,
        sources: &'static [&'static str],
    ) -> impl Future<Output = RedisResult<()>> + Send;

    /// SSUBSCRIBE to one channel; a server error (no SSUBSCRIBE) comes back as itself.
    fn subscribe_sharded(&mut self, channel: &[u8])
        -> impl Future<Output = RedisResult<()>> + Send;

    fn subscribe_plain(&mut self, channel: &[u8]) -> impl Future<Output = RedisResult<()>> + Send;

    /// SUNSUBSCRIBE (`sharded`) or UNSUBSCRIBE from channels nobody waits on any more.
    fn unsubscribe(
        &mut self,
        channels: Vec<Vec<u8>>,
        sharded: bool,
    ) -> impl Future<Output = RedisResult<()>> + Send;

    /// What the redis crate sends by itself on each (re)connect of this connection, for a
    /// `DEBUG` line (`Link` writes it at the first answer after): its setup, then on a
    /// reconnect the channels `subscribed` again. `None` where it cannot be told (a cluster's
    /// connections, one per node, made as the crate sees fit).
    fn setup(_endpoint: &Endpoint, _resp3: bool, _subscribed: &Subscribed) -> Option<Pipeline> {
        None
    }

    /// This connection, or one beside it, that never sends a command again by itself once
    /// it may have reached the server: for a call that must not run twice (`Replay::Never`).
    /// A `ConnectionManager` never resends, so it is itself.
    fn sent_once(&self) -> Self {
        self.clone()
    }
}

impl Conduit for ConnectionManager {
    const SCRIPTS: ScriptLoading = ScriptLoading::Upfront;

    async fn open(
        endpoint: &Endpoint,
        destination: Destination<'_>,
        resp3: bool,
        pushes: PushSink,
    ) -> Result<Self, LockError> {
        let client = destination
            .upstream
            .client(endpoint, resp3, destination.deadline)
            .await?;
        // No retries inside the manager: it would retry a rejected AUTH as patiently as a
        // refused connection. `call` retries refused connections itself, and the
        // manager reconnects whenever a call finds the connection dead. Per-call timeouts
        // bound everything, so the manager has no response timeout.
        let mut config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(endpoint.connect_timeout))
            .set_response_timeout(None);
        if resp3 {
            config = config.set_automatic_resubscription().set_push_sender(
                move |push: redis::PushInfo| {
                    pushes.deliver(&push);
                    Ok::<(), std::convert::Infallible>(())
                },
            );
        }
        Ok(ConnectionManager::new_lazy_with_config(client, config)?)
    }

    /// The crate's setup (redis 1.8, `connection_setup_pipeline`): HELLO 3 (with AUTH) or
    /// AUTH, SELECT, and two CLIENT SETINFO. Names only: no credential is put in it.
    fn setup(endpoint: &Endpoint, resp3: bool, subscribed: &Subscribed) -> Option<Pipeline> {
        let mut setup = Pipeline::new();
        if resp3 {
            setup.cmd("HELLO").arg(3);
        } else if endpoint.password.is_some() {
            setup.cmd("AUTH");
        }
        if endpoint.db != 0 {
            setup.cmd("SELECT").arg(endpoint.db);
        }
        setup.cmd("CLIENT").arg("SETINFO").arg("LIB-NAME");
        setup.cmd("CLIENT").arg("SETINFO").arg("LIB-VER");
        subscribed.again(&mut setup);
        Some(setup)
    }

    async fn load_scripts(&mut self, sources: &'static [&'static str]) -> RedisResult<()> {
        let mut pipe = Pipeline::with_capacity(sources.len());
        for source in sources {
            pipe.cmd("SCRIPT").arg("LOAD").arg(source);
        }
        let started = std::time::Instant::now();
        let loaded = pipe.query_async::<Vec<String>>(self).await;
        trace_sent(|| pipe.get_packed_pipeline(), started, &loaded);
        loaded.map(|_hashes| ())
    }

    async fn subscribe_sharded(&mut self, channel: &[u8]) -> RedisResult<()> {
        let mut cmd = redis::cmd("SSUBSCRIBE");
        cmd.arg(channel);
        let started = std::time::Instant::now();
        let confirmed = cmd.query_async::<Value>(self).await;
        trace_sent(|| packed(&cmd), started, &confirmed);
        confirmed.map(|_| ())
    }

    async fn subscribe_plain(&mut self, channel: &[u8]) -> RedisResult<()> {
        let started = std::time::Instant::now();
        let subscribed = self.subscribe(channel).await;
        trace_sent(
            || packed(redis::cmd("SUBSCRIBE").arg(channel)),
            started,
            &subscribed,
        );
        subscribed
    }

    async fn unsubscribe(&mut self, channels: Vec<Vec<u8>>, sharded: bool) -> RedisResult<()> {
        let started = std::time::Instant::now();
        if !sharded {
            // What the manager sends: one UNSUBSCRIBE naming them all.
            let described = trace::on().then(|| packed(redis::cmd("UNSUBSCRIBE").arg(&channels)));
            let done = ConnectionManager::unsubscribe(self, channels).await;
            trace_sent(|| described.unwrap_or_default(), started, &done);
            return done;
        }
        let mut pipe = Pipeline::with_capacity(channels.len());
        for channel in &channels {
            pipe.cmd("SUNSUBSCRIBE").arg(channel).ignore();
        }
        let done = pipe.query_async(self).await;
        trace_sent(|| pipe.get_packed_pipeline(), started, &done);
        done
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
