//! The hot path: a second connection per endpoint and JS thread, driven by that thread's own
//! libuv loop, for the calls that are one round trip (an acquire's first attempt, release,
//! isLocked). A call through tokio crosses to the runtime's thread and back, two wake-ups
//! that cost more than the Redis round trip on a small machine; here the command is written
//! from the JS call and the promise settled in the loop's poll callback.
//!
//! Everything else (waits, retries, refreshes, TLS, Unix sockets) stays on the tokio
//! connection, and so does every call while this connection is opening, after it broke, or
//! when `NATIVE_REDIS_LOCK_DIRECT=0` is set. A call it cannot finish goes again through
//! tokio, as a call is replayed there after a dropped connection.
//!
//! A `memory://` keyspace needs no connection: its calls run inline (`run_inline`), read by
//! the same continuation as a reply read here.

mod call;
mod connection;
mod quorum;

use super::outcome::{Outcome, Settlement};
use super::settle::Completer;
use super::thread::JsThread;
use crate::binding::sys::uv;
use crate::core::api::{direct, inline, Endpoint, FastCall, MemoryInline, Route, Way};
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::front::connection::LockConnection;
use crate::core::front::reply::Settled;
use call::Adapted;
use connection::Shared;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use quorum::{JsQuorum, QuorumSender};

type Opened = Arc<Mutex<Option<Result<std::net::TcpStream, LockError>>>>;

enum SocketState {
    Idle,
    Opening(Opened),
    Open(Rc<Shared>),
    /// Opening failed: tokio carries every call until then.
    Resting(Instant),
}

/// One endpoint's JS-thread connection (or one Redlock node's), reopened as needed.
pub struct JsSocket {
    connection: LockConnection,
    /// The server it connects to: the connection's, or one of its Redlock nodes.
    endpoint: Endpoint,
    /// The node's index, for a Redlock's node.
    node: Option<usize>,
    thread: Rc<JsThread>,
    completer: Completer,
    state: RefCell<SocketState>,
}

thread_local! {
    /// By the identity of the connection they serve, the node (for a Redlock's) and their JS
    /// thread's state (both kept alive by the socket).
    static SOCKETS: RefCell<HashMap<SocketKey, Weak<JsSocket>>> = RefCell::new(HashMap::new());
}

/// Closes this thread's connections: its JS environment is going away (see teardown.rs).
pub fn close_thread() {
    connection::close_all();
    SOCKETS.with(|sockets| sockets.borrow_mut().clear());
}

/// Whether calls may leave the runtime at all (`NATIVE_REDIS_LOCK_DIRECT=0`: never).
pub fn enabled() -> bool {
    std::env::var("NATIVE_REDIS_LOCK_DIRECT").map_or(true, |v| v != "0")
}

/// A connection's id, its node's index (for a Redlock's node), its JS thread's identity.
type SocketKey = (usize, Option<usize>, usize);

fn key(connection: &LockConnection, node: Option<usize>, thread: &Rc<JsThread>) -> SocketKey {
    (connection.id(), node, Rc::as_ptr(thread) as usize)
}

/// The socket `id` of this thread, if one is alive.
fn cached(id: &SocketKey) -> Option<Rc<JsSocket>> {
    SOCKETS.with(|sockets| sockets.borrow().get(id).and_then(Weak::upgrade))
}

fn remember(id: SocketKey, socket: &Rc<JsSocket>) {
    SOCKETS.with(|sockets| {
        let mut sockets = sockets.borrow_mut();
        sockets.retain(|_, socket| socket.strong_count() > 0);
        sockets.insert(id, Rc::downgrade(socket));
    });
}

impl JsSocket {
    /// The socket of `connection` on this thread, made on first use. `None` when the endpoint or the
    /// environment cannot have one.
    pub fn of(
        connection: &LockConnection,
        thread: &Rc<JsThread>,
        completer: &Completer,
    ) -> Option<Rc<JsSocket>> {
        if !enabled() {
            return None;
        }
        let id = key(connection, None, thread);
        if let Some(socket) = cached(&id) {
            return Some(socket);
        }
        if !uv::available() {
            return None;
        }
        if Route::outside(connection.store()) != Way::Socket {
            return None;
        }
        let socket = Rc::new(JsSocket {
            connection: connection.clone(),
            endpoint: connection.endpoint().clone(),
            node: None,
            thread: thread.clone(),
            completer: completer.clone(),
            state: RefCell::new(SocketState::Idle),
        });
        remember(id, &socket);
        Some(socket)
    }

    /// The socket of `connection`'s Redlock node `index` (at `endpoint`) on this thread,
    /// made on first use.
    fn node(
        connection: &LockConnection,
        index: usize,
        endpoint: &Endpoint,
        thread: &Rc<JsThread>,
        completer: &Completer,
    ) -> Rc<JsSocket> {
        let id = key(connection, Some(index), thread);
        if let Some(socket) = cached(&id) {
            return socket;
        }
        let socket = Rc::new(JsSocket {
            connection: connection.clone(),
            endpoint: endpoint.clone(),
            node: Some(index),
            thread: thread.clone(),
            completer: completer.clone(),
            state: RefCell::new(SocketState::Idle),
        });
        remember(id, &socket);
        socket
    }

    /// Sends `call` if the connection is open, its result settling promise `id` through
    /// `convert`, and returns `true`; otherwise starts opening it (the caller goes through
    /// tokio this time).
    pub fn send<C, F>(&self, id: u32, call: C, convert: F) -> bool
    where
        C: FastCall,
        F: FnOnce(Settled<C::Output>) -> Outcome + Send + 'static,
    {
        let Some(sender) = self.sender() else {
            return false;
        };
        sender.send(id, call, convert);
        true
    }

    /// The open connection to send on, for a caller that must know it can send before it
    /// commits to something; `None` as for `send`.
    pub fn sender(&self) -> Option<Sender> {
        self.connection().map(Sender)
    }

    fn connection(&self) -> Option<Rc<Shared>> {
        let mut state = self.state.borrow_mut();
        let next = match &*state {
            SocketState::Open(shared) => {
                if shared.try_borrow().is_ok_and(|conn| conn.is_usable()) {
                    return Some(shared.clone());
                }
                // It may have met a restarted server the runtime's connection has not heard
                // of yet: no attempt leaves the runtime until the gate is learned again.
                self.connection.store().forget_gate();
                self.start()
            }
            SocketState::Opening(opened) => match lock(opened).take() {
                None => return None,
                Some(Ok(socket)) => {
                    if !uv::available() {
                        return None;
                    }
                    let (thread, completer) = (self.thread.clone(), self.completer.clone());
                    match connection::open(socket, thread, completer, self.node.is_some()) {
                        Some(shared) => SocketState::Open(shared),
                        None => SocketState::Resting(Instant::now() + direct::RETRY_AFTER),
                    }
                }
                Some(Err(_)) => SocketState::Resting(Instant::now() + direct::RETRY_AFTER),
            },
            SocketState::Resting(until) if Instant::now() < *until => return None,
            SocketState::Idle | SocketState::Resting(_) => self.start(),
        };
        *state = next;
        match &*state {
            SocketState::Open(shared) => Some(shared.clone()),
            _ => None,
        }
    }

    /// Opens a connection on the runtime; the next call picks it up.
    fn start(&self) -> SocketState {
        let opened: Opened = Arc::new(Mutex::new(None));
        let (slot, endpoint) = (opened.clone(), self.endpoint.clone());
        // Without a runtime (the OS refused its thread) it stays opening: calls go the
        // runtime's way, which answers them.
        let _started = crate::binding::runtime::spawn(async move {
            let socket = direct::open(&endpoint).await;
            *lock(&slot) = Some(socket);
        });
        SocketState::Opening(opened)
    }
}

/// A connection found open, to send one call on (see `JsSocket::sender`).
pub struct Sender(Rc<Shared>);

impl Sender {
    /// Sends `call`; its result settles promise `id` through `convert`.
    pub fn send<C, F>(&self, id: u32, call: C, convert: F)
    where
        C: FastCall,
        F: FnOnce(Settled<C::Output>) -> Outcome + Send + 'static,
    {
        let call = Adapted::new(call, convert);
        self.0.borrow_mut().submit(id, move |out, form| {
            let replies = call.write(out, form);
            (replies, call.bound(), Box::new(call))
        });
    }
}

/// Runs `call` on `memory` now, on the JS thread, inside the JS call that made it. Its
/// answer is returned by that JS call when it may be (`JsThread::settle_inline`: a success,
/// with nothing settled or told before it pending); otherwise promise `id` settles at the
/// start of the next loop turn, as a reply read from a socket would, so JS sees the same
/// order of events as with a server, only sooner. A waiter its handover answered settles at once, as one a socket's handover lends
/// to (`JsFastLane::answer_lent`): its runtime task, told to end without a word, may already
/// have queued an end of its own, which must find the waiter settled.
pub fn run_inline<C, F>(
    memory: &MemoryInline,
    id: u32,
    call: C,
    convert: F,
    thread: &JsThread,
    completer: &Completer,
) where
    C: FastCall,
    F: FnOnce(Settled<C::Output>) -> Outcome + Send + 'static,
{
    let reply = inline::reply_to(memory, &call);
    let mut settled = Vec::with_capacity(2);
    Adapted::new(call, convert).finish(id, reply, completer, &mut settled);
    // A release that handed the lock to a waiter here settles it first: the releaser's own
    // answer then waits for the next turn, so that the waiter's continuation runs first.
    let handed = settled.len() > 1;
    for entry in settled {
        match entry {
            Settlement::Settled(to, outcome) if to == id => {
                let kept = match handed {
                    true => thread.settle_next_turn(id, outcome),
                    false => thread.settle_inline(id, outcome),
                };
                if let Err(outcome) = kept {
                    completer.settle(id, outcome);
                }
            }
            Settlement::Settled(waiter, outcome) => thread.settle_in_call(waiter, outcome),
            // A call's reply settles calls only: news of a lock comes from the watchdog.
            other => other.forsake(),
        }
    }
}

impl Drop for JsSocket {
    fn drop(&mut self) {
        if let SocketState::Open(shared) = &*self.state.borrow() {
            connection::retire(shared);
        }
    }
}
