//! One Redis server keeping the locks: each lock operation is its `proto` op sent on the
//! endpoint's `Link` (timeouts, retries, RESP2 fallback, NOSCRIPT answered) and read as
//! `proto` says.

use super::endpoint::Endpoint;
use super::link::{after_noscript, Link, Pinned, Refusals, Replay};
use super::lock_store::{
    Caps, Fairness, FastPath, Fencing, Handover, Listener, LockStore, ScriptsFor, Subscriptions,
    WakeKind,
};
use super::wire::Conduit;
use crate::core::basics::clock::Stamp;
use crate::core::basics::drops::Drops;
use crate::core::basics::error::LockError;
use crate::core::proto::acquire::{AcquireAttempt, Acquired};
use crate::core::proto::refresh::RefreshBatch;
use crate::core::proto::{scripts, Op, Request};
use redis::aio::ConnectionManager;
use redis::{ErrorKind, Pipeline, RedisResult, ServerErrorKind, Value};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// One server over its `ConnectionManager`; a cluster's `ClusterStore` runs the same over its
/// own connection (`W`).
pub struct RedisStore<W: Conduit = ConnectionManager> {
    link: Link<W>,
}

impl<W: Conduit> RedisStore<W> {
    /// Opens nothing yet: the connection opens on the first command.
    pub fn new(endpoint: Endpoint, listener: Arc<dyn Listener>) -> Self {
        RedisStore {
            link: Link::new(endpoint, &scripts::ALL_SOURCES, listener),
        }
    }

    /// One node of a Redlock: at a closed restart-quarantine gate an attempt is refused at
    /// once, not waited for (its part of the quorum is "not granted").
    pub fn quorum_node(endpoint: Endpoint, listener: Arc<dyn Listener>) -> Self {
        RedisStore {
            link: Link::new(endpoint, &scripts::ALL_SOURCES, listener).abstaining(),
        }
    }

    /// When this server's restart quarantine lets an attempt go out (now when off), asked of
    /// it first if need be, within `bound`.
    pub async fn gate_opens(&self, bound: Duration) -> Result<std::time::Instant, LockError> {
        self.link.gate_opens(bound).await
    }

    /// Sent on the connection the timed-out attempt went out on, so it runs after that
    /// attempt whenever it runs; worth waiting for only as long as the lock could live.
    fn free_late_win(pinned: Pinned<W>, free: impl AsRef<Request> + Send + 'static, ttl: Duration) {
        tokio::spawn(async move {
            let _ignored: Result<Value, _> = pinned.eval(free.as_ref(), ttl).await;
        });
    }

    /// `request` sent as `run_request` sends it (`replay` as the op's), owning all it needs:
    /// a Redlock lets it finish after it stopped waiting for this node (a release or an
    /// extend dropped before it was written would never reach it).
    pub fn send_owned(
        self: &Arc<Self>,
        request: &Arc<Request>,
        bound: Duration,
        replay: Replay,
    ) -> impl std::future::Future<Output = Result<Value, LockError>> + Send + 'static {
        let (store, request) = (self.clone(), request.clone());
        async move {
            let sent = store.link.send(&request, bound, replay, Refusals::Retry);
            sent.await.map_err(|(e, _)| e)
        }
    }

    /// `acquire_request`, owning all it needs (see `send_owned`); its reply read by the
    /// caller. `free`: the attempt's `AcquireAttempt::late_free`.
    pub fn acquire_owned(
        self: &Arc<Self>,
        request: &Arc<Request>,
        free: &Option<Arc<Request>>,
        bound: Duration,
        ttl: Duration,
    ) -> impl std::future::Future<Output = Result<Value, LockError>> + Send + 'static {
        let (store, request, free) = (self.clone(), request.clone(), free.clone());
        async move {
            let sent = store
                .link
                .send(&request, bound, Replay::Safe, Refusals::Fail);
            sent.await.map_err(|(err, pinned)| {
                // The attempt may still run after we stopped waiting; free what it may win,
                // so the key does not sit locked by a token nobody holds until its TTL.
                if let (Some(pinned), Request::Script { .. }, Some(free)) =
                    (pinned, request.as_ref(), free)
                {
                    Self::free_late_win(pinned, free, ttl);
                }
                err
            })
        }
    }

    /// `op` sent as `request`, its own command written by the caller once (a Redlock writes
    /// it once for all its nodes).
    pub async fn run_request<O: Op>(
        &self,
        op: &O,
        request: &Request,
        bound: Duration,
    ) -> Result<O::Out, LockError> {
        let replay = if O::REPEATABLE {
            Replay::Safe
        } else {
            Replay::Never
        };
        let reply = (self
            .link
            .send(request, bound, replay, Refusals::Retry)
            .await)
            .map_err(|(e, _)| e)?;
        op.decode(reply)
    }

    /// The server's clock, read by `request` (a TIME however sent).
    pub(super) async fn time(
        &self,
        request: Request,
        bound: Duration,
    ) -> Result<SystemTime, LockError> {
        let reply = (self
            .link
            .send(&request, bound, Replay::Safe, Refusals::Retry)
            .await)
            .map_err(|(e, _)| e)?;
        let (secs, micros): (u64, u64) = crate::core::basics::resp::typed(reply)?;
        Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros))
    }

    /// One acquire attempt sent as `request` (`Request::of(op)`, written by the caller).
    pub async fn acquire_request(
        &self,
        op: &AcquireAttempt<'_>,
        request: &Request,
        bound: Duration,
    ) -> Result<Acquired, LockError> {
        match (self.link.send(request, bound, Replay::Safe, Refusals::Fail)).await {
            Ok(reply) => op.decode(reply),
            Err((err, pinned)) => {
                // The attempt may still run after we stopped waiting; free what it may win,
                // so the key does not sit locked by a token nobody holds until its TTL.
                if let (Some(pinned), Request::Script { .. }, Some(free)) =
                    (pinned, request, op.late_free())
                {
                    Self::free_late_win(pinned, Box::new(free), op.ttl);
                }
                Err(err)
            }
        }
    }
}

impl<W: Conduit> LockStore for RedisStore<W> {
    fn caps(&self) -> Caps {
        Caps {
            fencing: Fencing::Strict,
            // Grants need the grantee's own channel heard beside its replies.
            handover: if self.endpoint().grants && self.link.pushes() {
                Handover::Ring
            } else {
                Handover::InScript
            },
            fairness: Fairness::Line,
            // The JS thread's socket is plain TCP: TLS and Unix sockets stay on the runtime.
            fast_path: if super::direct::supports(self.endpoint()) {
                FastPath::Socket
            } else {
                FastPath::None
            },
            wake: WakeKind::QueueChecked,
            transactions: true,
            doubt_unconfirmed: false,
        }
    }

    fn endpoint(&self) -> &Endpoint {
        self.link.endpoint()
    }

    /// Sends `op` within `bound` and reads its reply.
    async fn run<O: Op + Sync>(&self, op: &O, bound: Duration) -> Result<O::Out, LockError>
    where
        O::Out: Send,
    {
        self.run_request(op, &Request::of(op), bound).await
    }

    async fn acquire(
        &self,
        op: &AcquireAttempt<'_>,
        bound: Duration,
    ) -> Result<Acquired, LockError> {
        self.acquire_request(op, &Request::of(op), bound).await
    }

    /// One pipeline; after a NOSCRIPT (Redis restarted or flushed) the scripts are loaded
    /// and those commands are sent once more (on a cluster: whole, loading nothing else),
    /// within the same bound.
    async fn refresh(&self, batch: &RefreshBatch, bound: Duration) -> Vec<Option<bool>> {
        let deadline = tokio::time::Instant::now() + bound;
        let commands = batch.commands();
        let count = commands.len();
        let mut pipe = Pipeline::with_capacity(count);
        pipe.ignore_errors();
        for command in commands {
            pipe.add_command(command.clone());
        }
        let mut replies = match self.link.pipeline::<Value>(&pipe, bound).await {
            Ok(replies) if replies.len() == count => replies,
            _ => return batch.answers(Vec::new()),
        };
        let missing: Vec<usize> = (0..count).filter(|&i| is_noscript(&replies[i])).collect();
        if !missing.is_empty() {
            self.link.scripts_lost();
            // A deadline passed (or all but) sends nothing: the call would only time out, and
            // a timeout discards the connection and tells of a drop that never happened.
            let left = || {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                (left >= Duration::from_millis(1)).then_some(left)
            };
            let Some(bound) = left() else {
                return batch.answers(Vec::new());
            };
            if (self.link.ensure_scripts(bound, Refusals::Retry).await).is_err() {
                return batch.answers(Vec::new());
            }
            let mut retry = Pipeline::with_capacity(missing.len());
            retry.ignore_errors();
            for &i in &missing {
                retry.add_command(after_noscript::<W>(&commands[i]));
            }
            let Some(bound) = left() else {
                return batch.answers(Vec::new());
            };
            match self.link.pipeline::<Value>(&retry, bound).await {
                Ok(again) if again.len() == missing.len() => {
                    for (i, reply) in missing.into_iter().zip(again) {
                        replies[i] = reply;
                    }
                }
                _ => return batch.answers(Vec::new()),
            }
        }
        batch.answers(replies.into_iter().map(Result::ok).collect())
    }

    async fn listen(&self, channel: &[u8], subs: &dyn Subscriptions, bound: Duration) -> bool {
        self.link.subscribe(channel, bound, subs).await
    }

    async fn drop_idle(&self, subs: &dyn Subscriptions, bound: Duration) {
        self.link.drop_idle(bound, subs).await
    }

    async fn prepare(&self, bound: Duration, scripts_for: ScriptsFor) -> Result<(), LockError> {
        let refusals = match scripts_for {
            ScriptsFor::Attempt => Refusals::Fail,
            ScriptsFor::Held => Refusals::Retry,
        };
        self.link.ensure_scripts(bound, refusals).await
    }

    fn is_prepared(&self) -> bool {
        self.link.scripts_ready()
    }

    fn lost(&self) -> &Drops {
        self.link.dropped()
    }

    fn answered_sent(&self) -> Option<Stamp> {
        self.link.answered_sent()
    }

    fn gate_open(&self) -> bool {
        self.link.gate_open()
    }

    fn forget_gate(&self) {
        self.link.forget_gate()
    }

    fn heed_command_timeout(&self, command_timeout: Duration) {
        self.link.heed_command_timeout(command_timeout)
    }

    /// One gate for every key of the server, a cluster's by the key's slot.
    async fn pass_gate(&self, key: &[u8], bound: Duration) -> Result<(), LockError> {
        self.link.pass_gate(W::slot_of_key(key), bound).await
    }

    /// One server keeps every key.
    async fn server_time(&self, _: &[u8], bound: Duration) -> Result<SystemTime, LockError> {
        self.time(Request::Command(redis::cmd("TIME")), bound).await
    }
}

fn is_noscript(reply: &RedisResult<Value>) -> bool {
    matches!(reply, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
}
