//! Runs the JS drain of the completion queue from a libuv callback on the JS thread, as Node
//! runs any I/O callback: through `napi_make_callback`, so promise reactions and
//! `process.nextTick` callbacks run right after it, and a throw is an uncaught exception.

use napi::sys;
use std::ptr;

/// The drain function of one JS thread's completion queue.
pub struct Settler {
    env: sys::napi_env,
    event_loop: *mut sys::uv_loop_s,
    drain: sys::napi_ref,
    context: sys::napi_async_context,
}

impl Settler {
    /// # Safety
    /// On the JS thread of `env`; `drain` is a function value of that thread.
    pub unsafe fn new(env: sys::napi_env, drain: sys::napi_value) -> Option<Settler> {
        let mut reference = ptr::null_mut();
        if sys::napi_create_reference(env, drain, 1, &mut reference) != sys::Status::napi_ok {
            return None;
        }
        let mut name = ptr::null_mut();
        let label = "native-redis-lock";
        sys::napi_create_string_utf8(env, label.as_ptr().cast(), label.len() as isize, &mut name);
        let mut context = ptr::null_mut();
        if sys::napi_async_init(env, ptr::null_mut(), name, &mut context) != sys::Status::napi_ok {
            return None;
        }
        let mut event_loop = ptr::null_mut();
        if sys::napi_get_uv_event_loop(env, &mut event_loop) != sys::Status::napi_ok {
            return None;
        }
        Some(Settler {
            env,
            event_loop,
            drain: reference,
            context,
        })
    }

    pub fn event_loop(&self) -> *mut super::uv::Loop {
        self.event_loop.cast()
    }

    /// Calls the drain function.
    ///
    /// # Safety
    /// From a libuv callback on the JS thread, with no JS on the stack.
    pub unsafe fn run(&self) {
        let env = self.env;
        let mut scope = ptr::null_mut();
        if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
            return;
        }
        let (mut drain, mut global, mut result) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        if sys::napi_get_reference_value(env, self.drain, &mut drain) == sys::Status::napi_ok
            && sys::napi_get_global(env, &mut global) == sys::Status::napi_ok
        {
            let status = sys::napi_make_callback(
                env,
                self.context,
                global,
                drain,
                0,
                ptr::null(),
                &mut result,
            );
            if status == sys::Status::napi_pending_exception {
                let mut thrown = ptr::null_mut();
                if sys::napi_get_and_clear_last_exception(env, &mut thrown) == sys::Status::napi_ok
                {
                    sys::napi_fatal_exception(env, thrown);
                }
            }
        }
        sys::napi_close_handle_scope(env, scope);
    }
}

impl Drop for Settler {
    fn drop(&mut self) {
        // SAFETY: dropped on the JS thread that made it (it is neither Send nor Sync).
        unsafe {
            sys::napi_delete_reference(self.env, self.drain);
            sys::napi_async_destroy(self.env, self.context);
        }
    }
}
