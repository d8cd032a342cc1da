//! Wakes one JS thread from any other: a Node-API threadsafe function with a native callback
//! and no JS function behind it. It keeps the process alive only while referred, which the
//! JS thread does while promises of ours are pending (as pending I/O would).

use napi::sys;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, RwLock};

/// Called on the JS thread with the context given to `Waker::new`.
pub type OnWake = unsafe extern "C" fn(env: sys::napi_env, context: *mut c_void);
/// Frees the context once the function is gone.
pub type DropContext = unsafe extern "C" fn(context: *mut c_void);

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

struct Callback {
    on_wake: OnWake,
    drop_context: DropContext,
    context: *mut c_void,
}

impl Waker {
    /// # Safety
    /// On the JS thread of `env`. `context` must stay valid until `drop_context` gets it,
    /// which happens once, when Node finalizes the function (or at once if none was made).
    pub unsafe fn new(
        env: sys::napi_env,
        on_wake: OnWake,
        drop_context: DropContext,
        context: *mut c_void,
    ) -> Option<Arc<Waker>> {
        let waker = Arc::new(Waker {
            tsfn: AtomicPtr::new(ptr::null_mut()),
            closed: RwLock::new(true),
        });
        let mut name = ptr::null_mut();
        let label = "native-redis-lock";
        sys::napi_create_string_utf8(env, label.as_ptr().cast(), label.len() as isize, &mut name);
        let callback = Box::into_raw(Box::new(Callback {
            on_wake,
            drop_context,
            context,
        }));
        let finalize_data = Arc::into_raw(waker.clone()) as *mut c_void;
        let mut tsfn = ptr::null_mut();
        let status = sys::napi_create_threadsafe_function(
            env,
            ptr::null_mut(),
            ptr::null_mut(),
            name,
            0,
            1,
            finalize_data,
            Some(finalized),
            callback.cast(),
            Some(call_js),
            &mut tsfn,
        );
        if status != sys::Status::napi_ok {
            drop_context(context);
            drop(Box::from_raw(callback));
            drop(Arc::from_raw(finalize_data as *const Waker));
            return None;
        }
        sys::napi_unref_threadsafe_function(env, tsfn);
        waker.tsfn.store(tsfn, Ordering::Release);
        *write(&waker.closed) = false;
        Some(waker)
    }

    /// Schedules the callback on the JS thread; a no-op once the environment is gone.
    pub fn wake(&self) {
        let closed = read(&self.closed);
        if !*closed {
            // SAFETY: the function is live while `closed` is false, and we hold the read lock.
            unsafe {
                sys::napi_call_threadsafe_function(
                    self.tsfn.load(Ordering::Acquire),
                    ptr::null_mut(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
        }
    }

    /// Keeps the process alive (`true`) or not (`false`).
    ///
    /// # Safety
    /// On the JS thread of `env`.
    pub unsafe fn keep_alive(&self, env: sys::napi_env, on: bool) {
        let closed = read(&self.closed);
        if *closed {
            return;
        }
        let tsfn = self.tsfn.load(Ordering::Acquire);
        if on {
            sys::napi_ref_threadsafe_function(env, tsfn);
        } else {
            sys::napi_unref_threadsafe_function(env, tsfn);
        }
    }
}

fn read(lock: &RwLock<bool>) -> std::sync::RwLockReadGuard<'_, bool> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write(lock: &RwLock<bool>) -> std::sync::RwLockWriteGuard<'_, bool> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

unsafe extern "C" fn call_js(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    context: *mut c_void,
    _data: *mut c_void,
) {
    // A null env means the function is being torn down with calls still queued.
    if env.is_null() || context.is_null() {
        return;
    }
    let callback = &*(context as *const Callback);
    let _ = std::panic::catch_unwind(|| (callback.on_wake)(env, callback.context));
}

unsafe extern "C" fn finalized(_env: sys::napi_env, data: *mut c_void, context: *mut c_void) {
    let waker = Arc::from_raw(data as *const Waker);
    *write(&waker.closed) = true;
    if !context.is_null() {
        let callback = Box::from_raw(context as *mut Callback);
        (callback.drop_context)(callback.context);
    }
}
