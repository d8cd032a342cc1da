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

mod connection;
mod exclusive_work;
mod handoff;
mod work;

pub use exclusive_work::ExclusiveWork;
pub use handoff::{Handoff, Lending};
pub use work::{Answer, Mode, Work};

use super::completions::Completer;
use super::promises::JsThread;
use super::uv;
use super::win::Win;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::sync::lock;
use crate::core::ops::direct;
use crate::core::ops::lock::{self, AttemptForm, Locker, Plan};
use crate::core::ops::store::Store;
use connection::Shared;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex};
use std::time::Instant;

type Opened = Arc<Mutex<Option<Result<std::net::TcpStream, LockError>>>>;

enum State {
    Idle,
    Opening(Opened),
    Open(Rc<Shared>),
    /// Opening failed: tokio carries every call until then.
    Resting(Instant),
}

/// One endpoint's JS-thread connection, reopened as needed.
pub struct Link {
    store: Arc<Store>,
    thread: Rc<JsThread>,
    completer: Completer,
    state: RefCell<State>,
}

thread_local! {
    /// By the addresses of the store they serve and of their JS thread's state (both kept
    /// alive by the link).
    static LINKS: RefCell<HashMap<(usize, usize), Weak<Link>>> = RefCell::new(HashMap::new());
}

/// Closes this thread's connections: its JS environment is going away (see teardown.rs).
pub fn close_thread() {
    connection::close_all();
    LINKS.with(|links| links.borrow_mut().clear());
}

fn enabled() -> bool {
    std::env::var("NATIVE_REDIS_LOCK_DIRECT").map_or(true, |v| v != "0")
}

fn key(store: &Arc<Store>, thread: &Rc<JsThread>) -> (usize, usize) {
    (Arc::as_ptr(store) as usize, Rc::as_ptr(thread) as usize)
}

impl Link {
    /// The link of `store` on this thread, made on first use. `None` when the endpoint or the
    /// environment cannot have one.
    pub fn of(
        store: &Arc<Store>,
        thread: &Rc<JsThread>,
        completer: &Completer,
    ) -> Option<Rc<Link>> {
        if !enabled() {
            return None;
        }
        let id = key(store, thread);
        if let Some(link) = LINKS.with(|links| links.borrow().get(&id).and_then(Weak::upgrade)) {
            return Some(link);
        }
        uv::uv()?;
        if !direct::supports(store.endpoint()) {
            return None;
        }
        let link = Rc::new(Link {
            store: store.clone(),
            thread: thread.clone(),
            completer: completer.clone(),
            state: RefCell::new(State::Idle),
        });
        LINKS.with(|links| {
            let mut links = links.borrow_mut();
            links.retain(|_, link| link.strong_count() > 0);
            links.insert(id, Rc::downgrade(&link));
        });
        Some(link)
    }

    /// Sends what `write` appends to the connection's buffer (answering with how many
    /// replies it gets, its bound and its work) if the connection is open, and returns
    /// `true`; otherwise starts opening it (the caller goes through tokio this time).
    pub fn send(
        &self,
        id: u32,
        write: impl FnOnce(&mut Vec<u8>, AttemptForm) -> (usize, std::time::Duration, Work),
    ) -> bool {
        let Some(sender) = self.sender() else {
            return false;
        };
        sender.send(id, write);
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
            State::Open(shared) => {
                if shared.try_borrow().is_ok_and(|conn| conn.is_usable()) {
                    return Some(shared.clone());
                }
                self.start()
            }
            State::Opening(opened) => match lock(opened).take() {
                None => return None,
                Some(Ok(socket)) => {
                    let uv = uv::uv()?;
                    match connection::open(uv, socket, self.thread.clone(), self.completer.clone())
                    {
                        Some(shared) => State::Open(shared),
                        None => State::Resting(Instant::now() + direct::RETRY_AFTER),
                    }
                }
                Some(Err(_)) => State::Resting(Instant::now() + direct::RETRY_AFTER),
            },
            State::Resting(until) if Instant::now() < *until => return None,
            State::Idle | State::Resting(_) => self.start(),
        };
        *state = next;
        match &*state {
            State::Open(shared) => Some(shared.clone()),
            _ => None,
        }
    }

    /// Opens a connection on the runtime; the next call picks it up.
    fn start(&self) -> State {
        let opened: Opened = Arc::new(Mutex::new(None));
        let (slot, store) = (opened.clone(), self.store.clone());
        napi::bindgen_prelude::spawn(async move {
            let socket = direct::open(store.endpoint()).await;
            *lock(&slot) = Some(socket);
        });
        State::Opening(opened)
    }
}

/// A connection found open, to send one call on (see `Link::sender`).
pub struct Sender(Rc<Shared>);

impl Sender {
    /// Sends `locker`'s first attempt at `key`: `mode` says how it goes on if the lock is
    /// held, `win` what its caller is given once it is won.
    pub fn attempt(
        self,
        id: u32,
        locker: &Arc<Locker>,
        key: &str,
        ttl: std::time::Duration,
        mode: Mode,
        win: Win,
    ) {
        self.send(id, |out, form| {
            let request = locker.attempt_request(key, ttl);
            // A waiter's attempt also asks the holder's TTL, which ends its first pause.
            let waiting = matches!(mode.plan, Plan::Until { .. } | Plan::Backoff { .. });
            let replies = request.write(out, form, waiting);
            let bound = mode.plan.attempt_bound(locker.command_timeout());
            let work = Work::Acquire {
                locker: locker.clone(),
                request,
                mode,
                win,
            };
            (replies, bound, work)
        });
    }

    /// Sends the release of `lease` (bounded by `bound`, see `Locker::release_request`).
    pub fn release(
        self,
        id: u32,
        locker: &Arc<Locker>,
        lease: &Arc<Lease>,
        bound: std::time::Duration,
        answer: Answer,
    ) {
        self.send(id, |out, _| {
            lock::write_release(out, &lease.redis_key, &lease.token);
            let work = Work::Release {
                locker: locker.clone(),
                lease: lease.clone(),
                answer,
            };
            (1, bound, work)
        });
    }

    pub fn send(
        self,
        id: u32,
        write: impl FnOnce(&mut Vec<u8>, AttemptForm) -> (usize, std::time::Duration, Work),
    ) {
        self.0.borrow_mut().submit(id, write);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let State::Open(shared) = &*self.state.borrow() {
            connection::retire(shared);
        }
    }
}
