//! The libuv handles of one socket on a JS thread's loop: a poll for its readiness, an idle
//! handle to run once the loop turns, and a timer. Each calls back the `SocketEvents` it was
//! opened with, handing back the key it was opened with; the key is only ever compared,
//! never followed, so a stale one is harmless. None of the handles keeps the process alive.

use super::uv::{self, EventLoop, Handle, Handles, Uv};
use std::ffi::{c_int, c_void};
use std::os::fd::AsRawFd;

/// What the handles of a `SocketPoll` call. Every call is on the loop's thread, from libuv,
/// with no JS on the stack. A panic here aborts the process: catch it inside.
pub trait SocketEvents {
    /// The socket is ready (`readable`/`writable`), or failed (`status` below zero).
    fn polled(key: *const c_void, status: i32, readable: bool, writable: bool);
    /// The loop turned after `SocketPoll::run_soon`.
    fn idle(key: *const c_void);
    /// The timer of `SocketPoll::wake_in` fired.
    fn timer(key: *const c_void);
}

/// The handles of one socket; closed when dropped. Not `Send`: made and used on the loop's
/// thread. The socket must stay open until this is dropped (libuv would otherwise watch
/// whatever socket takes its number next).
pub struct SocketPoll {
    uv: &'static Uv,
    handles: Handles,
    on_poll: uv::PollCb,
    on_idle: uv::HandleCb,
    on_timer: uv::HandleCb,
}

impl SocketPoll {
    /// Handles for `socket` on `event_loop`, calling `E` with `key`; `None` if libuv is
    /// absent or refused.
    pub fn open<E: SocketEvents>(
        event_loop: EventLoop,
        socket: &impl AsRawFd,
        key: *const c_void,
    ) -> Option<SocketPoll> {
        let uv = uv::uv()?;
        // SAFETY: an `EventLoop` is used only on its thread (it is not `Send`); the socket
        // stays open until the handles are closed, as this type's contract says.
        let handles =
            unsafe { uv.handles(event_loop.raw(), socket.as_raw_fd(), key as *mut c_void)? };
        Some(SocketPoll {
            uv,
            handles,
            on_poll: on_poll::<E>,
            on_idle: on_idle::<E>,
            on_timer: on_timer::<E>,
        })
    }

    /// Watches the socket for reading, and for writing too if `writable`; `false` if libuv
    /// refused (epoll would not take the socket).
    pub fn watch(&self, writable: bool) -> bool {
        let events = uv::READABLE | if writable { uv::WRITABLE } else { 0 };
        // SAFETY: a live handle of this thread (closed only by `drop`).
        unsafe { (self.uv.poll_start)(self.handles.poll, events, self.on_poll) == 0 }
    }

    /// Calls `SocketEvents::idle` once the loop turns, and on every turn until `stop_idle`.
    pub fn run_soon(&self) {
        // SAFETY: a live handle of this thread. libuv refuses only a null callback.
        unsafe { (self.uv.idle_start)(self.handles.idle, self.on_idle) };
    }

    pub fn stop_idle(&self) {
        // SAFETY: a live handle of this thread; stopping cannot fail (libuv returns 0).
        unsafe { (self.uv.idle_stop)(self.handles.idle) };
    }

    /// Calls `SocketEvents::timer` in `ms` (whole ms of libuv's cached loop time), instead
    /// of when it was due before.
    pub fn wake_in(&self, ms: u64) {
        // SAFETY: a live handle of this thread. libuv refuses only a closing timer, and
        // the handles close only when this is dropped.
        unsafe { (self.uv.timer_start)(self.handles.timer, self.on_timer, ms, 0) };
    }
}

impl Drop for SocketPoll {
    fn drop(&mut self) {
        // SAFETY: live handles of this thread, closed once, here.
        unsafe { self.uv.close(&self.handles) };
    }
}

/// The key a handle carries: null once its `SocketPoll` let go of it.
fn key(handle: *mut Handle) -> *const c_void {
    // SAFETY: libuv calls back only with a live handle `Uv::handles` made.
    unsafe { uv::data(handle) }.cast_const()
}

unsafe extern "C" fn on_poll<E: SocketEvents>(handle: *mut Handle, status: c_int, events: c_int) {
    E::polled(
        key(handle),
        status,
        events & uv::READABLE != 0,
        events & uv::WRITABLE != 0,
    );
}

unsafe extern "C" fn on_idle<E: SocketEvents>(handle: *mut Handle) {
    E::idle(key(handle));
}

unsafe extern "C" fn on_timer<E: SocketEvents>(handle: *mut Handle) {
    E::timer(key(handle));
}
