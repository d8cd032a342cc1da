//! The few libuv functions the JS-thread connection, the heartbeat and the check of handed
//! locks need, found in the running Node process at first use (Node exports libuv for addons). Looked up, not linked:
//! the Rust test binaries link this crate without Node. Only stable libuv 1.x ABI is used: handle sizes come from
//! `uv_handle_size`, and `data` is the first field of every handle.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

pub(super) type Loop = c_void;
pub(super) type Handle = c_void;
pub(super) type PollCb = unsafe extern "C" fn(*mut Handle, c_int, c_int);
pub(super) type HandleCb = unsafe extern "C" fn(*mut Handle);

pub(super) const READABLE: c_int = 1;
pub(super) const WRITABLE: c_int = 2;
const CHECK: c_int = 2;
const IDLE: c_int = 6;
const POLL: c_int = 8;
const TIMER: c_int = 13;

/// A JS thread's libuv loop, as Node-API gave it (see `Env::event_loop`). Not `Send`: only
/// that thread may use it.
#[derive(Clone, Copy)]
pub struct EventLoop(*mut Loop);

impl EventLoop {
    /// Only `Env::event_loop` makes one, from the pointer Node-API answered.
    pub(super) fn from_node(raw: *mut Loop) -> EventLoop {
        EventLoop(raw)
    }

    pub(super) fn raw(self) -> *mut Loop {
        self.0
    }
}

/// Whether libuv was found (it is, inside Node): without it nothing here is ever started.
pub fn available() -> bool {
    uv().is_some()
}

pub(super) struct Uv {
    handle_size: unsafe extern "C" fn(c_int) -> usize,
    pub(super) poll_init: unsafe extern "C" fn(*mut Loop, *mut Handle, c_int) -> c_int,
    pub(super) poll_start: unsafe extern "C" fn(*mut Handle, c_int, PollCb) -> c_int,
    pub(super) idle_init: unsafe extern "C" fn(*mut Loop, *mut Handle) -> c_int,
    pub(super) idle_start: unsafe extern "C" fn(*mut Handle, HandleCb) -> c_int,
    pub(super) idle_stop: unsafe extern "C" fn(*mut Handle) -> c_int,
    pub(super) timer_init: unsafe extern "C" fn(*mut Loop, *mut Handle) -> c_int,
    pub(super) timer_start: unsafe extern "C" fn(*mut Handle, HandleCb, u64, u64) -> c_int,
    pub(super) timer_stop: unsafe extern "C" fn(*mut Handle) -> c_int,
    check_init: unsafe extern "C" fn(*mut Loop, *mut Handle) -> c_int,
    pub(super) check_start: unsafe extern "C" fn(*mut Handle, HandleCb) -> c_int,
    pub(super) check_stop: unsafe extern "C" fn(*mut Handle) -> c_int,
    unref: unsafe extern "C" fn(*mut Handle),
    close: unsafe extern "C" fn(*mut Handle, Option<HandleCb>),
}

/// libuv, or `None` outside Node (the direct connection is then never used).
pub(super) fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(load).as_ref()
}

fn load() -> Option<Uv> {
    // SAFETY: each symbol is transmuted to the signature libuv 1.x declares for it.
    unsafe {
        Some(Uv {
            handle_size: function(c"uv_handle_size")?,
            poll_init: function(c"uv_poll_init")?,
            poll_start: function(c"uv_poll_start")?,
            idle_init: function(c"uv_idle_init")?,
            idle_start: function(c"uv_idle_start")?,
            idle_stop: function(c"uv_idle_stop")?,
            timer_init: function(c"uv_timer_init")?,
            timer_start: function(c"uv_timer_start")?,
            timer_stop: function(c"uv_timer_stop")?,
            check_init: function(c"uv_check_init")?,
            check_start: function(c"uv_check_start")?,
            check_stop: function(c"uv_check_stop")?,
            unref: function(c"uv_unref")?,
            close: function(c"uv_close")?,
        })
    }
}

/// A function of libuv (or of any library loaded) as the function pointer type `F`.
///
/// # Safety
/// `F` is an `extern "C"` function pointer with the signature declared for `name`.
pub(super) unsafe fn function<F: Copy>(name: &CStr) -> Option<F> {
    let found = symbol(name)?;
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
    // SAFETY: same size (checked above), non-null, and `F` is the symbol's signature, as
    // the caller promises.
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&found) })
}

fn symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with a NUL-terminated name; a null answer means absent.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!found.is_null()).then_some(found)
}

/// The three handles of one connection, zeroed memory of libuv's own sizes. None of them
/// keeps the process alive: the JS layer does that while calls are pending.
pub(super) struct Handles {
    pub(super) poll: *mut Handle,
    pub(super) idle: *mut Handle,
    pub(super) timer: *mut Handle,
}

impl Uv {
    /// Initialises the handles on `event_loop` for socket `fd`, each with `data`.
    ///
    /// # Safety
    /// Called on the loop's thread; `fd` stays open until the handles are closed.
    pub(super) unsafe fn handles(
        &self,
        event_loop: *mut Loop,
        fd: c_int,
        data: *mut c_void,
    ) -> Option<Handles> {
        // SAFETY: libuv's own handle types.
        let (poll, idle, timer) =
            unsafe { (self.alloc(POLL), self.alloc(IDLE), self.alloc(TIMER)) };
        let (poll, idle, timer) = match (poll, idle, timer) {
            (Some(poll), Some(idle), Some(timer)) => (poll, idle, timer),
            (poll, idle, timer) => {
                for handle in [poll, idle, timer].into_iter().flatten() {
                    // SAFETY: allocated just above by calloc, never handed to libuv.
                    unsafe { libc::free(handle) };
                }
                return None;
            }
        };
        let handles = Handles { poll, idle, timer };
        // SAFETY: zeroed memory of libuv's size for a poll handle, on the loop's thread;
        // `fd` stays open until the handle is closed, as the caller promises.
        if unsafe { (self.poll_init)(event_loop, poll, fd) } != 0 {
            for handle in [poll, idle, timer] {
                // SAFETY: as above: allocated here, and no handle libuv knows of.
                unsafe { libc::free(handle) };
            }
            return None;
        }
        // SAFETY: zeroed memory of libuv's sizes, on the loop's thread. Both cannot fail on
        // an initialised loop (libuv returns 0); the poll handle must be closed from here on.
        unsafe {
            (self.idle_init)(event_loop, idle);
            (self.timer_init)(event_loop, timer);
        }
        for handle in [poll, idle, timer] {
            // SAFETY: initialised handles, whose first field is `data` in every libuv 1.x.
            unsafe {
                *(handle as *mut *mut c_void) = data;
                (self.unref)(handle);
            }
        }
        Some(handles)
    }

    /// A timer on `event_loop` that does not keep the process alive, with `data`.
    ///
    /// # Safety
    /// Called on the loop's thread.
    pub(super) unsafe fn timer(
        &self,
        event_loop: *mut Loop,
        data: *mut c_void,
    ) -> Option<*mut Handle> {
        // SAFETY: on the loop's thread, as the caller promises.
        let timer = unsafe { self.alloc(TIMER) }?;
        // SAFETY: zeroed memory of a timer's size, on the loop's thread; timer_init cannot
        // fail on an initialised loop (libuv returns 0); `data` is the first field.
        unsafe {
            (self.timer_init)(event_loop, timer);
            *(timer as *mut *mut c_void) = data;
            (self.unref)(timer);
        }
        Some(timer)
    }

    /// A check handle (called right after the loop polled for I/O) on `event_loop` that does
    /// not keep the process alive, with `data`.
    ///
    /// # Safety
    /// Called on the loop's thread.
    pub(super) unsafe fn check(
        &self,
        event_loop: *mut Loop,
        data: *mut c_void,
    ) -> Option<*mut Handle> {
        // SAFETY: on the loop's thread, as the caller promises.
        let check = unsafe { self.alloc(CHECK) }?;
        // SAFETY: zeroed memory of a check handle's size, on the loop's thread; check_init
        // cannot fail on an initialised loop (libuv returns 0); `data` is the first field.
        unsafe {
            (self.check_init)(event_loop, check);
            *(check as *mut *mut c_void) = data;
            (self.unref)(check);
        }
        Some(check)
    }

    /// An idle handle (called at the start of each loop turn, and keeping the loop from
    /// blocking for I/O while started) on `event_loop` that does not keep the process alive,
    /// with `data`.
    ///
    /// # Safety
    /// Called on the loop's thread.
    pub(super) unsafe fn idle(
        &self,
        event_loop: *mut Loop,
        data: *mut c_void,
    ) -> Option<*mut Handle> {
        // SAFETY: on the loop's thread, as the caller promises.
        let idle = unsafe { self.alloc(IDLE) }?;
        // SAFETY: zeroed memory of an idle handle's size, on the loop's thread; idle_init
        // cannot fail on an initialised loop (libuv returns 0); `data` is the first field.
        unsafe {
            (self.idle_init)(event_loop, idle);
            *(idle as *mut *mut c_void) = data;
            (self.unref)(idle);
        }
        Some(idle)
    }

    /// Closes one handle; its memory is freed by libuv's close callback.
    ///
    /// # Safety
    /// Called once, on the loop's thread.
    pub(super) unsafe fn close_one(&self, handle: *mut Handle) {
        // SAFETY: a live handle of ours, closed once on its loop's thread, as the caller
        // promises; its memory is calloc's, which `free_handle` gives back.
        unsafe {
            *(handle as *mut *mut c_void) = std::ptr::null_mut();
            (self.close)(handle, Some(free_handle));
        }
    }

    /// Zeroed memory for a handle of `kind`, owned by the caller.
    ///
    /// # Safety
    /// `kind` is one of libuv's handle types.
    unsafe fn alloc(&self, kind: c_int) -> Option<*mut Handle> {
        // SAFETY: uv_handle_size takes any handle type; calloc any size (null if refused).
        let handle = unsafe { libc::calloc(1, (self.handle_size)(kind)) };
        (!handle.is_null()).then_some(handle)
    }

    /// Closes the handles; their memory is freed by libuv's close callback.
    ///
    /// # Safety
    /// Called once, on the loop's thread.
    pub(super) unsafe fn close(&self, handles: &Handles) {
        for handle in [handles.poll, handles.idle, handles.timer] {
            // SAFETY: as in `close_one`: live handles of ours, each closed once here.
            unsafe { self.close_one(handle) };
        }
    }
}

/// The `data` a handle carries, null once its connection let go of it.
///
/// # Safety
/// `handle` is a live handle made by `Uv::handles`.
pub(super) unsafe fn data(handle: *mut Handle) -> *mut c_void {
    // SAFETY: `data` is the first field of every libuv 1.x handle, and `handle` is live, as
    // the caller promises.
    unsafe { *(handle as *mut *mut c_void) }
}

unsafe extern "C" fn free_handle(handle: *mut Handle) {
    // SAFETY: libuv calls this once per closed handle, all of which calloc allocated.
    unsafe { libc::free(handle) };
}
