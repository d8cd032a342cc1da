//! A Redis connection driven by the JS thread's own event loop: commands are written from the
//! JS call itself (batched until the loop turns), replies are read and settled in a libuv
//! poll callback. No thread hand-off on the way out or back (see bench/README.md).
//!
//! Replies come in the order requests were sent, so the pending calls form a queue. A call
//! whose bound passes is told so at once, and its place in the queue kept for its late
//! reply. Once nothing was answered for its callers' command timeout (`Call::silent_after`,
//! judged by the runtime's own `SilenceBar`), not a bound cut short by a caller's own
//! deadline, the connection takes no new calls (a silent server is not to be trusted with
//! more) and closes once everything sent on it has been answered, or after `LINGER`. A
//! connection that breaks hands every unanswered call to the tokio connection, and an undo
//! it wrote whose reply had not come back to the core, owed to its node.

use super::super::outcome::Settlement;
use super::super::settle::Completer;
use super::super::thread::JsThread;
use super::call::Behind;
use super::call::Call;
use crate::binding::sys::socket_poll::{SocketEvents, SocketPoll};
use crate::core::api::{script_name, AttemptForm, SilenceBar, TxSupport, UndoSent};
use crate::core::basics::{resp, trace};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::io::{ErrorKind, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a connection that takes no new calls waits for the replies still due to it.
const LINGER: Duration = Duration::from_secs(60);

/// Bytes read per `read` call; a shorter read means the socket is drained for now.
const READ_CHUNK: usize = 16 * 1024;

struct Pending {
    /// 0 for work nobody waits on.
    id: u32,
    /// Replies still to come before the one that answers the call (a transaction's
    /// `+OK` and `+QUEUED`s).
    leading: usize,
    /// An error among those leading replies: the call's answer, whatever comes last.
    refused: Option<redis::Value>,
    /// Written as a transaction (it has leading replies).
    transaction: bool,
    bound: Duration,
    deadline: Instant,
    /// `None` for a command nobody waits on (one undoing a call answered late).
    call: Option<Box<dyn Call>>,
    /// Among the commands nobody waits on, an undo: owed to its node should the connection
    /// break before its reply (it may never have run).
    undo: Option<UndoSent>,
    timed_out: bool,
    /// With `DEBUG` on: when it was queued, and what it wrote (basics/trace.rs).
    traced: Option<Box<(Instant, Vec<u8>)>>,
}

/// The last `SocketConnection::lane` given out.
static LANES: AtomicU64 = AtomicU64::new(0);

pub struct SocketConnection {
    /// What `DEBUG` lines name it: `socket`, or for a Redlock's node `socket host:port`.
    via: Box<str>,
    /// This connection's id, never another's in the process (never 0): what a Redlock's
    /// calls know it by, to tell a release sent behind an attempt on it from one sent
    /// elsewhere (core::backend::redlock_late).
    lane: u64,
    /// Declared before the socket, so dropped (closed) before it is.
    handles: Option<SocketPoll>,
    socket: std::net::TcpStream,
    thread: Rc<JsThread>,
    completer: Completer,
    out: Vec<u8>,
    input: Vec<u8>,
    chunk: Box<[u8]>,
    /// How acquire attempts are written (the core chooses, from what the server refused).
    tx_support: TxSupport,
    pending: VecDeque<Pending>,
    writable_polled: bool,
    flush_scheduled: bool,
    /// Other connections whose queued bytes go out when this one's do: a Redlock's nodes,
    /// written in the same JS call, flushed in one callback (see `flush_with`).
    also_flush: Vec<Weak<Shared>>,
    /// Inside the poll callback, which flushes at its end.
    in_callback: bool,
    timer_due: Option<Instant>,
    /// Takes no new calls; closes at this instant at the latest.
    retired: Option<Instant>,
    /// Whether the calls that went unanswered show the server silent.
    bar: SilenceBar,
    broken: bool,
    /// Calls settled here, delivered to JS when the callback ends.
    settled: Vec<Settlement>,
}

pub type Shared = RefCell<SocketConnection>;

thread_local! {
    /// Every open connection of this thread; libuv's handles point into these.
    static LIVE: RefCell<Vec<Rc<Shared>>> = const { RefCell::new(Vec::new()) };
}

/// Starts polling `socket` on the JS thread's loop; `None` if libuv refused. A Redlock's
/// node (`node`) is named by its address in `DEBUG` lines.
pub fn open(
    socket: std::net::TcpStream,
    thread: Rc<JsThread>,
    completer: Completer,
    node: bool,
) -> Option<Rc<Shared>> {
    let event_loop = thread.event_loop();
    let via = match (node, socket.peer_addr()) {
        (true, Ok(peer)) => format!("socket {peer}").into(),
        _ => "socket".into(),
    };
    let shared = Rc::new(RefCell::new(SocketConnection {
        via,
        lane: LANES.fetch_add(1, Ordering::Relaxed) + 1,
        handles: None,
        socket,
        thread,
        completer,
        out: Vec::with_capacity(4096),
        input: Vec::with_capacity(4096),
        chunk: vec![0u8; READ_CHUNK].into_boxed_slice(),
        tx_support: TxSupport::default(),
        pending: VecDeque::new(),
        writable_polled: false,
        flush_scheduled: false,
        also_flush: Vec::new(),
        in_callback: false,
        timer_due: None,
        retired: None,
        bar: SilenceBar::default(),
        broken: false,
        settled: Vec::new(),
    }));
    let key = Rc::as_ptr(&shared) as *const c_void;
    let handles = SocketPoll::open::<Events>(event_loop, &shared.borrow().socket, key)?;
    if !handles.watch(false) {
        // Dropped here, the handles close before `shared`, and its socket, goes.
        return None;
    }
    shared.borrow_mut().handles = Some(handles);
    LIVE.with(|live| live.borrow_mut().push(shared.clone()));
    Some(shared)
}

/// No new calls on this connection; closed at once if nothing is due to it.
pub fn retire(shared: &Rc<Shared>) {
    let idle = match shared.try_borrow_mut() {
        Ok(mut conn) => {
            conn.retire();
            conn.pending.is_empty()
        }
        Err(_) => false,
    };
    if idle {
        close(shared);
    }
}

/// Closes every connection of this thread (its JS environment is going away). Nobody is
/// left to hear an answer: a lock an attempt in flight may have won is freed, and a
/// release in flight goes again through tokio (see `FastCall::orphaned`).
pub fn close_all() {
    let all = LIVE.with(|live| live.borrow().clone());
    for shared in all {
        if let Ok(mut conn) = shared.try_borrow_mut() {
            let completer = conn.completer.clone();
            for pending in std::mem::take(&mut conn.pending) {
                if let Some(call) = pending.call {
                    call.orphaned(pending.id, &completer);
                }
                if let Some(undo) = pending.undo {
                    undo.owe();
                }
            }
        }
        close(&shared);
    }
}

impl SocketConnection {
    pub fn lane(&self) -> u64 {
        self.lane
    }

    pub fn is_usable(&self) -> bool {
        self.retired.is_none() && !self.broken && self.handles.is_some()
    }

    /// Queues what `write` appends for the next write, at the next loop turn; the call
    /// ends with its last reply or its bound. `write` answers with the number of replies,
    /// the bound and the call.
    pub fn submit(
        &mut self,
        id: u32,
        write: impl FnOnce(&mut Vec<u8>, AttemptForm) -> (usize, Duration, Box<dyn Call>),
    ) {
        self.queue(id, write);
        self.schedule_flush();
    }

    /// `submit`, its bytes written when another connection's flush takes them along
    /// (`flush_with`), or when this one's next callback flushes.
    pub fn queue(
        &mut self,
        id: u32,
        write: impl FnOnce(&mut Vec<u8>, AttemptForm) -> (usize, Duration, Box<dyn Call>),
    ) {
        let before = self.out.len();
        let (replies, bound, call) = write(&mut self.out, self.tx_support.attempts());
        let deadline = Instant::now() + bound;
        let traced = trace::on().then(|| Box::new((Instant::now(), self.out[before..].to_vec())));
        self.pending.push_back(Pending {
            id,
            leading: replies.saturating_sub(1),
            refused: None,
            transaction: replies > 1,
            bound,
            deadline,
            call: Some(call),
            undo: None,
            timed_out: false,
            traced,
        });
        if self.timer_due.is_none_or(|due| due > deadline) {
            self.arm_timer(deadline);
        }
    }

    /// Writes what is queued at the next loop turn (or at the end of the callback this
    /// runs in).
    fn schedule_flush(&mut self) {
        if !self.in_callback && !self.flush_scheduled {
            if let Some(handles) = &self.handles {
                handles.run_soon();
                self.flush_scheduled = true;
            }
        }
    }

    /// Writes what is queued here and on `others` together, at the next loop turn (or at
    /// the end of this one's callback): one callback for a call written to several
    /// connections at once, not one each.
    pub fn flush_with(&mut self, others: impl Iterator<Item = Weak<Shared>>) {
        for other in others {
            if !self.also_flush.iter().any(|seen| seen.ptr_eq(&other)) {
                self.also_flush.push(other);
            }
        }
        self.schedule_flush();
    }

    /// No new calls from now on.
    pub fn retire(&mut self) {
        if self.retired.is_none() {
            self.retired = Some(Instant::now() + LINGER);
        }
    }

    fn arm_timer(&mut self, due: Instant) {
        let Some(handles) = &self.handles else {
            return;
        };
        // libuv counts whole milliseconds from its cached loop time: round up, plus one.
        let wait = due.saturating_duration_since(Instant::now());
        let ms = wait.as_millis() as u64 + 1;
        handles.wake_in(ms);
        self.timer_due = Some(due);
    }

    fn flush(&mut self) {
        let mut written = 0;
        while written < self.out.len() {
            match self.socket.write(&self.out[written..]) {
                Ok(0) => {
                    self.broken = true;
                    break;
                }
                Ok(n) => written += n,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.broken = true;
                    break;
                }
            }
        }
        self.out.drain(..written);
        let want_writable = !self.out.is_empty() && !self.broken;
        if want_writable != self.writable_polled {
            if let Some(handles) = &self.handles {
                if !handles.watch(want_writable) {
                    // The socket can no longer be watched (epoll refused it): as for a
                    // failed write, the connection is done and its calls go through tokio.
                    self.broken = true;
                }
                self.writable_polled = want_writable;
            }
        }
    }

    /// Reads what the socket has and answers the calls it completes. A read shorter than
    /// the buffer drained the socket: the poll (level-triggered) calls again for more, so no
    /// read is spent learning that nothing is left.
    fn read(&mut self) {
        loop {
            match self.socket.read(&mut self.chunk) {
                Ok(0) => {
                    self.broken = true;
                    break;
                }
                Ok(n) => {
                    self.input.extend_from_slice(&self.chunk[..n]);
                    if n < self.chunk.len() {
                        break;
                    }
                }
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.broken = true;
                    break;
                }
            }
        }
        let mut used = 0;
        loop {
            let reply = match resp::parse(&self.input[used..]) {
                Ok(Some((reply, len))) => {
                    used += len;
                    reply
                }
                Ok(None) => break,
                Err(_) => {
                    self.broken = true;
                    break;
                }
            };
            let Some(front) = self.pending.front_mut() else {
                // A reply nobody asked for: the stream cannot be trusted.
                self.broken = true;
                break;
            };
            self.bar.heard();
            if front.leading > 0 {
                front.leading -= 1;
                // A transaction's refusal is its answer; what was written behind a call
                // (a follow-up, then an undo) is answered each by its own reply.
                if front.transaction && matches!(reply, redis::Value::ServerError(_)) {
                    front.refused.get_or_insert(reply);
                }
                continue;
            }
            let Some(mut call) = self.pending.pop_front() else {
                break;
            };
            let reply = match call.refused.take() {
                Some(refused) => {
                    self.tx_support.multi_refused(&refused);
                    refused
                }
                None => {
                    if call.transaction {
                        self.tx_support.exec_answered(&reply);
                    }
                    reply
                }
            };
            self.answer(call, reply);
        }
        self.input.drain(..used);
    }

    fn answer(&mut self, pending: Pending, reply: redis::Value) {
        if let Some(traced) = &pending.traced {
            let outcome = match (&reply, pending.timed_out) {
                (_, true) if pending.call.is_some() => "late",
                (redis::Value::ServerError(_), _) => "error",
                _ => "ok",
            };
            let (sent, packed) = &**traced;
            trace::call(&self.via, packed, sent.elapsed(), outcome, script_name);
        }
        let Some(call) = pending.call else {
            // The last reply of what was written behind a call is its undo's, when it has one.
            if let Some(undo) = pending.undo {
                undo.heard(reply);
            }
            return;
        };
        let from = self.out.len();
        let behind = if pending.timed_out {
            call.answered_late(reply, &mut self.out)
        } else {
            call.answered(
                pending.id,
                reply,
                &self.completer,
                &mut self.settled,
                &mut self.out,
            )
        };
        if behind.commands > 0 {
            self.expect_unwanted(behind, from);
        }
    }

    /// Commands (an undo, an attempt's follow-up) were written from `out[from..]`, after the
    /// calls sent so far: their replies, due after theirs, are for nobody. Traced as one line,
    /// as a call is.
    fn expect_unwanted(&mut self, Behind { commands, undo }: Behind, from: usize) {
        let bound = LINGER;
        let written = self.out.get(from..).unwrap_or_default();
        let traced = trace::on().then(|| Box::new((Instant::now(), written.to_vec())));
        self.pending.push_back(Pending {
            id: 0,
            leading: commands.saturating_sub(1),
            refused: None,
            transaction: false,
            bound,
            deadline: Instant::now() + bound,
            call: None,
            undo,
            timed_out: true,
            traced,
        });
    }

    /// Tells every call past its bound; re-arms for the next bound.
    fn expire(&mut self) {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut silent = false;
        for call in self.pending.iter_mut().filter(|call| !call.timed_out) {
            if call.deadline <= now {
                call.timed_out = true;
                // A bound cut short by its caller (an attempt's deadline) passes while the
                // server is only busy: the call keeps its place for the late reply, and the
                // calls behind it theirs (issue 26), unless nothing was answered for a whole
                // command timeout.
                if let Some(work) = &call.call {
                    self.bar.heed(work.silent_after());
                }
                let sent = call.deadline.checked_sub(call.bound).unwrap_or(now);
                silent |= self.bar.unanswered(sent, now);
                if let Some(traced) = &call.traced {
                    let (sent, packed) = &**traced;
                    trace::call(&self.via, packed, sent.elapsed(), "ETIMEDOUT", script_name);
                }
                if let (Some(work), true) = (&mut call.call, call.id != 0) {
                    if let Some(outcome) = work.timed_out(call.id, call.bound, &self.completer) {
                        self.settled.push(Settlement::Settled(call.id, outcome));
                    }
                }
            } else if next.is_none_or(|due| due > call.deadline) {
                next = Some(call.deadline);
            }
        }
        if silent {
            self.retire();
        }
        self.timer_due = None;
        if let Some(due) = next.or(self.retired) {
            self.arm_timer(due);
        }
    }

    /// Whether it is time to close: broken, or retired with nothing left to wait for.
    fn done(&self) -> bool {
        self.broken
            || self
                .retired
                .is_some_and(|until| self.pending.is_empty() || Instant::now() >= until)
    }

    /// Hands every unanswered call to tokio (or frees what a timed-out attempt may hold).
    fn hand_over_all(&mut self) {
        let now = Instant::now();
        for pending in std::mem::take(&mut self.pending) {
            let Some(call) = pending.call else {
                if let Some(undo) = pending.undo {
                    undo.owe();
                }
                continue;
            };
            if pending.timed_out {
                call.abandon();
            } else {
                let left = pending.deadline.saturating_duration_since(now);
                let left = Some(left.max(Duration::from_millis(1)));
                call.resend(pending.id, left, &self.completer);
            }
        }
    }
}

/// Settles what the connection answered (running JS), then flushes what JS sent meanwhile,
/// and closes the connection when it is done.
fn after_callback(shared: &Rc<Shared>) {
    let (thread, settled) = {
        let mut conn = shared.borrow_mut();
        (conn.thread.clone(), std::mem::take(&mut conn.settled))
    };
    // From a libuv callback of this thread, with no borrow held.
    thread.deliver(settled);
    let (done, others) = {
        let mut conn = shared.borrow_mut();
        conn.in_callback = false;
        if !conn.broken {
            conn.flush();
        }
        (conn.done(), std::mem::take(&mut conn.also_flush))
    };
    flush_others(others);
    if done {
        if let (Some(thread), settled) = close(shared) {
            thread.deliver(settled);
        }
    }
}

/// Closes the connection, handing its unanswered calls to tokio. Answers it had settled
/// but not delivered are returned, for a caller in a libuv callback to deliver (outside
/// one, none are left: every callback delivers before it returns).
fn close(shared: &Rc<Shared>) -> (Option<Rc<JsThread>>, Vec<Settlement>) {
    let (thread, settled, others) = {
        let Ok(mut conn) = shared.try_borrow_mut() else {
            return (None, Vec::new());
        };
        conn.retire();
        conn.hand_over_all();
        // Closes the handles, once (taken out of the option).
        drop(conn.handles.take());
        let others = std::mem::take(&mut conn.also_flush);
        (
            conn.thread.clone(),
            std::mem::take(&mut conn.settled),
            others,
        )
    };
    // Their bytes were to leave with this one's: not left waiting for their own callbacks.
    flush_others(others);
    LIVE.with(|live| live.borrow_mut().retain(|c| !Rc::ptr_eq(c, shared)));
    (Some(thread), settled)
}

/// Writes what other connections queued to go out with one that flushed (`flush_with`). One
/// that breaks on the way is closed from its own callback, scheduled here.
fn flush_others(others: Vec<Weak<Shared>>) {
    for other in others.iter().filter_map(Weak::upgrade) {
        let Ok(mut conn) = other.try_borrow_mut() else {
            continue;
        };
        if !conn.broken {
            conn.flush();
        }
        if conn.broken {
            conn.schedule_flush();
        }
    }
}

/// The connection behind a handle's key, if it is still open.
fn from_key(key: *const c_void) -> Option<Rc<Shared>> {
    let data = key as *const Shared;
    if data.is_null() {
        return None;
    }
    LIVE.with(|live| {
        live.borrow()
            .iter()
            .find(|c| std::ptr::eq(Rc::as_ptr(c), data))
            .cloned()
    })
}

/// Runs a callback's body; a panic must not unwind into libuv, so it breaks the connection.
fn guarded(key: *const c_void, body: impl FnOnce(&Rc<Shared>)) {
    let Some(shared) = from_key(key) else {
        return;
    };
    if catch_unwind(AssertUnwindSafe(|| body(&shared))).is_err() {
        if let Ok(mut conn) = shared.try_borrow_mut() {
            conn.broken = true;
        }
        let _ = catch_unwind(AssertUnwindSafe(|| {
            if let (Some(thread), settled) = close(&shared) {
                // A libuv callback of this thread, no borrow held.
                thread.deliver(settled);
            }
        }));
    }
}

/// What the connection's libuv handles call.
struct Events;

impl SocketEvents for Events {
    fn polled(key: *const c_void, status: i32, readable: bool, writable: bool) {
        guarded(key, |shared| {
            {
                let mut conn = shared.borrow_mut();
                conn.in_callback = true;
                if status < 0 {
                    conn.broken = true;
                }
                if writable && !conn.broken {
                    conn.flush();
                }
                if readable && !conn.broken {
                    conn.read();
                    // What the replies wrote behind them (undos, follow-ups) leaves before
                    // their callers' JS runs: a process that exits there still sends it.
                    if !conn.out.is_empty() && !conn.broken {
                        conn.flush();
                    }
                }
            }
            after_callback(shared);
        });
    }

    fn idle(key: *const c_void) {
        guarded(key, |shared| {
            {
                let mut conn = shared.borrow_mut();
                conn.flush_scheduled = false;
                if let Some(handles) = &conn.handles {
                    handles.stop_idle();
                }
                conn.in_callback = true;
            }
            after_callback(shared);
        });
    }

    fn timer(key: *const c_void) {
        guarded(key, |shared| {
            {
                let mut conn = shared.borrow_mut();
                conn.in_callback = true;
                conn.expire();
            }
            after_callback(shared);
        });
    }
}
