//! The few libuv functions the JS-thread connection and the heartbeat need, found in the
//! running Node process at first use (Node exports libuv for addons). Looked up, not linked: the Rust test binaries
//! link this crate without Node. Only stable libuv 1.x ABI is used: handle sizes come from
//! `uv_handle_size`, and `data` is the first field of every handle.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

pub type Loop = c_void;
pub type Handle = c_void;
pub type PollCb = unsafe extern "C" fn(*mut Handle, c_int, c_int);
pub type HandleCb = unsafe extern "C" fn(*mut Handle);

pub const READABLE: c_int = 1;
pub const WRITABLE: c_int = 2;
const IDLE: c_int = 6;
const POLL: c_int = 8;
const TIMER: c_int = 13;

pub struct Uv {
    handle_size: unsafe extern "C" fn(c_int) -> usize,
    pub poll_init: unsafe extern "C" fn(*mut Loop, *mut Handle, c_int) -> c_int,
    pub poll_start: unsafe extern "C" fn(*mut Handle, c_int, PollCb) -> c_int,
    pub idle_init: unsafe extern "C" fn(*mut Loop, *mut Handle) -> c_int,
    pub idle_start: unsafe extern "C" fn(*mut Handle, HandleCb) -> c_int,
    pub idle_stop: unsafe extern "C" fn(*mut Handle) -> c_int,
    pub timer_init: unsafe extern "C" fn(*mut Loop, *mut Handle) -> c_int,
    pub timer_start: unsafe extern "C" fn(*mut Handle, HandleCb, u64, u64) -> c_int,
    pub timer_stop: unsafe extern "C" fn(*mut Handle) -> c_int,
    unref: unsafe extern "C" fn(*mut Handle),
    close: unsafe extern "C" fn(*mut Handle, Option<HandleCb>),
}

/// libuv, or `None` outside Node (the direct connection is then never used).
pub fn uv() -> Option<&'static Uv> {
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
            unref: function(c"uv_unref")?,
            close: function(c"uv_close")?,
        })
    }
}

/// A libuv function as the function pointer type `F`.
///
/// # Safety
/// `F` is an `extern "C"` function pointer with the signature libuv declares for `name`.
unsafe fn function<F: Copy>(name: &CStr) -> Option<F> {
    let found = symbol(name)?;
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
    Some(std::mem::transmute_copy::<*mut c_void, F>(&found))
}

fn symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with a NUL-terminated name; a null answer means absent.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!found.is_null()).then_some(found)
}

/// The three handles of one connection, zeroed memory of libuv's own sizes. None of them
/// keeps the process alive: the JS layer does that while calls are pending.
pub struct Handles {
    pub poll: *mut Handle,
    pub idle: *mut Handle,
    pub timer: *mut Handle,
}

impl Uv {
    /// Initialises the handles on `event_loop` for socket `fd`, each with `data`.
    ///
    /// # Safety
    /// Called on the loop's thread; `fd` stays open until the handles are closed.
    pub unsafe fn handles(
        &self,
        event_loop: *mut Loop,
        fd: c_int,
        data: *mut c_void,
    ) -> Option<Handles> {
        let poll = self.alloc(POLL)?;
        let (idle, timer) = match (self.alloc(IDLE), self.alloc(TIMER)) {
            (Some(idle), Some(timer)) => (idle, timer),
            (idle, timer) => {
                for handle in [Some(poll), idle, timer].into_iter().flatten() {
                    libc::free(handle);
                }
                return None;
            }
        };
        let handles = Handles { poll, idle, timer };
        if (self.poll_init)(event_loop, poll, fd) != 0 {
            libc::free(poll);
            libc::free(idle);
            libc::free(timer);
            return None;
        }
        // Both cannot fail on an initialised loop; the poll handle must be closed from here on.
        (self.idle_init)(event_loop, idle);
        (self.timer_init)(event_loop, timer);
        for handle in [poll, idle, timer] {
            *(handle as *mut *mut c_void) = data;
            (self.unref)(handle);
        }
        Some(handles)
    }

    /// A timer on `event_loop` that does not keep the process alive, with `data`.
    ///
    /// # Safety
    /// Called on the loop's thread.
    pub unsafe fn timer(&self, event_loop: *mut Loop, data: *mut c_void) -> Option<*mut Handle> {
        let timer = self.alloc(TIMER)?;
        (self.timer_init)(event_loop, timer);
        *(timer as *mut *mut c_void) = data;
        (self.unref)(timer);
        Some(timer)
    }

    /// Closes one handle; its memory is freed by libuv's close callback.
    ///
    /// # Safety
    /// Called once, on the loop's thread.
    pub unsafe fn close_one(&self, handle: *mut Handle) {
        *(handle as *mut *mut c_void) = std::ptr::null_mut();
        (self.close)(handle, Some(free_handle));
    }

    unsafe fn alloc(&self, kind: c_int) -> Option<*mut Handle> {
        let handle = libc::calloc(1, (self.handle_size)(kind));
        (!handle.is_null()).then_some(handle)
    }

    /// Closes the handles; their memory is freed by libuv's close callback.
    ///
    /// # Safety
    /// Called once, on the loop's thread.
    pub unsafe fn close(&self, handles: &Handles) {
        for handle in [handles.poll, handles.idle, handles.timer] {
            *(handle as *mut *mut c_void) = std::ptr::null_mut();
            (self.close)(handle, Some(free_handle));
        }
    }
}

/// The `data` a handle carries, null once its connection let go of it.
///
/// # Safety
/// `handle` is a live handle made by `Uv::handles`.
pub unsafe fn data(handle: *mut Handle) -> *mut c_void {
    *(handle as *mut *mut c_void)
}

unsafe extern "C" fn free_handle(handle: *mut Handle) {
    libc::free(handle);
}
