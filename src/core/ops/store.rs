//! One multiplexed, self-reconnecting connection per distinct endpoint in the process, and
//! the only way the rest of the core talks to Redis: every call is bounded by a timeout.

use crate::core::backend::boundary::Backend;
use crate::core::backend::endpoint::{Address, Endpoint};
use crate::core::backend::memory::MemoryConnection;
use crate::core::basics::background::spawn;
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::wait::wake::{self, Turn, Wakes};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, FromRedisValue, Pipeline, RedisResult, ScriptInvocation, Value};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::Notify;

const REFUSAL_BUDGET: Duration = Duration::from_millis(300);
const REFUSAL_FIRST_PAUSE: Duration = Duration::from_millis(10);
const REFUSAL_MAX_PAUSE: Duration = Duration::from_millis(50);
/// Channels nobody waits on stay subscribed (the next wait on the same lock skips the
/// SUBSCRIBE) until there are more than this many.
const IDLE_SUBSCRIPTIONS: usize = 64;
/// Bound of the calls a connection makes on its own (queueing again, passing a wake on).
const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether a call may be sent again after its connection dropped mid-request, when nobody
/// can tell if Redis ran it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Running it twice leaves Redis as running it once did (a read, a compare-and-delete, an
    /// absolute expiry, an acquire that re-grants its own token).
    Safe,
    /// A second run would change more (extend adds to the remaining TTL).
    Never,
}

/// One connection, kept by a caller that must send a follow-up on the same socket.
#[derive(Clone)]
pub struct Connection(Backend);

pub struct Store {
    endpoint: Endpoint,
    manager: Mutex<Option<Backend>>,
    /// Set once the server turned down HELLO 3; from then on we speak RESP2.
    resp2_only: AtomicBool,
    /// Set once the server turned down SSUBSCRIBE (before Redis 7, or an ACL without it):
    /// from then on we listen with plain SUBSCRIBE, as the scripts then publish.
    unsharded: AtomicBool,
    watchdog: super::watchdog::Slot,
    /// Signalled when the socket drops (or a call timed out and the connection was
    /// abandoned), so the watchdog re-checks its locks as soon as Redis answers again.
    dropped: Arc<Notify>,
    /// Every script is loaded on the current connection (cleared when it drops or is
    /// abandoned: a restarted Redis has an empty script cache).
    scripts_ready: Arc<AtomicBool>,
    wakes: Arc<Wakes>,
    /// This connection's name in the queues of waiting connections (see wake.rs).
    id: String,
}

static REGISTRY: LazyLock<Mutex<HashMap<Endpoint, Weak<Store>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl Store {
    /// The store for `endpoint`, shared with every other live user of the same settings. The
    /// connection itself opens on the first command, so constructing never blocks or fails.
    pub fn shared(endpoint: Endpoint) -> Arc<Store> {
        let mut registry = lock(&REGISTRY);
        if let Some(store) = registry.get(&endpoint).and_then(Weak::upgrade) {
            return store;
        }
        registry.retain(|_, store| store.strong_count() > 0);
        let store = Arc::new(Store {
            endpoint: endpoint.clone(),
            manager: Mutex::new(None),
            resp2_only: AtomicBool::new(false),
            unsharded: AtomicBool::new(false),
            watchdog: Mutex::new(Weak::new()),
            dropped: Arc::new(Notify::new()),
            scripts_ready: Arc::new(AtomicBool::new(false)),
            wakes: Arc::new(Wakes::default()),
            id: crate::core::basics::token::new_token(),
        });
        let _first = store.wakes.store.set(Arc::downgrade(&store));
        registry.insert(endpoint, Arc::downgrade(&store));
        store
    }

    pub(crate) fn watchdog_slot(&self) -> MutexGuard<'_, Weak<super::watchdog::Watchdog>> {
        lock(&self.watchdog)
    }

    /// Resolves after the connection dropped (one waiter: the watchdog).
    pub fn dropped(&self) -> &Notify {
        &self.dropped
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Must run inside the tokio runtime: the manager spawns its driver task there.
    fn manager(&self) -> Result<Backend, LockError> {
        let mut slot = lock(&self.manager);
        if let Some(manager) = slot.as_ref() {
            return Ok(manager.clone());
        }
        if let Address::Memory(name) = &self.endpoint.address {
            let me = self.wakes.store.get().cloned();
            let pushes = move |push: redis::PushInfo| {
                if let Some(store) = me.as_ref().and_then(Weak::upgrade) {
                    store.pushed(push);
                }
            };
            let memory = Backend::Memory(MemoryConnection::open(name, Some(Arc::new(pushes))));
            *slot = Some(memory.clone());
            return Ok(memory);
        }
        let resp3 = !self.resp2_only.load(Ordering::Relaxed);
        let client = self.endpoint.client(resp3)?;
        // No retries inside the manager: it would retry a rejected AUTH as patiently as a
        // refused connection. `call_tracked` retries refused connections itself, and the
        // manager reconnects whenever a call finds the connection dead. Per-call timeouts
        // bound everything, so the manager has no response timeout.
        let mut config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(self.endpoint.connect_timeout))
            .set_response_timeout(None);
        if resp3 {
            let (dropped, scripts_ready) = (self.dropped.clone(), self.scripts_ready.clone());
            let (wakes, me) = (self.wakes.clone(), self.wakes.store.get().cloned());
            config = config.set_automatic_resubscription().set_push_sender(
                move |push: redis::PushInfo| {
                    match push.kind {
                        redis::PushKind::Disconnection => {
                            scripts_ready.store(false, Ordering::Relaxed);
                            dropped.notify_one();
                            wakes.connection_lost();
                        }
                        redis::PushKind::Message | redis::PushKind::SMessage => {
                            if let (
                                Some(store),
                                [Value::BulkString(channel), Value::BulkString(to)],
                            ) = (me.as_ref().and_then(Weak::upgrade), push.data.as_slice())
                            {
                                store.announced(channel, to);
                            }
                        }
                        _ => {}
                    }
                    Ok::<(), std::convert::Infallible>(())
                },
            );
        }
        let manager = Backend::Redis(ConnectionManager::new_lazy_with_config(client, config)?);
        *slot = Some(manager.clone());
        Ok(manager)
    }

    /// A message the scripts published, from a backend without connection pushes of its own.
    fn pushed(&self, push: redis::PushInfo) {
        if let (
            redis::PushKind::Message | redis::PushKind::SMessage,
            [Value::BulkString(channel), Value::BulkString(to)],
        ) = (push.kind, push.data.as_slice())
        {
            self.announced(channel, to);
        }
    }

    /// Forget the manager after an error that reconnecting with the same manager cannot fix
    /// (a rejected AUTH leaves its shared connect future failed for good).
    fn discard_manager(&self) {
        *lock(&self.manager) = None;
        self.scripts_ready.store(false, Ordering::Relaxed);
        self.wakes.connection_lost();
    }

    pub fn wakes(&self) -> &Arc<Wakes> {
        &self.wakes
    }

    /// This connection's name in the queues of waiting connections.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A release was announced on `channel` for `to`: this connection (popped off the lock's
    /// queue), one waiter of ours by name (`<id>:<seq>`, next in a fair lock's line), or
    /// someone else.
    fn announced(&self, channel: &[u8], to: &[u8]) {
        let Some(rest) = to.strip_prefix(self.id.as_bytes()) else {
            return;
        };
        if rest.is_empty() {
            self.take_turn(channel);
            return;
        }
        let seq = rest
            .strip_prefix(b":")
            .and_then(|seq| std::str::from_utf8(seq).ok())
            .and_then(|seq| seq.parse::<u64>().ok());
        if let Some(seq) = seq {
            self.wakes.wake_member(channel, seq);
        }
    }

    /// A release popped this connection off a lock's queue and told us: wake our first
    /// waiter, or pass the wake on if nobody waits here.
    fn take_turn(&self, channel: &[u8]) {
        match self.wakes.take_turn(channel) {
            Turn::Woke => {}
            Turn::PassOn(lock_key) => self.pass_on(lock_key),
        }
    }

    /// Frees, in the background, a lock handed to a waiter that left before taking it, as
    /// a release would (to the next waiter of ours, or waking the next connection).
    pub(crate) fn release_orphan(&self, lease: crate::core::basics::lease::Lease) {
        let Some(store) = self.wakes.store.get().and_then(Weak::upgrade) else {
            return;
        };
        spawn(async move {
            let bound = lease
                .remaining()
                .clamp(Duration::from_millis(1), BACKGROUND_TIMEOUT);
            let _ignored = super::release::release(&store, &lease, bound).await;
        });
    }

    /// Hands a wake nobody here will use to the next connection in the lock's queue.
    pub(crate) fn pass_on(&self, lock_key: Vec<u8>) {
        if lock_key.is_empty() {
            return;
        }
        let Some(store) = self.wakes.store.get().and_then(Weak::upgrade) else {
            return;
        };
        spawn(async move {
            let mut invocation = super::scripts::WAKE_NEXT.key(wake::queue_key(&lock_key));
            invocation.arg(wake::channel(&lock_key));
            let _ignored: Result<i64, _> = store
                .eval(&invocation, BACKGROUND_TIMEOUT, Replay::Safe)
                .await;
        });
    }

    /// Gives up a fair waiter's place in the lock's line, in the background; a failure
    /// leaves the place to run out (see `wake::FAIR_PLACE`).
    pub(crate) fn leave_line(&self, lock_key: Vec<u8>, member: String) {
        let Some(store) = self.wakes.store.get().and_then(Weak::upgrade) else {
            return;
        };
        spawn(async move {
            let mut invocation = super::scripts::LEAVE_FAIR.key(&lock_key);
            invocation
                .key(wake::line_key(&lock_key))
                .key(wake::alive_key(&lock_key))
                .arg(member)
                .arg(wake::channel(&lock_key));
            let _ignored: Result<i64, _> = store
                .eval(&invocation, BACKGROUND_TIMEOUT, Replay::Safe)
                .await;
        });
    }

    /// Puts this connection in the queue for `lock_key` (it keeps its place if already
    /// there). `Some(true)` when the lock turned out free, `None` when queueing failed (an
    /// ACL without sorted sets, say): the waiter then only polls.
    async fn enqueue(&self, lock_key: &[u8], timeout: Duration) -> Option<bool> {
        let mut invocation = super::scripts::ENQUEUE.key(wake::queue_key(lock_key));
        invocation
            .key(lock_key)
            .arg(&self.id)
            .arg(wake::queue_score())
            .arg(wake::QUEUE_LIFETIME.as_millis() as u64);
        let free: i64 = self.eval(&invocation, timeout, Replay::Safe).await.ok()?;
        self.wakes.mark_queued(&wake::channel(lock_key), true);
        Some(free == 1)
    }
    /// Makes a lock's waiters wakeable, in the background: the connection subscribes to the
    /// lock's channel, then queues for the lock. No waiter waits for either (its poll is the
    /// safety net); if the lock turns out free meanwhile, a waiter is woken to try.
    /// A fair lock's waiters only subscribe: their attempts keep their places in its line.
    pub fn prepare_wake(self: &Arc<Self>, lock_key: Vec<u8>, timeout: Duration, fair: bool) {
        let channel = wake::channel(&lock_key);
        if !self.wakes.begin_preparing(&channel) {
            return;
        }
        let store = self.clone();
        spawn(async move {
            // Queued only where a wake can reach us: a wake popped for a connection that is
            // not listening would be lost to every waiter.
            if store.subscribe(&channel, timeout).await
                && !fair
                && store.wakes.needs_queueing(&channel)
                && store.enqueue(&lock_key, timeout).await == Some(true)
            {
                store.wakes.wake_local(&channel);
            }
            store.wakes.end_preparing(&channel);
        });
    }

    /// Subscribes the connection to a lock's channel. `false` when it could not: a RESP2
    /// connection carries no pushes beside replies, and a failed SUBSCRIBE is no reason to
    /// fail a wait that polls anyway.
    async fn subscribe(&self, channel: &[u8], timeout: Duration) -> bool {
        if self.resp2_only.load(Ordering::Relaxed) {
            return false;
        }
        let work = async {
            let _switching = self.wakes.switching.lock().await;
            if self.wakes.is_subscribed(channel) {
                return true;
            }
            let Ok(mut manager) = self.manager() else {
                return false;
            };
            let idle = self.wakes.take_idle(IDLE_SUBSCRIPTIONS);
            if !idle.is_empty() && self.unsubscribe(&mut manager, idle).await.is_err() {
                return false;
            }
            let subscribed = if self.unsharded.load(Ordering::Relaxed) {
                manager.subscribe(channel).await.is_ok()
            } else {
                self.subscribe_sharded(&mut manager, channel).await
            };
            if subscribed {
                self.wakes.mark_subscribed(channel);
            }
            subscribed
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(subscribed) => subscribed,
            Err(_) => {
                // As for any call without an answer (see `call_tracked`): start afresh.
                self.discard_manager();
                self.dropped.notify_one();
                false
            }
        }
    }

    /// SSUBSCRIBE, where the server has it: the scripts' SPUBLISH then reaches us. A server
    /// that turns it down makes us fall back to SUBSCRIBE for good (its scripts fall back to
    /// PUBLISH alike). One channel per command, so the one confirmation is its reply.
    async fn subscribe_sharded(&self, manager: &mut Backend, channel: &[u8]) -> bool {
        let reply: RedisResult<Value> = redis::cmd("SSUBSCRIBE")
            .arg(channel)
            .query_async(manager)
            .await;
        match reply {
            Ok(_) => true,
            Err(err) if err.code().is_some() => {
                self.unsharded.store(true, Ordering::Relaxed);
                manager.subscribe(channel).await.is_ok()
            }
            Err(_) => false,
        }
    }

    /// Drops idle subscriptions, of whichever kind this connection makes.
    async fn unsubscribe(&self, manager: &mut Backend, channels: Vec<Vec<u8>>) -> RedisResult<()> {
        if self.unsharded.load(Ordering::Relaxed) {
            return manager.unsubscribe(channels).await;
        }
        let mut pipe = Pipeline::with_capacity(channels.len());
        for channel in &channels {
            pipe.cmd("SUNSUBSCRIBE").arg(channel).ignore();
        }
        pipe.query_async(manager).await
    }

    /// Loads every script on the current connection, once: one round trip after each
    /// (re)connect, so no lock's TTL is counted from an EVALSHA that came back NOSCRIPT.
    pub async fn ensure_scripts(&self, timeout: Duration) -> Result<(), LockError> {
        if self.scripts_ready.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut pipe = Pipeline::with_capacity(super::scripts::ALL_SOURCES.len());
        for source in super::scripts::ALL_SOURCES {
            pipe.cmd("SCRIPT").arg("LOAD").arg(source);
        }
        let _hashes: Vec<String> = self
            .call(timeout, Replay::Safe, |mut con| {
                let pipe = &pipe;
                async move { pipe.query_async(&mut con).await }
            })
            .await?;
        self.scripts_ready.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Whether every script is loaded on the current connection (as far as we know: a
    /// restart is noticed when the connection drops or a NOSCRIPT comes back).
    pub fn scripts_ready(&self) -> bool {
        self.scripts_ready.load(Ordering::Relaxed)
    }

    /// A NOSCRIPT came back: the scripts must be loaded again.
    pub fn scripts_lost(&self) {
        self.scripts_ready.store(false, Ordering::Relaxed);
    }

    /// Runs `op` on the shared connection within `timeout`. A server that turns down RESP3
    /// gets one transparent retry over RESP2, within the same bound.
    async fn call<T, F, Fut>(
        &self,
        timeout: Duration,
        replay: Replay,
        op: F,
    ) -> Result<T, LockError>
    where
        F: Fn(Backend) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        self.call_tracked(timeout, replay, op)
            .await
            .map_err(|(err, _)| err)
    }

    /// As `call`; a timeout also hands back the connection the unanswered request went out
    /// on, which the connection slot no longer holds.
    async fn call_tracked<T, F, Fut>(
        &self,
        timeout: Duration,
        replay: Replay,
        op: F,
    ) -> Result<T, (LockError, Option<Connection>)>
    where
        F: Fn(Backend) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut refused_since = None;
        let mut pause = REFUSAL_FIRST_PAUSE;
        loop {
            let started = tokio::time::Instant::now();
            let manager = self.manager().map_err(|err| (err, None))?;
            let reply = tokio::time::timeout_at(deadline, op(manager.clone())).await;
            let err = match reply {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(err)) => err,
                Err(_) => {
                    // A request that got no reply keeps its place in the connection's reply
                    // queue; if its bytes were lost, every later reply would go to the wrong
                    // caller. Start afresh. (Every operation checks the owner token, so a late
                    // execution on the old socket is harmless.)
                    self.discard_manager();
                    self.dropped.notify_one();
                    let err =
                        LockError::Timeout(format!("no reply within {} ms", timeout.as_millis()));
                    return Err((err, Some(Connection(manager))));
                }
            };
            if refuses_resp3(&err) && !self.resp2_only.swap(true, Ordering::Relaxed) {
                self.discard_manager();
                continue;
            }
            // A refused connection means the command was never sent, so trying again is
            // safe: every failed call makes the manager reconnect. Brief pauses (10 ms
            // doubling to 50 ms, about 0.3 s in all) carry a call across a Redis restart and
            // find Redis within 50 ms of it accepting again; a longer outage is reported.
            // A connection reset under a request (a restarting Redis still completes TCP
            // handshakes until its process exits) may or may not have run it, so only a call
            // that is safe to run twice goes again.
            let resendable = err.is_connection_refusal()
                || (replay == Replay::Safe && err.is_connection_dropped());
            if resendable {
                let since = *refused_since.get_or_insert(started);
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if since.elapsed() < REFUSAL_BUDGET && left > pause {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(REFUSAL_MAX_PAUSE);
                    continue;
                }
            }
            // Rejected credentials leave the manager's connect future failed for good, so
            // start afresh next time; a NOPERM on one key is no reason to reconnect.
            if err.kind() == redis::ErrorKind::AuthenticationFailed
                || matches!(err.code(), Some("WRONGPASS" | "NOAUTH"))
            {
                self.discard_manager();
            }
            return Err((LockError::from(err), None));
        }
    }

    /// As `eval`; on a timeout, also the connection the request is still queued on.
    pub async fn eval_tracked<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
        timeout: Duration,
    ) -> Result<T, (LockError, Option<Connection>)> {
        self.call_tracked(timeout, Replay::Safe, |mut con| async move {
            invocation.invoke_async(&mut con).await
        })
        .await
    }

    /// Runs a script on one given connection, behind whatever is still queued on it.
    pub async fn eval_on<T: FromRedisValue>(
        &self,
        connection: &Connection,
        invocation: &ScriptInvocation<'_>,
        timeout: Duration,
    ) -> Result<T, LockError> {
        let mut con = connection.0.clone();
        match tokio::time::timeout(timeout, invocation.invoke_async(&mut con)).await {
            Ok(reply) => reply.map_err(LockError::from),
            Err(_) => Err(LockError::Timeout(format!(
                "no reply within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    pub async fn eval<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
        timeout: Duration,
        replay: Replay,
    ) -> Result<T, LockError> {
        self.call(timeout, replay, |mut con| async move {
            invocation.invoke_async(&mut con).await
        })
        .await
    }

    /// Sends a whole pipeline in one write and returns each command's own result, so one
    /// failing command does not hide the answers to the others.
    pub async fn pipeline<T: FromRedisValue>(
        &self,
        pipe: &Pipeline,
        timeout: Duration,
    ) -> Result<Vec<RedisResult<T>>, LockError> {
        self.call(timeout, Replay::Safe, |mut con| async move {
            pipe.query_async(&mut con).await
        })
        .await
    }

    pub async fn query<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        timeout: Duration,
    ) -> Result<T, LockError> {
        self.call(timeout, Replay::Safe, |mut con| async move {
            cmd.query_async(&mut con).await
        })
        .await
    }
}

/// Redis before 6 answers HELLO with "unknown command"; a server with HELLO renamed away does
/// the same. The manager's connect then fails for good, so we fall back to RESP2.
fn refuses_resp3(err: &redis::RedisError) -> bool {
    let text = err.to_string();
    text.contains("HELLO") && (text.contains("unknown command") || text.contains("NOPROTO"))
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
