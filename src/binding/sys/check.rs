//! A libuv check handle that calls a plain function with the data it was made with, once per
//! loop turn while started, right after that turn's I/O callbacks (and the promise reactions
//! they led to) ran; it does not keep the process alive. Made `idle`, it calls at the start of
//! the next turn instead, which it lets come without waiting for I/O.

use super::uv::{self, EventLoop, Handle, Uv};

/// Closed, and its data dropped, when dropped. Not `Send`: made and used on its loop's thread.
pub struct Check<T: 'static> {
    uv: &'static Uv,
    handle: *mut Handle,
    data: *mut (fn(&T), T),
    idle: bool,
}

impl<T: 'static> Check<T> {
    /// A stopped check on `event_loop` that calls `run(&data)` while started; `None` if libuv
    /// is absent or refused.
    pub fn new(event_loop: EventLoop, data: T, run: fn(&T)) -> Option<Check<T>> {
        Check::made(event_loop, data, run, false)
    }

    /// As `new`, but called at the start of the next loop turn, which comes at once.
    pub fn idle(event_loop: EventLoop, data: T, run: fn(&T)) -> Option<Check<T>> {
        Check::made(event_loop, data, run, true)
    }

    fn made(event_loop: EventLoop, data: T, run: fn(&T), idle: bool) -> Option<Check<T>> {
        let uv = uv::uv()?;
        let data = Box::into_raw(Box::new((run, data)));
        // SAFETY: an `EventLoop` is used only on its thread (it is not `Send`); `data`
        // outlives the handle (dropped after it is closed).
        let handle = unsafe {
            match idle {
                true => uv.idle(event_loop.raw(), data.cast()),
                false => uv.check(event_loop.raw(), data.cast()),
            }
        };
        match handle {
            Some(handle) => Some(Check {
                uv,
                handle,
                data,
                idle,
            }),
            None => {
                // SAFETY: made just above and never shared.
                drop(unsafe { Box::from_raw(data) });
                None
            }
        }
    }

    /// Calls back at the end of this loop turn and each one after, until stopped; starting a
    /// started check changes nothing. `false` if libuv refused.
    pub fn start(&self) -> bool {
        let start = match self.idle {
            true => self.uv.idle_start,
            false => self.uv.check_start,
        };
        // SAFETY: a live handle of this thread (closed only by `drop`), of the kind `start`
        // takes.
        unsafe { start(self.handle, on_check::<T>) == 0 }
    }

    pub fn stop(&self) {
        let stop = match self.idle {
            true => self.uv.idle_stop,
            false => self.uv.check_stop,
        };
        // SAFETY: as above. Stopping cannot fail (libuv returns 0).
        unsafe { stop(self.handle) };
    }
}

impl<T: 'static> Drop for Check<T> {
    fn drop(&mut self) {
        self.stop();
        // SAFETY: dropped on its loop's thread; once closed, the check never calls back, so
        // its data can go.
        unsafe {
            self.uv.close_one(self.handle);
            drop(Box::from_raw(self.data));
        }
    }
}

unsafe extern "C" fn on_check<T: 'static>(handle: *mut Handle) {
    // SAFETY: libuv calls us with the live check `Check::new` made.
    let data = unsafe { uv::data(handle) } as *const (fn(&T), T);
    if !data.is_null() {
        // SAFETY: the check's data, dropped only after the check is stopped and closed.
        let (run, data) = unsafe { &*data };
        run(data);
    }
}
