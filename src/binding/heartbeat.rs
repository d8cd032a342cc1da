use super::uv::{self, Handle};
use crate::core::ops::signals::Heartbeat;
use napi::bindgen_prelude::Env;
use napi_derive::napi;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;

/// How often a held lock's JS thread proves it is alive.
const BEAT_MS: u64 = 100;

/// Proof of life from one JavaScript thread: a timer of that thread's own event loop beats
/// it while stall-guarded locks are held, natively (no JavaScript runs for it, so holding
/// locks costs the thread nothing). A blocked event loop stops the beats, and the watchdog
/// gives those locks up once the beats are older than `max_stall_ms`. The timer does not
/// keep the process alive.
#[napi]
pub struct NativeHeartbeat {
    pub(crate) inner: Arc<Heartbeat>,
    event_loop: *mut c_void,
    /// The timer, made on first use, and the heartbeat it beats (its `data`).
    timer: Cell<Option<(*mut Handle, *mut Arc<Heartbeat>)>>,
    holders: Cell<u32>,
}

#[napi]
impl NativeHeartbeat {
    #[napi(constructor)]
    pub fn new(env: Env) -> Self {
        let mut event_loop = std::ptr::null_mut();
        // SAFETY: a constructor runs on its JS thread; the out-pointer is a local.
        let status = unsafe { napi::sys::napi_get_uv_event_loop(env.raw(), &mut event_loop) };
        if status != napi::sys::Status::napi_ok {
            // No loop, no native timer: `hold` answers `false`, and the JS layer beats
            // from its own timer instead.
            event_loop = std::ptr::null_mut();
        }
        NativeHeartbeat {
            inner: Arc::new(Heartbeat::default()),
            event_loop: event_loop.cast(),
            timer: Cell::new(None),
            holders: Cell::new(0),
        }
    }

    #[napi]
    pub fn beat(&self) {
        self.inner.beat();
    }

    /// One more (`delta` 1) or one fewer (-1) stall-guarded lock. `false` when no native
    /// timer can beat (libuv not found): the JS layer then beats from its own timer.
    #[napi]
    pub fn hold(&self, delta: i32) -> bool {
        let Some(uv) = uv::uv().filter(|_| !self.event_loop.is_null()) else {
            return false;
        };
        let before = self.holders.get();
        let after = before.saturating_add_signed(delta);
        self.holders.set(after);
        if before == 0 && after > 0 {
            self.inner.beat();
            let Some((timer, _)) = self.timer() else {
                return false;
            };
            // SAFETY: a live timer of this thread's loop.
            if unsafe { (uv.timer_start)(timer, on_beat, BEAT_MS, BEAT_MS) } != 0 {
                // libuv refuses only a closing timer: the JS layer beats instead.
                return false;
            }
        } else if before > 0 && after == 0 {
            if let Some((timer, _)) = self.timer.get() {
                // SAFETY: as above. Stopping a timer cannot fail (libuv returns 0).
                unsafe { (uv.timer_stop)(timer) };
            }
        }
        true
    }
}

impl NativeHeartbeat {
    fn timer(&self) -> Option<(*mut Handle, *mut Arc<Heartbeat>)> {
        if let Some(made) = self.timer.get() {
            return Some(made);
        }
        let uv = uv::uv()?;
        let data = Box::into_raw(Box::new(self.inner.clone()));
        // SAFETY: on the loop's thread (every #[napi] call is); `data` outlives the timer.
        match unsafe { uv.timer(self.event_loop, data.cast()) } {
            Some(timer) => {
                self.timer.set(Some((timer, data)));
                Some((timer, data))
            }
            None => {
                // SAFETY: made just above and never shared.
                drop(unsafe { Box::from_raw(data) });
                None
            }
        }
    }
}

impl Drop for NativeHeartbeat {
    fn drop(&mut self) {
        if let (Some((timer, data)), Some(uv)) = (self.timer.get(), uv::uv()) {
            // SAFETY: dropped on its JS thread; once closed, the timer never calls back, so
            // its data can go.
            unsafe {
                (uv.timer_stop)(timer);
                uv.close_one(timer);
                drop(Box::from_raw(data));
            }
        }
    }
}

unsafe extern "C" fn on_beat(handle: *mut Handle) {
    // SAFETY: libuv calls us with the live timer `NativeHeartbeat::timer` made.
    let data = unsafe { uv::data(handle) } as *const Arc<Heartbeat>;
    if !data.is_null() {
        // SAFETY: the timer's data, freed only after the timer is stopped and closed.
        unsafe { (*data).beat() };
    }
}
