//! A JS environment as seen from its own thread: the scopes values live in, the values
//! themselves, references that keep them alive, and the end of the environment. Every
//! Node-API status is read: refusals come back as `Err(status)`.
//!
//! `Env`, `Scope` and `Value` hold raw pointers, so none of them is `Send`: made on the JS
//! thread, they stay there. A `Value<'s>` cannot outlive the `Scope<'s>` it was made in.

use super::uv::EventLoop;
use napi::bindgen_prelude::{JsValue, Unknown};
use napi::sys;
use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::ptr;

/// What a Node-API call that makes something answers: it, or the status Node refused it
/// with (it does so only while the environment ends, or with an exception pending).
pub type Made<T> = std::result::Result<T, sys::napi_status>;

/// A Node-API call's status as a `Result`, so that no status goes unread.
pub fn checked(status: sys::napi_status) -> Made<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(status)
    }
}

#[derive(Clone, Copy)]
pub struct Env {
    raw: sys::napi_env,
}

impl Env {
    /// The environment of a call from JS: napi-rs hands an `Env` only to calls running on
    /// its JS thread.
    pub fn of(env: &napi::Env) -> Env {
        Env { raw: env.raw() }
    }

    pub(super) fn raw(self) -> sys::napi_env {
        self.raw
    }

    pub fn event_loop(self) -> Made<EventLoop> {
        let mut event_loop = ptr::null_mut();
        // SAFETY: on `env`'s thread (an `Env` never leaves it); the out-pointer is a local.
        checked(unsafe { sys::napi_get_uv_event_loop(self.raw, &mut event_loop) })?;
        Ok(EventLoop::from_node(event_loop.cast()))
    }

    /// Runs `body` in a handle scope of its own, for code outside any call from JS (a
    /// libuv callback); `None` if Node refused the scope (only while the environment ends).
    pub fn handle_scope<R>(self, body: impl for<'s> FnOnce(&Scope<'s>) -> R) -> Option<R> {
        let mut handles = ptr::null_mut();
        // SAFETY: on this env's thread; the out-pointer is a local.
        if checked(unsafe { sys::napi_open_handle_scope(self.raw, &mut handles) }).is_err() {
            return None;
        }
        let answer = body(&Scope::new(self));
        // SAFETY: the scope opened above, closed once; no value of it outlives `body`.
        let closed = unsafe { sys::napi_close_handle_scope(self.raw, handles) };
        // Ours is the innermost scope, so Node does not refuse it.
        let _ = checked(closed);
        Some(answer)
    }

    /// Calls `hook(arg)` once, when the environment goes away; `false` (and `arg` dropped)
    /// if Node refused the hook.
    pub fn on_end<T: 'static>(self, arg: T, hook: fn(T)) -> bool {
        let arg = Box::into_raw(Box::new((hook, arg)));
        // SAFETY: on this env's thread; Node calls the hook at most once, with `arg`, which
        // stays valid until then.
        let status =
            unsafe { sys::napi_add_env_cleanup_hook(self.raw, Some(on_env_end::<T>), arg.cast()) };
        if checked(status).is_err() {
            // SAFETY: never registered, so never called: the box is still ours.
            drop(unsafe { Box::from_raw(arg) });
            return false;
        }
        true
    }
}

unsafe extern "C" fn on_env_end<T: 'static>(arg: *mut c_void) {
    if arg.is_null() {
        return;
    }
    // SAFETY: the box made by `Env::on_end` for this hook, which Node calls once.
    let boxed = unsafe { Box::from_raw(arg.cast::<(fn(T), T)>()) };
    let (hook, arg) = *boxed;
    hook(arg);
}

/// Where values can be made: a call from JS (`Scope::of_call`) or a handle scope opened by
/// `Env::handle_scope`.
pub struct Scope<'s> {
    env: Env,
    values: PhantomData<&'s ()>,
}

/// A JS value of scope `'s`.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Value<'s> {
    raw: sys::napi_value,
    scope: PhantomData<&'s ()>,
}

impl Value<'_> {
    pub(super) fn raw(self) -> sys::napi_value {
        self.raw
    }
}

/// Which constructor makes an error.
pub enum ErrorClass {
    Error,
    TypeError,
    RangeError,
}

impl<'s> Scope<'s> {
    fn new(env: Env) -> Scope<'s> {
        Scope {
            env,
            values: PhantomData,
        }
    }

    /// The scope of the call from JS that napi-rs handed `env` to (and which outlives any
    /// Rust frame of it: its values may be returned to JS).
    pub fn of_call(env: &napi::Env) -> Scope<'s> {
        Scope::new(Env::of(env))
    }

    pub fn env(&self) -> Env {
        self.env
    }

    fn made(&self, raw: sys::napi_value) -> Value<'s> {
        Value {
            raw,
            scope: PhantomData,
        }
    }

    /// A value napi-rs handed to this call.
    pub fn value(&self, js: &impl JsValue<'s>) -> Value<'s> {
        self.made(js.raw())
    }

    /// Runs `make` with an out-pointer for a value, Node-API style.
    fn make(
        &self,
        make: impl FnOnce(sys::napi_env, *mut sys::napi_value) -> sys::napi_status,
    ) -> Made<Value<'s>> {
        let mut value = ptr::null_mut();
        checked(make(self.env.raw, &mut value))?;
        Ok(self.made(value))
    }

    /// `undefined`, or a null value if Node refuses even that (its environment is ending),
    /// which Node-API then refuses wherever it is passed: nothing reaches JS either way.
    pub fn undefined(&self) -> Value<'s> {
        // SAFETY: on this scope's thread, inside it; the out-pointer is a local.
        self.make(|env, out| unsafe { sys::napi_get_undefined(env, out) })
            .unwrap_or_else(|_| self.made(ptr::null_mut()))
    }

    pub fn null(&self) -> Made<Value<'s>> {
        // SAFETY: as in `undefined`.
        self.make(|env, out| unsafe { sys::napi_get_null(env, out) })
    }

    pub fn boolean(&self, flag: bool) -> Made<Value<'s>> {
        // SAFETY: as in `undefined`.
        self.make(|env, out| unsafe { sys::napi_get_boolean(env, flag, out) })
    }

    pub fn number(&self, n: f64) -> Made<Value<'s>> {
        // SAFETY: as in `undefined`.
        self.make(|env, out| unsafe { sys::napi_create_double(env, n, out) })
    }

    pub fn uint32(&self, n: u32) -> Made<Value<'s>> {
        // SAFETY: as in `undefined`.
        self.make(|env, out| unsafe { sys::napi_create_uint32(env, n, out) })
    }

    pub fn string(&self, text: &str) -> Made<Value<'s>> {
        // SAFETY: as in `undefined`; `text` is UTF-8 of the length given.
        self.make(|env, out| unsafe {
            sys::napi_create_string_utf8(env, text.as_ptr().cast(), text.len() as isize, out)
        })
    }

    pub fn object(&self) -> Made<Value<'s>> {
        // SAFETY: as in `undefined`.
        self.make(|env, out| unsafe { sys::napi_create_object(env, out) })
    }

    pub fn array(&self, length: usize) -> Made<Value<'s>> {
        // SAFETY: as in `undefined`.
        self.make(|env, out| unsafe { sys::napi_create_array_with_length(env, length, out) })
    }

    pub fn set_element(&self, array: Value<'s>, index: u32, value: Value<'s>) -> Made<()> {
        // SAFETY: on this scope's thread, with values of it.
        checked(unsafe { sys::napi_set_element(self.env.raw, array.raw(), index, value.raw()) })
    }

    pub fn set_named(&self, object: Value<'s>, name: &CStr, value: Value<'s>) -> Made<()> {
        // SAFETY: as in `set_element`; `name` is NUL-terminated.
        checked(unsafe {
            sys::napi_set_named_property(self.env.raw, object.raw(), name.as_ptr(), value.raw())
        })
    }

    /// Defines a property that is neither enumerable, writable nor configurable.
    pub fn define_hidden(&self, object: Value<'s>, name: &CStr, value: Value<'s>) -> Made<()> {
        let property = sys::napi_property_descriptor {
            utf8name: name.as_ptr(),
            name: ptr::null_mut(),
            method: None,
            getter: None,
            setter: None,
            value: value.raw(),
            attributes: sys::PropertyAttributes::default,
            data: ptr::null_mut(),
        };
        // SAFETY: as in `set_element`; one descriptor, whose name is NUL-terminated.
        checked(unsafe { sys::napi_define_properties(self.env.raw, object.raw(), 1, &property) })
    }

    pub fn error(&self, class: ErrorClass, code: Value<'s>, message: Value<'s>) -> Made<Value<'s>> {
        let (code, message) = (code.raw(), message.raw());
        // SAFETY: as in `set_element`.
        self.make(|env, out| unsafe {
            match class {
                ErrorClass::TypeError => sys::napi_create_type_error(env, code, message, out),
                ErrorClass::RangeError => sys::napi_create_range_error(env, code, message, out),
                ErrorClass::Error => sys::napi_create_error(env, code, message, out),
            }
        })
    }

    /// Calls `function` with `args` and the global object as `this`; `Err` with the
    /// exception it threw (undefined if it failed without throwing).
    pub fn call(&self, function: Value<'s>, args: &[Value<'s>]) -> Result<Value<'s>, Value<'s>> {
        // SAFETY: as in `undefined`.
        let global = self.make(|env, out| unsafe { sys::napi_get_global(env, out) });
        let called = global.and_then(|global| {
            // SAFETY: as in `set_element`; `Value` is a `napi_value` (`repr(transparent)`),
            // so `args` is an array of `args.len()` of them.
            self.make(|env, out| unsafe {
                let args_ptr = args.as_ptr().cast();
                sys::napi_call_function(
                    env,
                    global.raw(),
                    function.raw(),
                    args.len(),
                    args_ptr,
                    out,
                )
            })
        });
        called.map_err(|_| self.take_exception())
    }

    /// Whether Node still runs JS in this environment: not once it is stopping (a worker
    /// being terminated), when Node refuses anything that could run JS, as setting a
    /// property could.
    pub fn can_run_js(&self) -> bool {
        self.object()
            .and_then(|probe| self.set_named(probe, c"p", self.undefined()))
            .is_ok()
    }

    /// The pending exception, cleared; undefined if none is pending (or Node refused).
    pub fn take_exception(&self) -> Value<'s> {
        // SAFETY: as in `undefined`.
        match self.make(|env, out| unsafe { sys::napi_get_and_clear_last_exception(env, out) }) {
            Ok(exception) if !exception.raw().is_null() => exception,
            _ => self.undefined(),
        }
    }

    /// Raises `exception` as uncaught, as Node does for a throwing event listener.
    pub fn fatal_exception(&self, exception: Value<'s>) -> Made<()> {
        // SAFETY: on this scope's thread, with a value of it.
        checked(unsafe { sys::napi_fatal_exception(self.env.raw, exception.raw()) })
    }

    /// `exception`, as the error a #[napi] call throws as it is (napi-rs keeps a reference
    /// to it, and reads it without running JS).
    pub fn thrown(&self, exception: Value<'s>) -> napi::Error {
        // SAFETY: a value of this scope, on its thread.
        let value = unsafe { Unknown::from_raw_unchecked(self.env.raw, exception.raw()) };
        napi::Error::from_unknown_without_coercion(value)
    }

    /// `value`, as a #[napi] call of this scope returns it.
    pub fn returned(&self, value: Value<'s>) -> Unknown<'s> {
        // SAFETY: a value of this scope, on its thread; the scope outlives the call.
        unsafe { Unknown::from_raw_unchecked(self.env.raw, value.raw()) }
    }

    /// Keeps `value` alive (beyond this scope) until the reference is deleted.
    pub fn reference(&self, value: Value<'s>) -> Made<Ref> {
        let mut reference = ptr::null_mut();
        // SAFETY: on this scope's thread, with a value of it; the out-pointer is a local.
        checked(unsafe {
            sys::napi_create_reference(self.env.raw, value.raw(), 1, &mut reference)
        })?;
        Ok(Ref(reference))
    }

    /// An async resource and context for callback scopes (named `name` for async_hooks).
    pub fn async_resource(&self, name: &str) -> Made<AsyncResource> {
        let object = self.object()?;
        let name = self.string(name)?;
        let resource = self.reference(object)?;
        let mut context = ptr::null_mut();
        // SAFETY: on this scope's thread, with values of it; the out-pointer is a local.
        let made =
            unsafe { sys::napi_async_init(self.env.raw, object.raw(), name.raw(), &mut context) };
        if let Err(status) = checked(made) {
            // Node refuses only while the environment ends, which frees the reference
            // anyway; deleting it now just does so sooner.
            let _ = resource.delete(self.env);
            return Err(status);
        }
        Ok(AsyncResource { resource, context })
    }

    /// Runs `body` in a callback scope of `resource`: promise reactions and
    /// `process.nextTick` callbacks run when it closes. Without the scope (Node refused it)
    /// `body` runs all the same, and they run at the next microtask checkpoint instead.
    /// For code that no JS is on the stack of (a libuv callback).
    pub fn callback_scope<R>(&self, resource: &AsyncResource, body: impl FnOnce() -> R) -> R {
        let env = self.env.raw;
        let (mut object, mut scope) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: inside this handle scope, on its thread; `resource` is alive until the
        // environment ends (never deleted), and the out-pointers are locals.
        let scoped = unsafe {
            checked(sys::napi_get_reference_value(
                env,
                resource.resource.0,
                &mut object,
            ))
            .is_ok()
                && checked(sys::napi_open_callback_scope(
                    env,
                    object,
                    resource.context,
                    &mut scope,
                ))
                .is_ok()
        };
        let answer = body();
        if scoped {
            // SAFETY: the scope opened above, closed once, before its handle scope.
            let closed = unsafe { sys::napi_close_callback_scope(env, scope) };
            // Node refuses only a scope that is not the innermost, which this one is.
            let _ = checked(closed);
        }
        answer
    }
}

/// A reference that keeps a JS value alive until deleted (or the environment ends). Not
/// `Clone`: deleted once.
pub struct Ref(sys::napi_ref);

impl Ref {
    pub fn value<'s>(&self, scope: &Scope<'s>) -> Made<Value<'s>> {
        // SAFETY: a live reference of this scope's env (deleted only by consuming it).
        scope.make(|env, out| unsafe { sys::napi_get_reference_value(env, self.0, out) })
    }

    pub fn delete(self, env: Env) -> Made<()> {
        // SAFETY: a live reference of `env`, deleted once (this consumes it), on its thread.
        checked(unsafe { sys::napi_delete_reference(env.raw, self.0) })
    }
}

/// What callback scopes run in; kept as long as the environment.
pub struct AsyncResource {
    resource: Ref,
    context: sys::napi_async_context,
}
