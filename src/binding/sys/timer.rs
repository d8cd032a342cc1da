//! A repeating libuv timer that calls a plain function with the data it was made with, on
//! its JS thread's loop, without keeping the process alive.

use super::uv::{self, EventLoop, Handle, Uv};

/// Closed, and its data dropped, when dropped. Not `Send`: made and used on its loop's thread.
pub struct Timer<T: 'static> {
    uv: &'static Uv,
    handle: *mut Handle,
    data: *mut (fn(&T), T),
}

impl<T: 'static> Timer<T> {
    /// A stopped timer on `event_loop` that calls `tick(&data)` when it fires; `None` if
    /// libuv is absent or refused.
    pub fn new(event_loop: EventLoop, data: T, tick: fn(&T)) -> Option<Timer<T>> {
        let uv = uv::uv()?;
        let data = Box::into_raw(Box::new((tick, data)));
        // SAFETY: an `EventLoop` is used only on its thread (it is not `Send`); `data`
        // outlives the timer (dropped after it is closed).
        match unsafe { uv.timer(event_loop.raw(), data.cast()) } {
            Some(handle) => Some(Timer { uv, handle, data }),
            None => {
                // SAFETY: made just above and never shared.
                drop(unsafe { Box::from_raw(data) });
                None
            }
        }
    }

    /// Fires after `first_ms`, then every `every_ms`; `false` if libuv refused.
    pub fn start(&self, first_ms: u64, every_ms: u64) -> bool {
        // SAFETY: a live timer of this thread (closed only by `drop`).
        unsafe { (self.uv.timer_start)(self.handle, on_fire::<T>, first_ms, every_ms) == 0 }
    }

    pub fn stop(&self) {
        // SAFETY: as above. Stopping a timer cannot fail (libuv returns 0).
        unsafe { (self.uv.timer_stop)(self.handle) };
    }
}

impl<T: 'static> Drop for Timer<T> {
    fn drop(&mut self) {
        // SAFETY: dropped on its loop's thread; once closed, the timer never calls back, so
        // its data can go.
        unsafe {
            (self.uv.timer_stop)(self.handle);
            self.uv.close_one(self.handle);
            drop(Box::from_raw(self.data));
        }
    }
}

unsafe extern "C" fn on_fire<T: 'static>(handle: *mut Handle) {
    // SAFETY: libuv calls us with the live timer `Timer::new` made.
    let data = unsafe { uv::data(handle) } as *const (fn(&T), T);
    if !data.is_null() {
        // SAFETY: the timer's data, dropped only after the timer is stopped and closed.
        let (tick, data) = unsafe { &*data };
        tick(data);
    }
}
