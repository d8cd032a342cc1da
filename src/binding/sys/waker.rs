//! Wakes one JS thread from any other: a Node-API threadsafe function with a native callback
//! and no JS function behind it. It keeps the process alive only while referred, which the
//! JS thread does while promises of ours are pending (as pending I/O would).

use super::env::Env;
use crate::core::basics::trace::write_line;
use napi::sys;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, RwLock};

pub struct Waker {
    tsfn: AtomicPtr<sys::napi_threadsafe_function__>,
    /// Set under the write lock when Node finalizes the function (its environment is going
    /// away); it must never be called after that, so every call holds the read lock.
    closed: RwLock<bool>,
}

// SAFETY: `napi_call_threadsafe_function` may be called from any thread; the JS-thread-only
// calls (`refer`, `unref`) take the env of that thread.
unsafe impl Send for Waker {}
unsafe impl Sync for Waker {}

struct Callback<C> {
    on_wake: fn(&C),
    context: C,
}

impl Waker {
    /// A waker calling `on_wake(&context)` on the JS thread of `env`. `context` is dropped
    /// there, when Node finalizes the function (or at once if none was made).
    pub fn new<C: 'static>(env: Env, context: C, on_wake: fn(&C)) -> Option<Arc<Waker>> {
        let env = env.raw();
        let waker = Arc::new(Waker {
            tsfn: AtomicPtr::new(ptr::null_mut()),
            closed: RwLock::new(true),
        });
        let mut name = ptr::null_mut();
        let label = "native-redis-lock";
        // SAFETY: on `env`'s thread (an `Env` never leaves it); `label` is UTF-8 of its
        // length.
        let named = unsafe {
            sys::napi_create_string_utf8(
                env,
                label.as_ptr().cast(),
                label.len() as isize,
                &mut name,
            )
        };
        if named != sys::Status::napi_ok {
            // No function holds `context`: it is dropped now.
            return None;
        }
        let callback = Box::into_raw(Box::new(Callback { on_wake, context }));
        let finalize_data = Arc::into_raw(waker.clone()) as *mut c_void;
        let mut tsfn = ptr::null_mut();
        // SAFETY: on `env`'s thread; Node hands `finalize_data` and `callback` to `finalized`
        // once, and to `call_js` only before that.
        let status = unsafe {
            sys::napi_create_threadsafe_function(
                env,
                ptr::null_mut(),
                ptr::null_mut(),
                name,
                0,
                1,
                finalize_data,
                Some(finalized::<C>),
                callback.cast(),
                Some(call_js::<C>),
                &mut tsfn,
            )
        };
        if status != sys::Status::napi_ok {
            // SAFETY: Node refused the function, so it holds none of these: each is given
            // back here, once (the callback with its context).
            unsafe {
                drop(Box::from_raw(callback));
                drop(Arc::from_raw(finalize_data as *const Waker));
            }
            return None;
        }
        // SAFETY: the function just made, on its env's thread.
        let unrefed = unsafe { sys::napi_unref_threadsafe_function(env, tsfn) };
        if unrefed != sys::Status::napi_ok {
            // Node refuses only while the environment ends, when nothing is kept alive
            // anyway; the function stays usable.
            let line =
                format!("native-redis-lock: Node-API refused to unref the waker ({unrefed})\n");
            write_line(line.as_bytes());
        }
        waker.tsfn.store(tsfn, Ordering::Release);
        *write(&waker.closed) = false;
        Some(waker)
    }

    /// Schedules the callback on the JS thread; a no-op once the environment is gone.
    pub fn wake(&self) {
        let closed = read(&self.closed);
        if !*closed {
            // SAFETY: the function is live while `closed` is false, and we hold the read lock.
            let status = unsafe {
                sys::napi_call_threadsafe_function(
                    self.tsfn.load(Ordering::Acquire),
                    ptr::null_mut(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
            // The queue is unbounded, so the only refusal is `napi_closing`: the environment
            // is ending, and what would have been delivered has nobody left to hear it.
            let _ = status;
        }
    }

    /// Keeps the process alive (`true`) or not (`false`); `env` is the waker's own.
    pub fn keep_alive(&self, env: Env, on: bool) {
        let env = env.raw();
        let closed = read(&self.closed);
        if *closed {
            return;
        }
        let tsfn = self.tsfn.load(Ordering::Acquire);
        // SAFETY: a live function (`closed` is false under the read lock), on its env's
        // thread (an `Env` never leaves it).
        let status = unsafe {
            if on {
                sys::napi_ref_threadsafe_function(env, tsfn)
            } else {
                sys::napi_unref_threadsafe_function(env, tsfn)
            }
        };
        // Refused only while the environment ends: then nothing is kept alive, whatever we
        // asked, and nothing is left to deliver.
        let _ = status;
    }
}

fn read(lock: &RwLock<bool>) -> std::sync::RwLockReadGuard<'_, bool> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write(lock: &RwLock<bool>) -> std::sync::RwLockWriteGuard<'_, bool> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

unsafe extern "C" fn call_js<C>(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    context: *mut c_void,
    _data: *mut c_void,
) {
    // A null env means the function is being torn down with calls still queued.
    if env.is_null() || context.is_null() {
        return;
    }
    // SAFETY: the `Callback` given as the function's context, freed only by `finalized`,
    // after the last call.
    let callback = unsafe { &*(context as *const Callback<C>) };
    // Node calls us on the JS thread, from its loop, with no JS on the stack.
    let woken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (callback.on_wake)(&callback.context)
    }));
    // A panic must not unwind into Node; the batch it interrupted is lost, as its promises
    // were (the core's own panics are caught before they get here, see js/settle.rs).
    let _ = woken;
}

unsafe extern "C" fn finalized<C>(_env: sys::napi_env, data: *mut c_void, context: *mut c_void) {
    // SAFETY: the `Arc` given as finalize data to `napi_create_threadsafe_function`; Node
    // finalizes once.
    let waker = unsafe { Arc::from_raw(data as *const Waker) };
    *write(&waker.closed) = true;
    if !context.is_null() {
        // SAFETY: the `Callback` given as context, taken back (and its context dropped)
        // once, here.
        drop(unsafe { Box::from_raw(context as *mut Callback<C>) });
    }
}
