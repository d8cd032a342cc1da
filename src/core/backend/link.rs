//! One multiplexed, self-reconnecting connection to one Redis server, under `RedisStore`: every call is bounded by a timeout, a refused connection is
//! retried briefly, a server without RESP3 is spoken to over RESP2, and the scripts are loaded
//! once per connection (on a cluster, by the call that finds one missing on its node). What the scripts publish goes to the `Listener` the operations layer
//! installed: this layer knows nothing of locks or waiters.

use super::endpoint::{Address, Endpoint};
use super::lock_store::{Listener, LostScope, Subscriptions, IDLE_SUBSCRIPTIONS};
use super::mismatch;
use super::quarantine::Quarantine;
use super::refusals::{refuses_command, refuses_resp3, turned_away};
use super::silences::{SilenceBar, Silences};
use super::staleness::Staleness;
use super::upstream::Upstream;
use super::wire::{
    packed, trace_sent, untraced_from_now, Conduit, Destination, PushSink, ScriptLoading,
    Subscribed, Untraced,
};
use crate::core::basics::clock::Stamp;
use crate::core::basics::drops::Drops;
use crate::core::basics::error::{slot_moving, LockError};
use crate::core::basics::key_counts;
use crate::core::basics::sync::lock;
use crate::core::basics::trace;
use crate::core::proto::epoch::Admit;
use crate::core::proto::watch;
use crate::core::proto::wire::whole;
use crate::core::proto::{scripts, Request};
use redis::aio::ConnectionManager;
use redis::{Cmd, ErrorKind, FromRedisValue, Pipeline, RedisResult, ServerErrorKind, Value};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const REFUSAL_BUDGET: Duration = Duration::from_millis(300);
const REFUSAL_FIRST_PAUSE: Duration = Duration::from_millis(10);
const REFUSAL_MAX_PAUSE: Duration = Duration::from_millis(50);
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

/// What a call does when the server refuses the connection.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Refusals {
    /// Tries again briefly (about 0.3 s), to carry it across a restart: releases, extends,
    /// refreshes, reads.
    Retry,
    /// Fails as soon as the refusals persist (`drops::PERSIST`), trying again every 10 ms
    /// until then: an acquire attempt, whose caller would rather hear that Redis is down than
    /// wait (the issue "Told before anyone else can take it"), but not fail for a restart's
    /// few ms of closed port. Only on one fixed server; a Sentinel set's or a cluster's
    /// refusal may be a failover the retry rides out.
    Fail,
}

/// Whether a call passes the restart quarantine's gate before it goes (an attempt at a lock
/// does, when a quarantine is on: see `Link::gating`), and whose: on a cluster its slot's
/// master's, else (`None`) the one server's.
#[derive(Clone, Copy)]
enum Gating {
    Pass(Option<u16>),
    Skip,
}

impl Gating {
    /// The cluster slot whose gate the call passes, if it passes one there.
    fn slot(self) -> Option<u16> {
        match self {
            Gating::Pass(slot) => slot,
            Gating::Skip => None,
        }
    }
}

/// One connection, kept by a caller that must send a follow-up on the same socket.
#[derive(Clone)]
pub(super) struct Pinned<W: Conduit = ConnectionManager>(W);

impl<W: Conduit> Pinned<W> {
    /// Runs a request on this connection, behind whatever is still queued on it.
    pub(super) async fn eval<T: FromRedisValue>(
        &self,
        request: &Request,
        timeout: Duration,
    ) -> Result<T, LockError> {
        let mut con = self.0.clone();
        let started = Instant::now();
        let answer = match tokio::time::timeout(timeout, query(request, &mut con)).await {
            Ok(reply) => reply.map_err(LockError::from),
            Err(_) => Err(LockError::no_reply(timeout)),
        };
        // Each command sent is traced as it is answered (`query`); a call with no answer here.
        if trace::on() && matches!(answer, Err(LockError::Timeout(_))) {
            trace_call(&packed_request(request), started, answer.as_ref().err());
        }
        answer
    }
}

/// `Link::watching`: not asked yet on this connection, subscribed, or refused by the server.
const WATCH_NOT_YET: u8 = 0;
const WATCH_ON: u8 = 1;
const WATCH_REFUSED: u8 = 2;

pub(super) struct Link<W: Conduit = ConnectionManager> {
    endpoint: Endpoint,
    /// Where the connection goes: the endpoint's address, or a Sentinel set's master.
    upstream: Upstream,
    /// Marked when the connection must go to where `upstream` says now (a Sentinel set's
    /// master moved or the connection to it dropped): the next call opens a new one.
    stale: Arc<Staleness>,
    /// The connection, and whether it was opened asking for RESP3.
    manager: Mutex<Option<(W, bool)>>,
    /// Which connection is in `manager` (0: none), numbered from `opened`: a call or a push
    /// of one already replaced must not mark or signal for the new one.
    current: Arc<AtomicU64>,
    opened: AtomicU64,
    /// Set once the server turned down HELLO 3; from then on we speak RESP2.
    resp2_only: AtomicBool,
    /// Set once a call was answered: until then a failure may be a wrong address or TLS on
    /// one side only, which is worth finding out (`mismatch.rs`).
    reached: AtomicBool,
    /// A call was answered since the last drop was signalled: whichever meets the drop next
    /// tells it, a call (over RESP2 no push tells of it) or the connection's push
    /// (`PushSink`, over RESP3, which may come first): one drop either way.
    up: Arc<AtomicBool>,
    /// One fixed server (TCP or Unix socket): a refused connection means it is down, not that
    /// a failover moved it. Only such a link fails attempts fast and tells its waiters.
    fixed: bool,
    /// Set once the server turned down SSUBSCRIBE (before Redis 7, or an ACL without it):
    /// from then on we listen with plain SUBSCRIBE, as the scripts then publish.
    unsharded: AtomicBool,
    /// Signalled when the socket drops (or a call timed out and the connection was
    /// abandoned), so the watchdog re-checks its locks as soon as Redis answers again.
    dropped: Arc<Drops>,
    /// Every script is loaded on the current connection (cleared when it drops or is
    /// abandoned: a restarted Redis has an empty script cache).
    scripts_ready: Arc<AtomicBool>,
    /// The current connection's server refused SCRIPT LOAD (an ACL without it): `preload`
    /// sends it no more, each call loading its own as before (not all 25 scripts, ~50 KB,
    /// per call). Cleared with `scripts_ready` when the connection is new, not on NOSCRIPT.
    scripts_refused: Arc<AtomicBool>,
    /// What `ensure_scripts` loads.
    scripts: &'static [&'static str],
    /// A call is loading them ahead of itself (`preload`): the calls meanwhile go out behind
    /// that SCRIPT LOAD on the one connection, so they need not send one each.
    preloading: AtomicBool,
    listener: Arc<dyn Listener>,
    /// Serialises SUBSCRIBE and UNSUBSCRIBE, so the server sees them in the order our state
    /// changed in.
    switching: tokio::sync::Mutex<()>,
    /// Whether the current connection subscribed to `watch`'s requests (`WATCH_*`).
    watching: AtomicU8,
    /// What the current connection subscribed to, which the crate subscribes to again after
    /// a reconnect: for the `DEBUG` line of its setup.
    subscribed: Arc<Mutex<Subscribed>>,
    /// When the latest request answered on the current connection was sent (see
    /// `LockStore::answered_sent`); forgotten with the connection, whose order it vouches for.
    answered: Mutex<Option<Stamp>>,
    /// `restartQuarantineMs`: the gate an attempt passes on this connection.
    quarantine: Quarantine,
    /// With `DEBUG` on: since when the crate's setup of a (re)opened connection is untraced;
    /// written at the first answer after (see `Conduit::setup`).
    setup: Arc<Mutex<Option<Untraced>>>,
    /// A cluster's slots whose calls go unanswered (see `silences.rs`).
    silences: Silences,
    /// How long a call must go unanswered to show the server silent.
    bar: SilenceBar,
}

/// A call's load of the scripts ahead of itself (`Link::preload`), until dropped.
struct Preloading<'a>(&'a AtomicBool);

impl Drop for Preloading<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl<W: Conduit> Link<W> {
    /// The connection itself opens on the first command, so constructing never blocks or
    /// fails.
    pub(super) fn new(
        endpoint: Endpoint,
        scripts: &'static [&'static str],
        listener: Arc<dyn Listener>,
    ) -> Self {
        let stale = Arc::new(Staleness::default());
        let dropped = Arc::new(Drops::default());
        let fixed = matches!(endpoint.address, Address::Tcp { .. } | Address::Unix(_));
        Link {
            fixed,
            quarantine: Quarantine::new(endpoint.restart_quarantine),
            upstream: Upstream::of(&endpoint, stale.clone(), dropped.clone()),
            stale,
            endpoint,
            manager: Mutex::new(None),
            current: Arc::new(AtomicU64::new(0)),
            opened: AtomicU64::new(0),
            resp2_only: AtomicBool::new(false),
            reached: AtomicBool::new(false),
            up: Arc::new(AtomicBool::new(false)),
            unsharded: AtomicBool::new(false),
            dropped,
            scripts_ready: Arc::new(AtomicBool::new(false)),
            scripts_refused: Arc::new(AtomicBool::new(false)),
            scripts,
            preloading: AtomicBool::new(false),
            listener,
            switching: tokio::sync::Mutex::new(()),
            watching: AtomicU8::new(WATCH_NOT_YET),
            subscribed: Arc::default(),
            answered: Mutex::new(None),
            setup: Arc::new(Mutex::new(None)),
            silences: Silences::default(),
            bar: SilenceBar::default(),
        }
    }

    /// Whether an attempt may go now with no word from Redis first (see
    /// `LockStore::gate_open`).
    pub(super) fn gate_open(&self) -> bool {
        // Off only: a socket other than this connection may have reached a newer server
        // than the gate describes, so with the option on every attempt passes the gate on
        // the connection it goes out on.
        self.quarantine.is_off()
    }

    /// Whether a call with `refusals` passes the restart quarantine's gate, and whose
    /// (`slot` asked only then): an attempt (`Refusals::Fail`), while a quarantine is on.
    fn gating(&self, refusals: Refusals, slot: impl FnOnce() -> Option<u16>) -> Gating {
        match refusals == Refusals::Fail && !self.quarantine.is_off() {
            true => Gating::Pass(slot()),
            false => Gating::Skip,
        }
    }

    /// Waits at the restart quarantine's gate (on a cluster, `slot`'s), learning it first if
    /// need be, within `timeout` (one extension past a wait, as for any attempt): an attempt
    /// stamped after this counts its lease from when it can actually go out. Nothing is sent
    /// when the gate is off or known open.
    pub(super) async fn pass_gate(
        &self,
        slot: Option<u16>,
        timeout: Duration,
    ) -> Result<(), LockError> {
        if self.quarantine.is_open(&self.dropped, slot) {
            return Ok(());
        }
        self.call(
            timeout,
            Replay::Safe,
            Refusals::Fail,
            self.gating(Refusals::Fail, || slot),
            |_| async { Ok(()) },
        )
        .await
        .map_err(|(err, _)| err)
    }

    /// A Redlock's node: an attempt at a closed gate is refused at once (its part of the
    /// quorum is "not granted"), never waited for.
    pub(super) fn abstaining(mut self) -> Self {
        self.quarantine = self.quarantine.abstaining();
        self
    }

    /// When the gate of the current connection opens (now when the option is off), learned
    /// first if need be, within `timeout`; the error of a server not reached.
    pub(super) async fn gate_opens(&self, timeout: Duration) -> Result<Instant, LockError> {
        let passed = self.pass_gate(None, timeout).await;
        match self.quarantine.known(&self.dropped, None) {
            Some(gate) => Ok(gate.opens),
            None => passed.map(|()| Instant::now()),
        }
    }

    /// See `LockStore::heed_command_timeout`.
    pub(super) fn heed_command_timeout(&self, command_timeout: Duration) {
        self.bar.heed(command_timeout);
    }

    /// See `LockStore::forget_gate`.
    pub(super) fn forget_gate(&self) {
        self.quarantine.forget();
    }

    /// See `LockStore::answered_sent`.
    pub(super) fn answered_sent(&self) -> Option<Stamp> {
        *lock(&self.answered)
    }

    /// Whether the connection carries pushes beside replies (RESP3), as far as known.
    pub(super) fn pushes(&self) -> bool {
        !self.resp2_only.load(Ordering::Relaxed)
    }

    /// Resolves after the connection dropped (one waiter: the watchdog).
    pub(super) fn dropped(&self) -> &Drops {
        &self.dropped
    }

    pub(super) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Must run inside the tokio runtime: the manager spawns its driver task there. No
    /// mutex is held while a Sentinel set is asked where its master is.
    async fn manager(&self, deadline: tokio::time::Instant) -> Result<W, LockError> {
        Ok(self.numbered_manager(deadline).await?.0)
    }

    /// `manager`, with which connection it is (see `current`).
    async fn numbered_manager(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<(W, u64), LockError> {
        loop {
            if let Some(kept) = self.kept_manager() {
                return Ok(kept);
            }
            let marks = self.stale.marks();
            let id = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
            let resp3 = !self.resp2_only.load(Ordering::Relaxed);
            let pushes = PushSink {
                dropped: self.dropped.clone(),
                setup: self.setup.clone(),
                subscribed: self.subscribed.clone(),
                scripts_ready: self.scripts_ready.clone(),
                scripts_refused: self.scripts_refused.clone(),
                listener: self.listener.clone(),
                // A master that dropped us may have been demoted: ask where it is now.
                stale: self.upstream.moves().then(|| self.stale.clone()),
                id,
                current: self.current.clone(),
                up: self.up.clone(),
            };
            let destination = Destination {
                upstream: &self.upstream,
                deadline,
            };
            let manager = W::open(&self.endpoint, destination, resp3, pushes).await?;
            let mut slot = lock(&self.manager);
            if self.stale.marks() != marks {
                // Marked while the sentinels were asked: their answer may name the master
                // the mark left, and a call on it now would come after the drop (staleness.rs).
                // Asked again, before the call's deadline (the lookup's own bound).
                continue;
            }
            if let Some((kept, _)) = slot.as_ref().filter(|_| !self.stale.is_marked()) {
                // Another call opened one while we asked the sentinels.
                return Ok((kept.clone(), self.current.load(Ordering::Acquire)));
            }
            // A mark standing now was made before the lookup began: it is the replaced
            // connection's (or that of one already gone), not this one's.
            if let Some(signal) = self.stale.take() {
                self.switched(signal);
            }
            *slot = Some((manager.clone(), resp3));
            self.current.store(id, Ordering::Release);
            self.watching.store(WATCH_NOT_YET, Ordering::Relaxed);
            lock(&self.subscribed).clear();
            *lock(&self.answered) = None;
            if trace::on() {
                *lock(&self.setup) = Some(Untraced {
                    since: Instant::now(),
                    resubscribed: Subscribed::default(),
                });
            }
            return Ok((manager, id));
        }
    }

    /// The connection in use, unless it must be replaced: one opened for RESP3 before the
    /// server was found to refuse it fails every call, and a stale one goes to where a
    /// Sentinel set's master was.
    fn kept_manager(&self) -> Option<(W, u64)> {
        let mut slot = lock(&self.manager);
        // With no connection in place the mark stays, for the one installed next: taken
        // now, a connection whose lookup began before the mark could be installed unmarked.
        if slot.is_some() {
            if let Some(signal) = self.stale.take() {
                *slot = None;
                self.current.store(0, Ordering::Release);
                self.switched(signal);
                return None;
            }
        }
        match slot.as_ref() {
            Some((_, true)) if self.resp2_only.load(Ordering::Relaxed) => None,
            Some((manager, _)) => {
                self.upstream.used();
                Some((manager.clone(), self.current.load(Ordering::Acquire)))
            }
            None => None,
        }
    }

    /// A stale connection was dropped for a new one; `signal`: the drop is still untold.
    fn switched(&self, signal: bool) {
        self.new_connection_scripts();
        self.quarantine.forget();
        // Waiters listen again, on the new connection.
        self.listener.connection_lost(LostScope::All);
        // A drop signalled after the mark already covers every call that reached the old
        // connection (staleness.rs): a second would doubt and re-check each lock again.
        if signal {
            self.dropped.signal();
        }
    }

    /// Forget the manager after an error that reconnecting with the same manager cannot fix
    /// (a rejected AUTH leaves its shared connect future failed for good).
    pub(super) fn discard_manager(&self) {
        *lock(&self.manager) = None;
        self.current.store(0, Ordering::Release);
        self.bar.heard();
        self.quarantine.forget();
        self.new_connection_scripts();
        self.listener.connection_lost(LostScope::All);
    }

    /// The next connection has none of the scripts loaded, and may be allowed to load them.
    fn new_connection_scripts(&self) {
        self.scripts_ready.store(false, Ordering::Relaxed);
        self.scripts_refused.store(false, Ordering::Relaxed);
    }

    /// A call got no answer within `bound`: a server silent for a whole command timeout is
    /// given a new connection, as `call` says why.
    fn abandon_after_timeout(&self, bound: Duration) {
        let now = Instant::now();
        let sent = now.checked_sub(bound).unwrap_or(now);
        if !W::KEPT_ON_TIMEOUT && self.bar.unanswered(sent, now) {
            self.discard_manager();
            self.dropped.signal();
        }
    }

    /// Subscribes the connection to a lock's channel. `false` when it could not: a RESP2
    /// connection carries no pushes beside replies, and a failed SUBSCRIBE is no reason to
    /// fail a wait that polls anyway.
    pub(super) async fn subscribe(
        &self,
        channel: &[u8],
        timeout: Duration,
        book: &dyn Subscriptions,
    ) -> bool {
        if self.resp2_only.load(Ordering::Relaxed) {
            return false;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let work = async {
            let _switching = self.switching.lock().await;
            if book.is_subscribed(channel) {
                return true;
            }
            if !book.is_wanted(channel) {
                return false;
            }
            let Ok(mut manager) = self.manager(deadline).await else {
                return false;
            };
            let idle = book.take_idle(IDLE_SUBSCRIPTIONS);
            if !idle.is_empty() && self.unsubscribe(&mut manager, idle).await.is_err() {
                return false;
            }
            let subscribed = if self.unsharded.load(Ordering::Relaxed) {
                manager.subscribe_plain(channel).await.is_ok()
            } else {
                self.subscribe_sharded(&mut manager, channel).await
            };
            if subscribed {
                book.mark_subscribed(channel);
                let sharded = !self.unsharded.load(Ordering::Relaxed);
                lock(&self.subscribed).add(channel, sharded);
                self.watch_requests(&mut manager).await;
            }
            subscribed
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(subscribed) => subscribed,
            Err(_) => {
                // As for any call without an answer (see `call`).
                self.abandon_after_timeout(timeout);
                false
            }
        }
    }

    /// Unsubscribes from the channels nobody listens on any more, if more than half of what
    /// we keep pile up: what a SUBSCRIBE does first, for when none follows. Asked for each time
    /// `IDLE_SUBSCRIPTIONS` waiters have left; with the full limit as the bar, the leavers of a
    /// burst past the count's run could find exactly the limit idle and drop nothing.
    pub(super) async fn drop_idle(&self, timeout: Duration, book: &dyn Subscriptions) {
        if self.resp2_only.load(Ordering::Relaxed) {
            return;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let work = async {
            let _switching = self.switching.lock().await;
            let Ok(mut manager) = self.manager(deadline).await else {
                return;
            };
            let idle = book.take_idle(IDLE_SUBSCRIPTIONS / 2);
            if !idle.is_empty() {
                let _ignored = self.unsubscribe(&mut manager, idle).await;
            }
        };
        if tokio::time::timeout(timeout, work).await.is_err() {
            // As for any call without an answer (see `call`).
            self.abandon_after_timeout(timeout);
        }
    }

    /// SSUBSCRIBE, where the server has it: the scripts' SPUBLISH then reaches us. A server
    /// that refuses the command makes us fall back to SUBSCRIBE for good (its scripts fall
    /// back to PUBLISH alike). Any other refusal fails this subscription only, which the
    /// store asks again (`Store::listen`): a cluster answers MOVED while the slot moves
    /// between masters, which says where to go, and SUBSCRIBE would hear no SPUBLISH. One
    /// channel per command, so the one confirmation is its reply.
    async fn subscribe_sharded(&self, manager: &mut W, channel: &[u8]) -> bool {
        match manager.subscribe_sharded(channel).await {
            Ok(()) => true,
            Err(err) if refuses_command(&err) => {
                self.unsharded.store(true, Ordering::Relaxed);
                manager.subscribe_plain(channel).await.is_ok()
            }
            Err(_) => false,
        }
    }

    /// Subscribes the connection to `watch`'s requests (`proto/watch.rs`) along with its first
    /// waiter's subscription: a connection that carries none has nothing to count, and one that
    /// does has taken on pub/sub's output-buffer limit already. Plain SUBSCRIBE, where the
    /// waiters' subscriptions go (a cluster's own connection for them; its PUBLISH reaches every
    /// node). A server that refuses it (NOPERM) is not asked again on this connection; an I/O
    /// error is the connection's, and the next subscription here tries again.
    async fn watch_requests(&self, manager: &mut W) {
        if !key_counts::watchable() || self.watching.load(Ordering::Relaxed) != WATCH_NOT_YET {
            return;
        }
        match manager.subscribe_plain(watch::CHANNEL).await {
            Ok(()) => {
                self.watching.store(WATCH_ON, Ordering::Relaxed);
                lock(&self.subscribed).add(watch::CHANNEL, false);
            }
            Err(err) if err.code().is_some() => {
                self.watching.store(WATCH_REFUSED, Ordering::Relaxed)
            }
            Err(_) => {}
        }
    }

    /// Drops idle subscriptions, of whichever kind this connection makes.
    async fn unsubscribe(&self, manager: &mut W, channels: Vec<Vec<u8>>) -> RedisResult<()> {
        let sharded = !self.unsharded.load(Ordering::Relaxed);
        lock(&self.subscribed).remove(&channels);
        manager.unsubscribe(channels, sharded).await
    }

    /// Loads every script on the current connection, once: one round trip after each
    /// (re)connect, so no lock's TTL is counted from an EVALSHA that came back NOSCRIPT. Where
    /// the calls load their own (`ScriptLoading::ByCall`), nothing is sent.
    pub(super) async fn ensure_scripts(
        &self,
        timeout: Duration,
        refusals: Refusals,
    ) -> Result<(), LockError> {
        if self.scripts_ready() {
            return Ok(());
        }
        // Loading scripts takes no lock: the attempt after it passes the gate (a Redlock's
        // node, which refuses at a closed gate, would otherwise refuse its scripts).
        self.call(
            timeout,
            Replay::Safe,
            refusals,
            Gating::Skip,
            // `call` loads them first (`preload`); what it let pass is loaded here, so that
            // a refusal of SCRIPT LOAD fails this call.
            |mut con| async move {
                match self.scripts_ready() {
                    true => Ok(()),
                    false => con.load_scripts(self.scripts).await,
                }
            },
        )
        .await
        .map_err(|(err, _)| err)?;
        self.scripts_ready.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Loads the scripts on a connection that has not got them yet, ahead of the call about
    /// to go on it (within that call's bound): so the first acquire and release after a
    /// (re)connect, or a Sentinel set's failover, go as one EVALSHA each, not as a NOSCRIPT,
    /// a SCRIPT LOAD and the call again. One call loads them at a time; the others go out
    /// behind its SCRIPT LOAD (a silent server would otherwise be sent one per call). A
    /// server that refuses SCRIPT LOAD (an ACL) is sent it no more on that connection
    /// (`scripts_refused`), each call loading its own as before; a connection that failed
    /// under it leaves the call, which was not sent, to go again as a refused one does.
    async fn preload(&self, manager: &W) -> RedisResult<()> {
        if self.scripts_ready()
            || self.scripts_refused.load(Ordering::Relaxed)
            || self.preloading.swap(true, Ordering::AcqRel)
        {
            return Ok(());
        }
        // Cleared however the load ends, the call's bound cutting it short included.
        let _preloading = Preloading(&self.preloading);
        match manager.clone().load_scripts(self.scripts).await {
            Ok(()) => {
                self.scripts_ready.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(err)
                if err.is_connection_dropped()
                    || err.is_connection_refusal()
                    || err.is_io_error() =>
            {
                Err(err)
            }
            Err(_) => {
                self.scripts_refused.store(true, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// Whether every script is loaded on the current connection (as far as we know: a
    /// restart is noticed when the connection drops or a NOSCRIPT comes back), or needs not
    /// be: a call then costs a second round trip only on a node that lacks its script.
    pub(super) fn scripts_ready(&self) -> bool {
        W::SCRIPTS == ScriptLoading::ByCall || self.scripts_ready.load(Ordering::Relaxed)
    }

    /// A NOSCRIPT came back: the scripts must be loaded again.
    pub(super) fn scripts_lost(&self) {
        self.scripts_ready.store(false, Ordering::Relaxed);
    }

    /// Runs `op` on the shared connection within `timeout`. A server that turns down RESP3
    /// gets one transparent retry over RESP2, within the same bound. A timeout also hands
    /// back the connection the unanswered request went out on, which the connection slot no
    /// longer holds.
    /// A call whose `gating` passes (see `Link::gating`) passes the restart quarantine's
    /// gate first.
    async fn call<T, F, Fut>(
        &self,
        timeout: Duration,
        replay: Replay,
        refusals: Refusals,
        gating: Gating,
        op: F,
    ) -> Result<T, (LockError, Option<Pinned<W>>)>
    where
        F: Fn(W) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let mut deadline = tokio::time::Instant::now() + timeout;
        let mut refused_since = None;
        let mut pause = REFUSAL_FIRST_PAUSE;
        let mut fell_back = false;
        let mut extended = false;
        let mut asked_again = false;
        loop {
            let (manager, id) = tokio::time::timeout_at(deadline, self.numbered_manager(deadline))
                .await
                .map_err(|_| (LockError::no_reply(timeout), None))?
                .map_err(|err| (err, None))?;
            // An attempt passes the restart quarantine's gate first, on the connection it
            // goes out on: one the call loop reconnects is asked again.
            let learning_failed = AtomicBool::new(false);
            // The scripts' load failed under the connection: the op itself was not sent.
            let unsent = AtomicBool::new(false);
            let work = tokio::time::timeout_at(deadline, async {
                (self.preload(&manager).await)
                    .inspect_err(|_| unsent.store(true, Ordering::Relaxed))?;
                if let Gating::Pass(slot) = gating {
                    // Boxed, with its connection: the option-off path's future stays the size
                    // it was.
                    let learning = Box::pin(async {
                        let mut con = manager.clone();
                        self.quarantine.gate(&mut con, &self.dropped, slot).await
                    });
                    let gate = learning
                        .await
                        .inspect_err(|_| learning_failed.store(true, Ordering::Relaxed))?;
                    if !gate.is_open(Instant::now()) {
                        return Ok(Err(gate));
                    }
                }
                op(manager.clone()).await.map(Ok)
            });
            let reply = if self.unreached_tls() {
                // A plain server sent a TLS hello stays silent until the connect timeout:
                // after a short silence, ask it in plain text whether it is one. Boxed, as
                // `explain` below: the probe's state would otherwise be in every call's
                // future, which a Redlock allocates and moves once per node per call.
                let silence = Box::pin(async {
                    tokio::time::sleep(mismatch::TLS_SILENCE).await;
                    mismatch::tls_mismatch(&self.endpoint).await
                });
                tokio::select! {
                    reply = work => reply,
                    Some(err) = silence => {
                        self.discard_manager();
                        return Err((err, None));
                    }
                }
            } else {
                work.await
            };
            let err = match reply {
                Ok(Ok(passed)) => {
                    if trace::on() {
                        self.trace_setup();
                    }
                    self.reached.store(true, Ordering::Relaxed);
                    self.up.store(true, Ordering::Relaxed);
                    self.dropped.answered();
                    self.bar.heard();
                    let gate = match passed {
                        Ok(value) => return Ok(value),
                        Err(gate) => gate,
                    };
                    match (self.quarantine).admit(&gate, Instant::now(), deadline.into_std()) {
                        Admit::Open => {}
                        Admit::WaitUntil(opens) => {
                            tokio::time::sleep_until(opens.into()).await;
                            // The attempt's own bound counts from when it can go out, once:
                            // gates met again (drops, restarts) must not stretch the call on.
                            if !extended {
                                extended = true;
                                deadline = tokio::time::Instant::now() + timeout;
                            }
                        }
                        Admit::Refuse(err) => return Err((err, None)),
                    }
                    continue;
                }
                Ok(Err(err)) => {
                    let gone = err.is_connection_dropped()
                        || err.is_connection_refusal()
                        || err.is_io_error();
                    if gone && trace::on() {
                        // The manager reconnects for the next call, setup and all.
                        untraced_from_now(&self.setup, &self.subscribed);
                    }
                    if gone && !self.quarantine.is_off() {
                        // Whatever `up` says: over RESP2 a drop met by no signalled call
                        // would leave the old server's gate standing for the next one.
                        self.quarantine.forget();
                    }
                    // A connection already replaced had its drop dealt with at the switch;
                    // `up` is the new one's. Over RESP3 the drop's push may have told it
                    // first (`PushSink`, which clears `up` too): one drop either way.
                    let ours = self.current.load(Ordering::Acquire) == id;
                    if gone && ours && self.up.swap(false, Ordering::AcqRel) {
                        let resp2 = self.resp2_only.load(Ordering::Relaxed);
                        // A refusal over RESP3 follows a drop its push told of when it
                        // happened; told again now, it would also put in doubt what this very
                        // call wins on the new connection, sent before it met the refusal.
                        if resp2 || !err.is_connection_refusal() {
                            if self.upstream.moves() {
                                // The master may have moved: asked again, and this signal
                                // is the switch's (staleness.rs); the push adds none.
                                self.stale.mark_told();
                            }
                            self.dropped.signal();
                        }
                        if resp2 {
                            // No push tells of a RESP2 drop: the listener (a Redlock's doubt,
                            // a store's waiters) hears it here instead, and the scripts are
                            // loaded again on the next connection.
                            self.listener.connection_lost(LostScope::All);
                            self.new_connection_scripts();
                        }
                    }
                    err
                }
                Err(_) => {
                    // A request that got no reply keeps its place in the connection's reply
                    // queue, and its late reply is read and dropped there (redis 1.8.1,
                    // `PipelineSink::send_result`; one whose caller left before it was
                    // written is not sent at all): the replies after it still reach their
                    // callers. So a bound cut short by the caller's own deadline says nothing
                    // of the connection, and dropping it would put every lock held through
                    // it in doubt (issue 26). A connection that answered nothing for a whole
                    // command timeout (one call's, or several cut short one after another:
                    // `SilenceBar`) is opened afresh: it may lead to a dead peer whose socket
                    // never closes. (Every operation checks the owner token, so a late execution
                    // on the old socket is harmless.) A cluster's connection stays: the
                    // caller puts the call's slot alone in doubt (`send`).
                    self.abandon_after_timeout(timeout);
                    let err = LockError::no_reply(timeout);
                    return Err((Box::pin(self.explain(err)).await, Some(Pinned(manager))));
                }
            };
            // Every call that found RESP3 refused goes again over RESP2, not only the first:
            // the first calls on a new connection go out together.
            if refuses_resp3(&err) && !fell_back {
                fell_back = true;
                if !self.resp2_only.swap(true, Ordering::Relaxed) {
                    self.discard_manager();
                }
                continue;
            }
            // A refused connection means the command was never sent, so trying again is
            // safe: every failed call makes the manager reconnect. Brief pauses (10 ms
            // doubling to 50 ms, about 0.3 s in all) carry a call across a Redis restart and
            // find Redis within 50 ms of it accepting again; a longer outage is reported.
            // A connection reset under a request (a restarting Redis still completes TCP
            // handshakes until its process exits) may or may not have run it, so only a call
            // that is safe to run twice goes again.
            // A demoted master answers READONLY before running anything; a fixed address
            // that answers it is a replica the user named, which no retry changes.
            let demoted = self.upstream.moves() && err.code() == Some("READONLY");
            let resendable = err.is_connection_refusal()
                || demoted
                || unsent.load(Ordering::Relaxed)
                || (replay == Replay::Safe && err.is_connection_dropped());
            if resendable && self.upstream.moves() {
                // Ask the sentinels again: a failover may have moved the master.
                self.stale.mark();
            }
            if self.fixed && err.is_connection_refusal() {
                // The manager hands the first call after a failed reconnect that failure,
                // however old, and only then connects again: counted as a refusal of now, a
                // port closed 25 ms looks closed for 40 ms to a retry that ran late. Ask
                // again at once, which meets the connect of now; count only that one.
                if !asked_again {
                    asked_again = true;
                    continue;
                }
                asked_again = false;
                // Refusals that persist put the server down: every waiter of this connection
                // then tries at once (see ops/acquire.rs `pause_until`), and an attempt fails.
                // Until then an attempt tries again, every few ms, to carry a quick restart.
                let refusal = mismatch::explain(&self.endpoint, LockError::from(err.clone()));
                let down = self.dropped.refused(&refusal);
                if refusals == Refusals::Fail {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    if down || left <= REFUSAL_FIRST_PAUSE {
                        return Err((refusal, None));
                    }
                    tokio::time::sleep(REFUSAL_FIRST_PAUSE).await;
                    continue;
                }
                if !down {
                    // Short steps until the refusals persist or end: whoever meets them
                    // decides within a few ms of `drops::PERSIST` whether the server is down.
                    pause = REFUSAL_FIRST_PAUSE;
                }
            }
            // A cluster turns a command away unrun while its slot moves or fails over (the
            // crate's own quick retries may run out first): pause and send it again, for as
            // long as the bound allows. One server never answers these.
            if turned_away(&err) {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left > pause {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(REFUSAL_MAX_PAUSE);
                    continue;
                }
                // Out of time while the slot moved: said so, not in the server's words
                // (CLUSTERDOWN and a missing node connection have clear errors of their own).
                if slot_moving(&err) {
                    let failed = LockError::slot_moving(&err, timeout);
                    return Err((mismatch::explain(&self.endpoint, failed), None));
                }
            }
            if resendable {
                // From the first failure, not from when the request went out: a call that
                // waited long for its reply before a reset still gets its brief pauses.
                let since = *refused_since.get_or_insert_with(tokio::time::Instant::now);
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
            let mut failed = LockError::from(err);
            if learning_failed.load(Ordering::Relaxed) {
                // An ACL without INFO, EVAL or the epoch key: say which option needs them.
                failed = failed.while_doing(
                    "restartQuarantineMs (learning the server's incarnation, epoch.lua)",
                );
            }
            return Err((Box::pin(self.explain(failed)).await, None));
        }
    }

    /// The `DEBUG` line of what the crate sent by itself on (re)connecting, before the call
    /// just answered: with the time from the (re)opening to that answer, which it includes.
    fn trace_setup(&self) {
        let Some(untraced) = lock(&self.setup).take() else {
            return;
        };
        let resp3 = !self.resp2_only.load(Ordering::Relaxed);
        if let Some(setup) = W::setup(&self.endpoint, resp3, &untraced.resubscribed) {
            let packed = setup.get_packed_pipeline();
            let took = untraced.since.elapsed();
            trace::call("runtime", &packed, took, "ok", scripts::name_of);
        }
    }

    /// TLS to a server never reached yet: it may be a plain-text one.
    fn unreached_tls(&self) -> bool {
        self.endpoint.is_tls() && !self.reached.load(Ordering::Relaxed)
    }

    /// A failed call's error, naming the server; before the server was ever reached, one
    /// that speaks the other protocol (TLS or plain text) is said to, and a cluster whose
    /// seeds refuse the credentials says so.
    async fn explain(&self, err: LockError) -> LockError {
        let reaching = matches!(err, LockError::Connection(_) | LockError::Timeout(_));
        if reaching && !self.reached.load(Ordering::Relaxed) {
            if let Some(mismatch) = mismatch::tls_mismatch(&self.endpoint).await {
                return mismatch;
            }
            if let Some(refused) = mismatch::cluster_refusal(&self.endpoint).await {
                return mismatch::explain(&self.endpoint, refused);
            }
        }
        mismatch::explain(&self.endpoint, err)
    }

    /// Sends one request; on a timeout, also the connection it is still queued on.
    pub(super) async fn send(
        &self,
        request: &Request,
        timeout: Duration,
        replay: Replay,
        refusals: Refusals,
    ) -> Result<Value, (LockError, Option<Pinned<W>>)> {
        let started = Instant::now();
        // Only a connection that grants reads it (see `answered_sent`).
        let sent = self.endpoint.grants.then(Stamp::now);
        // Whether the last try's commands were answered, each traced then (`query`).
        let replied = AtomicBool::new(false);
        let replied = &replied;
        // Whether the last try was turned away as its slot moved (see `heard`).
        let moving = AtomicBool::new(false);
        let moving = &moving;
        // Only an attempt behind a quarantine needs the slot (a cluster's gate is its slot's).
        let gating = self.gating(refusals, || W::slot_of(request_cmd(request)));
        let slot = gating.slot();
        let answer = self
            .call(timeout, replay, refusals, gating, |con| async move {
                replied.store(false, Ordering::Relaxed);
                moving.store(false, Ordering::Relaxed);
                // A gated cluster attempt goes without the crate's own resend: it would
                // reconnect a dropped node and send it again past the gate, to a master
                // that may have restarted empty. The drop reaches `call`, which forgets
                // the gate and learns it again before sending it anew.
                let mut con = match (replay, slot) {
                    (Replay::Safe, None) => con,
                    _ => con.sent_once(),
                };
                let reply = query(request, &mut con).await;
                replied.store(true, Ordering::Relaxed);
                moving.store(reply.as_ref().is_err_and(slot_moving), Ordering::Relaxed);
                reply
            })
            .await;
        if let (Some(sent), true) = (sent, answer.is_ok()) {
            let mut answered = lock(&self.answered);
            if answered.is_none_or(|last| last.at < sent.at) {
                *answered = Some(sent);
            }
        }
        if W::KEPT_ON_TIMEOUT {
            self.heard(request, &answer, timeout, moving.load(Ordering::Relaxed));
        }
        // A call whose last try got no answer (a timeout, no connection) is traced here.
        if trace::on() && !replied.load(Ordering::Relaxed) {
            let failed = answer.as_ref().err().map(|(err, _)| err);
            trace_call(&packed_request(request), started, failed);
        }
        answer
    }

    /// What a call's answer says of its slot's node, on a connection kept when a call times
    /// out (see `Conduit::KEPT_ON_TIMEOUT`): left unanswered, its slot's locks are in doubt
    /// and checked again now, and a slot silent for `silences::STUCK` has the connection
    /// opened afresh (see `silences.rs`). A call out of time while its slot kept `moving`
    /// (its last try turned away, see `slot_moving`) was answered: its node is not silent.
    fn heard<T>(
        &self,
        request: &Request,
        answer: &Result<T, (LockError, Option<Pinned<W>>)>,
        bound: Duration,
        moving: bool,
    ) {
        match answer {
            Err((LockError::Timeout(_), _)) if !moving => {
                let Some(slot) = W::slot_of(request_cmd(request)) else {
                    return;
                };
                if self.silences.unanswered(slot, Instant::now()) {
                    self.discard_manager();
                    self.dropped.signal();
                } else if self.bar.shown_by(bound) {
                    // A bound cut short by the caller's deadline says nothing of the node.
                    self.dropped.signal_slot(slot);
                }
            }
            Ok(_) | Err((LockError::Timeout(_), _)) => {
                self.silences.answered(|| W::slot_of(request_cmd(request)))
            }
            Err(_) => {}
        }
    }

    /// Sends a whole pipeline in one write and returns each command's own result, so one
    /// failing command does not hide the answers to the others.
    pub(super) async fn pipeline<T: FromRedisValue>(
        &self,
        pipe: &Pipeline,
        timeout: Duration,
    ) -> Result<Vec<RedisResult<T>>, LockError> {
        let started = Instant::now();
        let answer = self
            .call(
                timeout,
                Replay::Safe,
                Refusals::Retry,
                Gating::Skip,
                |mut con| async move { pipe.query_async(&mut con).await },
            )
            .await
            .map_err(|(err, _)| err);
        if trace::on() {
            trace_call(&pipe.get_packed_pipeline(), started, answer.as_ref().err());
        }
        answer
    }
}

/// The bytes `request` sends, for a `DEBUG` line.
fn packed_request(request: &Request) -> Vec<u8> {
    request_cmd(request).get_packed_command()
}

/// The command `request` sends first.
fn request_cmd(request: &Request) -> &Cmd {
    match request {
        Request::Command(cmd) | Request::Script { evalsha: cmd, .. } => cmd,
    }
}

/// A `DEBUG` line for a call of the runtime's connection (basics/trace.rs).
fn trace_call(packed: &[u8], started: Instant, failed: Option<&LockError>) {
    let outcome = failed.map_or("ok", LockError::code);
    trace::call(
        "runtime",
        packed,
        started.elapsed(),
        outcome,
        scripts::name_of,
    );
}

/// Sends `request`; a script the server no longer has (restarted, flushed) is loaded and
/// sent once more, as the redis crate's `ScriptInvocation` does, or, where scripts are loaded
/// by the calls, sent once more whole to the same node. Either way within the caller's bound:
/// a NOSCRIPT ran nothing, so even a call that must not run twice may go again.
/// With `DEBUG` on, each command sent has its own line: a NOSCRIPT, the SCRIPT LOAD and the
/// call sent again are three.
async fn query<T: FromRedisValue, W: Conduit>(request: &Request, con: &mut W) -> RedisResult<T> {
    match request {
        Request::Command(cmd) => traced(cmd, con).await,
        Request::Script { script, evalsha } => match traced(evalsha, con).await {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                if W::SCRIPTS == ScriptLoading::Upfront {
                    let started = Instant::now();
                    let loaded = script.load_async(con).await;
                    trace_sent(
                        || packed(redis::cmd("SCRIPT").arg("LOAD")),
                        started,
                        &loaded,
                    );
                    loaded?;
                }
                traced(&after_noscript::<W>(evalsha), con).await
            }
            reply => reply,
        },
    }
}

/// Sends `cmd`, traced once answered (basics/trace.rs); off, it costs one relaxed load.
async fn traced<T: FromRedisValue, W: Conduit>(cmd: &Cmd, con: &mut W) -> RedisResult<T> {
    if !trace::on() {
        return cmd.query_async(con).await;
    }
    let started = Instant::now();
    let reply = cmd.query_async(con).await;
    trace_sent(|| packed(cmd), started, &reply);
    reply
}

/// A script call to send again after it came back NOSCRIPT: as it was once its script is
/// loaded again, or whole where nothing is loaded ahead.
pub(super) fn after_noscript<W: Conduit>(evalsha: &Cmd) -> Cmd {
    match W::SCRIPTS {
        ScriptLoading::Upfront => evalsha.clone(),
        ScriptLoading::ByCall => whole(evalsha).unwrap_or_else(|| evalsha.clone()),
    }
}

#[cfg(test)]
#[path = "link_stale_tests.rs"]
mod stale_tests;
