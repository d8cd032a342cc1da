//! The end of a JS environment (a worker thread that ends or is terminated, the main thread
//! at exit). Its calls' promises can no longer settle, so what they still wait for must not
//! be won for it: one cleanup hook per environment closes its own connections and ends its
//! owner in the core (see core::owner), which stops its waits, takes its watched locks off
//! the watchdog and releases them. The hook waits for those releases, bounded: at the main
//! thread's exit the runtime is shut down right after (by napi's own hook, registered
//! before ours, so run after it), and an unsent release would leave the lock to its TTL.

use super::direct;
use crate::core::basics::validate::DEFAULT_COMMAND_TIMEOUT;
use crate::core::wait::owner::Owner;
use napi::sys;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// How long the hook waits for the releases beyond their own bound (see core::forsaken).
const SLACK: Duration = Duration::from_millis(100);

/// Ends `owner` when the environment of `env` goes away.
///
/// # Safety
/// On the JS thread of `env`.
pub unsafe fn register(env: sys::napi_env, owner: Owner) -> bool {
    let arg = Box::into_raw(Box::new(owner));
    // SAFETY: on `env`'s thread, as the caller promises; Node calls the hook at most once,
    // with `arg`, which stays valid until then.
    let status = unsafe { sys::napi_add_env_cleanup_hook(env, Some(on_env_end), arg.cast()) };
    if status != sys::Status::napi_ok {
        // SAFETY: never registered, so never called: the box is still ours.
        drop(unsafe { Box::from_raw(arg) });
        return false;
    }
    true
}

unsafe extern "C" fn on_env_end(arg: *mut c_void) {
    if arg.is_null() {
        return;
    }
    // SAFETY: the box made by `register` for this hook, which Node calls once.
    let owner = unsafe { Box::from_raw(arg.cast::<Owner>()) };
    end(&owner);
}

/// Ends `owner`'s environment: its connections, its waits, its kept-alive locks; returns
/// once those locks are released (or their bound passed). On the environment's JS thread.
/// Later calls find nothing left to do.
pub fn end(owner: &Owner) {
    // No panic may unwind into Node; a runtime already gone (spawn panics then) leaves the
    // locks to their TTLs, which is all that is left to do.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        direct::close_thread();
        let ending = owner.end();
        let (done, finished) = std::sync::mpsc::channel::<()>();
        napi::bindgen_prelude::spawn(async move {
            ending.await;
            let _ = done.send(());
        });
        // Disconnected (the task was dropped with the runtime) ends the wait as well.
        let _ = finished.recv_timeout(DEFAULT_COMMAND_TIMEOUT + SLACK);
    }));
}
