//! The promises of our calls, made and settled natively on their JS thread. A call returns a
//! promise at once; whoever finishes it (the JS thread's own connection, or the runtime
//! through the waker) settles it by id. Settling happens in batches inside one callback
//! scope, so promise reactions run right after the batch, as for any I/O callback; no JS
//! object describes a completion, and no JS function stands between Redis and the caller.

use super::completions::{Entry, Loss, Outcome, Queue};
use super::error::{checked, js_error};
use super::waker::Waker;
use crate::core::basics::clock::validity;
use crate::core::basics::error::LockError;
use crate::core::wait::owner::Owner;
use napi::sys;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Instant;

/// JS functions the layer above registers once (see lib/completions.js).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// `(owner, token, fence, deadline, acquiredAt, expiresAt, watch, lent) => handle`; times
    /// as ms (deadline on `performance.now()`'s clock, the others after `baseWallMs`); no
    /// token for a watched lock (`watch`, see `watchToken`); `lent` 1 for a holder that
    /// started before Redis ran its handover (see `lentState`).
    Handle,
    /// `(error, owner) => error`: the error class users match on, from the native error
    /// (its `code`, `key` and the rest are set in binding/error.rs).
    Error,
    /// `(listener, event, code, message, expiresAt, token)`: news of a held lock
    /// (`expiresAt` ms after `baseWallMs`).
    Event,
}

struct Slot {
    deferred: sys::napi_deferred,
    /// A JS object the settlement needs (the handle being filled, or released).
    owner: Option<sys::napi_ref>,
}

pub struct JsThread {
    env: sys::napi_env,
    event_loop: *mut sys::uv_loop_s,
    hooks: RefCell<HashMap<Hook, sys::napi_ref>>,
    slots: RefCell<HashMap<u32, Slot>>,
    next_id: Cell<u32>,
    /// Promises pending plus holds that keep the process alive; the waker is referred
    /// while this is above zero.
    keepers: Cell<u32>,
    queue: Arc<Queue>,
    waker: RefCell<Option<Arc<Waker>>>,
    resource: sys::napi_ref,
    context: sys::napi_async_context,
    /// The instant `performance.now()` counts from, estimated no earlier than it is, so
    /// deadlines handed to JS are never later than ours.
    origin: Instant,
    /// Epoch ms that wall-clock times handed to JS count from: small integers there.
    base_wall_ms: u64,
    /// This environment, as the core knows it: ended when the environment goes away (see
    /// teardown.rs).
    owner: Owner,
}

/// What a Node-API call that makes a value answers: the value, or the status Node refused
/// it with (it does so only while the environment ends, or with an exception pending).
type Made<T = sys::napi_value> = std::result::Result<T, sys::napi_status>;

impl JsThread {
    /// # Safety
    /// On the JS thread of `env`; `perf_now` is `performance.now()` read just before.
    pub unsafe fn new(
        env: sys::napi_env,
        perf_now: f64,
        queue: Arc<Queue>,
    ) -> Option<Rc<JsThread>> {
        let mut event_loop = ptr::null_mut();
        // SAFETY: on `env`'s thread, as the caller promises; the out-pointer is a local.
        checked(unsafe { sys::napi_get_uv_event_loop(env, &mut event_loop) }).ok()?;
        // SAFETY: as above.
        let (resource, context) = unsafe { async_resource(env) }.ok()?;
        let since = std::time::Duration::from_secs_f64((perf_now.max(0.0) / 1000.0).min(1e9));
        let now = Instant::now();
        let thread = Rc::new(JsThread {
            env,
            event_loop,
            hooks: RefCell::new(HashMap::new()),
            slots: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            keepers: Cell::new(0),
            queue,
            waker: RefCell::new(None),
            resource,
            context,
            origin: now.checked_sub(since).unwrap_or(now),
            base_wall_ms: crate::core::basics::clock::wall_ms(),
            owner: Owner::new(),
        });
        let weak = Weak::into_raw(Rc::downgrade(&thread)) as *mut c_void;
        // SAFETY: on `env`'s thread; `weak` stays valid until `drop_weak` takes it back,
        // which the waker does once (at once, if Node refused to make it).
        *thread.waker.borrow_mut() = unsafe { Waker::new(env, on_wake, drop_weak, weak) };
        Some(thread)
    }

    pub fn env(&self) -> sys::napi_env {
        self.env
    }

    /// On whose behalf this thread's waits run and locks are held.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    pub fn event_loop(&self) -> *mut c_void {
        self.event_loop.cast()
    }

    /// Epoch ms of wall-clock times handed to JS as offsets (`acquiredAt`, `expiresAt`).
    pub fn base_wall_ms(&self) -> u64 {
        self.base_wall_ms
    }

    /// A wall-clock time (epoch ms) as JS receives it: ms after `base_wall_ms`.
    fn wall(&self, epoch_ms: u64) -> f64 {
        epoch_ms as f64 - self.base_wall_ms as f64
    }

    pub fn waker(&self) -> Option<Arc<Waker>> {
        self.waker.borrow().clone()
    }

    /// `performance.now()` of `at` (earlier than the truth by the estimate's error).
    pub fn perf_ms(&self, at: Instant) -> f64 {
        match at.checked_duration_since(self.origin) {
            Some(since) => since.as_secs_f64() * 1000.0,
            None => -(self.origin.duration_since(at).as_secs_f64() * 1000.0),
        }
    }

    /// The instant of a `performance.now()` reading.
    pub fn instant(&self, perf_ms: f64) -> Instant {
        let ms = if perf_ms.is_finite() { perf_ms } else { 0.0 };
        let span = std::time::Duration::from_secs_f64((ms.abs() / 1000.0).min(1e9));
        if ms >= 0.0 {
            self.origin + span
        } else {
            self.origin.checked_sub(span).unwrap_or(self.origin)
        }
    }

    /// # Safety
    /// On this JS thread; `function` is a JS function value.
    pub unsafe fn set_hook(&self, hook: Hook, function: sys::napi_value) -> bool {
        let mut reference = ptr::null_mut();
        // SAFETY: on this thread, as the caller promises, with a value of it.
        let made = unsafe { sys::napi_create_reference(self.env, function, 1, &mut reference) };
        if checked(made).is_err() {
            return false;
        }
        if let Some(old) = self.hooks.borrow_mut().insert(hook, reference) {
            // SAFETY: a reference of ours, deleted once (it left the map just now).
            let deleted = unsafe { sys::napi_delete_reference(self.env, old) };
            // Node refuses only while the environment ends, which frees every reference;
            // the old function merely stays alive until then.
            let _ = checked(deleted);
        }
        true
    }

    /// A new pending promise and the id that settles it. `owner` stays alive until then.
    ///
    /// # Safety
    /// On this JS thread, from a call JS made.
    pub unsafe fn promise(
        &self,
        owner: Option<sys::napi_value>,
    ) -> napi::Result<(u32, sys::napi_value)> {
        let env = self.env;
        let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: on this thread inside a call from JS, as the caller promises.
        check(unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) })?;
        let owner = match owner {
            Some(value) => {
                let mut reference = ptr::null_mut();
                // SAFETY: as above, with a value of this call.
                let made = unsafe { sys::napi_create_reference(env, value, 1, &mut reference) };
                if let Err(err) = check(made) {
                    // The promise never reaches JS, so nothing waits on it; it is settled
                    // all the same so that Node frees its deferred, and a refusal there
                    // (the environment ending) frees it as well.
                    // SAFETY: the deferred just made, settled once; inside this call's scope.
                    let _ = unsafe { self.settle_deferred(deferred, Err(self.undefined())) };
                    return Err(err);
                }
                Some(reference)
            }
            None => None,
        };
        let mut slots = self.slots.borrow_mut();
        let mut id = self.next_id.get();
        while id == 0 || slots.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next_id.set(id.wrapping_add(1));
        slots.insert(id, Slot { deferred, owner });
        drop(slots);
        self.keep(1);
        Ok((id, promise))
    }

    /// Counts a reason to keep the process alive (`delta` of +1 or -1).
    pub fn keep(&self, delta: i32) {
        let before = self.keepers.get();
        let after = before.saturating_add_signed(delta);
        self.keepers.set(after);
        if (before == 0) != (after == 0) {
            if let Some(waker) = self.waker.borrow().as_ref() {
                // SAFETY: on this JS thread (every caller is).
                unsafe { waker.keep_alive(self.env, after > 0) };
            }
        }
    }

    /// Everything the runtime finished, delivered now.
    ///
    /// # Safety
    /// From a libuv callback of this thread, with no JS on the stack.
    pub unsafe fn deliver_queued(&self) {
        let entries = self.queue.take();
        // SAFETY: as the caller promises.
        unsafe { self.deliver(entries) };
    }

    /// Settles and tells `entries` in order, in one callback scope: promise reactions and
    /// `process.nextTick` callbacks run when it closes. A listener that throws does not stop
    /// the batch; its exception is raised as uncaught afterwards, as an EventEmitter's would.
    ///
    /// # Safety
    /// From a libuv callback of this thread, with no JS on the stack and no borrow of ours
    /// held (the reactions may call back into us).
    pub unsafe fn deliver(&self, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        let env = self.env;
        let mut handles = ptr::null_mut();
        // SAFETY: on this thread, outside any scope of ours, as the caller promises.
        if checked(unsafe { sys::napi_open_handle_scope(env, &mut handles) }).is_err() {
            // Only an ending environment refuses a scope; its promises can no longer
            // settle, and the core ends its waits (see teardown.rs).
            return;
        }
        let mut resource = ptr::null_mut();
        let mut scope = ptr::null_mut();
        // SAFETY: inside the handle scope just opened; `resource` and `context` are ours,
        // made in `new` and alive as long as this thread state.
        let scoped = unsafe {
            checked(sys::napi_get_reference_value(
                env,
                self.resource,
                &mut resource,
            ))
            .is_ok()
                && checked(sys::napi_open_callback_scope(
                    env,
                    resource,
                    self.context,
                    &mut scope,
                ))
                .is_ok()
        };
        // Without the callback scope the batch still settles: its reactions then run at the
        // next microtask checkpoint instead of right after it.
        let mut thrown = None;
        for entry in entries {
            // SAFETY: in the scopes above, with no borrow of ours held.
            let result = unsafe {
                match entry {
                    Entry::Settled(id, outcome) => self.settle(id, outcome),
                    Entry::Event {
                        listener,
                        event,
                        lost,
                    } => self.tell(listener, event, lost.map(|loss| *loss)),
                }
            };
            if let Err(exception) = result {
                thrown.get_or_insert(exception);
            }
        }
        if scoped {
            // SAFETY: the scope opened above, closed once, before its handle scope.
            let closed = unsafe { sys::napi_close_callback_scope(env, scope) };
            // Node refuses only a scope that is not the innermost, which this one is.
            let _ = checked(closed);
        }
        if let Some(exception) = thrown {
            // SAFETY: a value of this scope, raised once.
            let raised = unsafe { sys::napi_fatal_exception(env, exception) };
            if checked(raised).is_err() {
                // Node could not raise it (its environment is ending): say so rather than
                // lose a listener's exception without a trace.
                eprintln!("native-redis-lock: a lock listener threw, and Node could not raise it");
            }
        }
        // SAFETY: the handle scope opened above, closed once.
        let closed = unsafe { sys::napi_close_handle_scope(env, handles) };
        // As for the callback scope: ours is the innermost, so Node does not refuse it.
        let _ = checked(closed);
    }

    /// Settles promise `id` from inside a call of ours from JS: its reactions run once that
    /// call returns.
    ///
    /// # Safety
    /// On this JS thread, inside a napi callback, with no borrow of ours held.
    pub unsafe fn settle_in_call(&self, id: u32, outcome: Outcome) {
        let mut handles = ptr::null_mut();
        // SAFETY: inside a napi callback on this thread, as the caller promises.
        if checked(unsafe { sys::napi_open_handle_scope(self.env, &mut handles) }).is_err() {
            // As in `deliver`: only an ending environment refuses a scope.
            return;
        }
        // The hooks throw only for the handle hook's caller, who is this very call's: a
        // throw inside a call from JS is left for that call to surface, not raised here.
        // SAFETY: inside the scope just opened, no borrow held.
        let _thrown = unsafe { self.settle(id, outcome) };
        // SAFETY: the scope opened above, closed once.
        let closed = unsafe { sys::napi_close_handle_scope(self.env, handles) };
        // Ours is the innermost scope, so Node does not refuse it.
        let _ = checked(closed);
    }

    /// Resolves or rejects promise `id`. `Err` carries an exception a hook threw.
    ///
    /// # Safety
    /// On this JS thread, inside a handle scope, with no borrow of ours held.
    unsafe fn settle(&self, id: u32, outcome: Outcome) -> Result<(), sys::napi_value> {
        let Some(slot) = self.slots.borrow_mut().remove(&id) else {
            return Ok(());
        };
        self.keep(-1);
        let env = self.env;
        let owner = slot.owner.and_then(|reference| {
            let mut value = ptr::null_mut();
            // SAFETY: our reference, read then deleted once (the slot is gone).
            let (read, deleted) = unsafe {
                (
                    sys::napi_get_reference_value(env, reference, &mut value),
                    sys::napi_delete_reference(env, reference),
                )
            };
            // A reference Node will not delete is freed with the environment, which is
            // what refuses it.
            let _ = checked(deleted);
            checked(read).ok().map(|()| value)
        });
        // SAFETY: as the caller promises.
        let value = match unsafe { self.value_of(outcome, owner) } {
            Ok(value) => value,
            Err(status) => {
                // The value could not be made: the caller still hears of it, as an error.
                let err = LockError::Internal(format!(
                    "Node-API refused to make a call's result ({})",
                    napi::Status::from(status)
                ));
                // SAFETY: as above.
                Err(unsafe { self.error(&err) })
            }
        };
        // Refused only while the environment ends: nobody is left to hear the promise.
        // SAFETY: the slot's deferred, settled once (the slot is gone), inside the scope.
        let _ = unsafe { self.settle_deferred(slot.deferred, value) };
        Ok(())
    }

    /// # Safety
    /// On this JS thread, inside a handle scope; `deferred` is pending, and settled here once.
    unsafe fn settle_deferred(
        &self,
        deferred: sys::napi_deferred,
        value: Result<sys::napi_value, sys::napi_value>,
    ) -> Made<()> {
        // SAFETY: as the caller promises.
        checked(unsafe {
            match value {
                Ok(value) => sys::napi_resolve_deferred(self.env, deferred, value),
                Err(error) => sys::napi_reject_deferred(self.env, deferred, error),
            }
        })
    }

    /// The value a promise resolves with (`Ok(Ok)`), or the error it rejects with
    /// (`Ok(Err)`); `Err` with Node's status when a value could not be made.
    ///
    /// # Safety
    /// On this JS thread, inside a handle scope.
    unsafe fn value_of(
        &self,
        outcome: Outcome,
        owner: Option<sys::napi_value>,
    ) -> Made<Result<sys::napi_value, sys::napi_value>> {
        let env = self.env;
        let mut value = ptr::null_mut();
        // SAFETY: as the caller promises; every out-pointer is a local, every value one of
        // this scope, every name a NUL-terminated literal.
        unsafe {
            match outcome {
                Outcome::Lease(lease) => {
                    let own = lease.sent.at + validity(lease.ttl);
                    let deadline = lease.lent_until.map_or(own, |until| until.min(own));
                    // A watched lock's token stays with the watchdog; the handle asks for it.
                    let token = match lease.watch {
                        Some(_) => self.undefined(),
                        None => self.string(&lease.token)?,
                    };
                    let args = [
                        owner.unwrap_or_else(|| self.undefined()),
                        token,
                        self.number(lease.fence as f64)?,
                        // Whole ms, rounded down: never later, and a small integer in JS.
                        self.number(self.perf_ms(deadline).floor())?,
                        self.number(self.wall(crate::core::basics::clock::wall_ms()))?,
                        self.number(self.wall(lease.sent.wall_ms + lease.ttl.as_millis() as u64))?,
                        self.number(lease.watch.map_or(0.0, |id| id as f64))?,
                        self.number(if lease.lent_until.is_some() { 1.0 } else { 0.0 })?,
                    ];
                    return Ok(self.call_hook(Hook::Handle, &args));
                }
                Outcome::NoHandle | Outcome::Inspected(None) => {
                    checked(sys::napi_get_null(env, &mut value))?;
                }
                Outcome::Bool(flag) => {
                    checked(sys::napi_get_boolean(env, flag, &mut value))?;
                }
                Outcome::Text(text) => value = self.string(&text)?,
                Outcome::Done => value = self.undefined(),
                Outcome::Extended {
                    deadline,
                    expires_at_ms,
                } => {
                    let deadline = self.number(self.perf_ms(deadline).floor())?;
                    let expires_at = self.number(self.wall(expires_at_ms))?;
                    checked(sys::napi_create_array_with_length(env, 2, &mut value))?;
                    checked(sys::napi_set_element(env, value, 0, deadline))?;
                    checked(sys::napi_set_element(env, value, 1, expires_at))?;
                }
                Outcome::Inspected(Some(found)) => {
                    let ttl = self.number(found.ttl_ms as f64)?;
                    let contents = self.string(&found.contents)?;
                    checked(sys::napi_create_object(env, &mut value))?;
                    checked(sys::napi_set_named_property(
                        env,
                        value,
                        c"lock_ttl_ms".as_ptr(),
                        ttl,
                    ))?;
                    checked(sys::napi_set_named_property(
                        env,
                        value,
                        c"lock_contents".as_ptr(),
                        contents,
                    ))?;
                }
                Outcome::Failed(err) => {
                    let raw = self.error(&err);
                    let args = [raw, owner.unwrap_or_else(|| self.undefined())];
                    return Ok(Err(self.call_hook(Hook::Error, &args).unwrap_or(raw)));
                }
            }
        }
        Ok(Ok(value))
    }

    /// Tells a held lock's listener of `event`.
    ///
    /// # Safety
    /// On this JS thread, inside a handle scope.
    unsafe fn tell(
        &self,
        listener: u32,
        event: &str,
        lost: Option<Loss>,
    ) -> Result<(), sys::napi_value> {
        // SAFETY: as the caller promises.
        let args = unsafe { self.event_args(listener, event, lost) };
        // Node refuses to make the arguments only while the environment ends, when no
        // listener is left to hear the news.
        let Ok(args) = args else {
            return Ok(());
        };
        // SAFETY: as above, with values of this scope.
        unsafe { self.call_hook(Hook::Event, &args) }.map(|_| ())
    }

    /// # Safety
    /// On this JS thread, inside a handle scope.
    unsafe fn event_args(
        &self,
        listener: u32,
        event: &str,
        lost: Option<Loss>,
    ) -> Made<[sys::napi_value; 6]> {
        // SAFETY: as the caller promises.
        unsafe {
            let undefined = self.undefined();
            let mut args = [
                self.number(listener as f64)?,
                self.string(event)?,
                undefined,
                undefined,
                undefined,
                undefined,
            ];
            if let Some(loss) = lost {
                args[2] = self.string(loss.error.code())?;
                args[3] = self.string(&loss.error.to_string())?;
                args[4] = self.number(self.wall(loss.expires_at_ms))?;
                args[5] = self.string(&loss.token)?;
            }
            Ok(args)
        }
    }

    /// Calls a hook; `Err` with the exception it threw (or undefined when it is missing, or
    /// Node would not call it).
    ///
    /// # Safety
    /// On this JS thread, inside a handle scope, with values of it.
    unsafe fn call_hook(
        &self,
        hook: Hook,
        args: &[sys::napi_value],
    ) -> Result<sys::napi_value, sys::napi_value> {
        let env = self.env;
        let Some(reference) = self.hooks.borrow().get(&hook).copied() else {
            // SAFETY: as the caller promises.
            return Err(unsafe { self.undefined() });
        };
        let (mut function, mut global, mut result) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: as the caller promises; `reference` is a live hook of ours.
        let status = unsafe {
            checked(sys::napi_get_reference_value(env, reference, &mut function))
                .and_then(|()| checked(sys::napi_get_global(env, &mut global)))
                .and_then(|()| {
                    checked(sys::napi_call_function(
                        env,
                        global,
                        function,
                        args.len(),
                        args.as_ptr(),
                        &mut result,
                    ))
                })
        };
        if status.is_ok() {
            return Ok(result);
        }
        let mut exception = ptr::null_mut();
        // SAFETY: as above. A call that failed without throwing leaves nothing to clear,
        // and is reported as undefined.
        unsafe {
            if checked(sys::napi_get_and_clear_last_exception(env, &mut exception)).is_err()
                || exception.is_null()
            {
                exception = self.undefined();
            }
        }
        Err(exception)
    }

    /// `undefined`, or a null value if Node refuses even that (its environment is ending),
    /// which Node-API then refuses wherever it is passed: nothing reaches JS either way.
    ///
    /// # Safety
    /// On this JS thread, inside a handle scope.
    unsafe fn undefined(&self) -> sys::napi_value {
        let mut value = ptr::null_mut();
        // SAFETY: as the caller promises.
        let got = unsafe { sys::napi_get_undefined(self.env, &mut value) };
        if checked(got).is_err() {
            return ptr::null_mut();
        }
        value
    }

    /// # Safety
    /// On this JS thread, inside a handle scope.
    unsafe fn number(&self, n: f64) -> Made {
        let mut value = ptr::null_mut();
        // SAFETY: as the caller promises.
        checked(unsafe { sys::napi_create_double(self.env, n, &mut value) })?;
        Ok(value)
    }

    /// # Safety
    /// On this JS thread, inside a handle scope.
    unsafe fn string(&self, text: &str) -> Made {
        let mut value = ptr::null_mut();
        // SAFETY: as the caller promises; `text` is UTF-8 of the length given.
        checked(unsafe {
            sys::napi_create_string_utf8(
                self.env,
                text.as_ptr().cast(),
                text.len() as isize,
                &mut value,
            )
        })?;
        Ok(value)
    }

    /// The error a promise rejects with, `code` and all (see binding/error.rs); undefined if
    /// Node would not make it (see `undefined`).
    ///
    /// # Safety
    /// On this JS thread, inside a handle scope.
    unsafe fn error(&self, err: &LockError) -> sys::napi_value {
        // SAFETY: as the caller promises.
        unsafe { js_error(self.env, err).unwrap_or_else(|_| self.undefined()) }
    }
}

/// The async resource and context our callback scopes run in (named for async_hooks).
///
/// # Safety
/// On the JS thread of `env`.
unsafe fn async_resource(env: sys::napi_env) -> Made<(sys::napi_ref, sys::napi_async_context)> {
    let (mut object, mut name, mut resource, mut context) = (
        ptr::null_mut(),
        ptr::null_mut(),
        ptr::null_mut(),
        ptr::null_mut(),
    );
    let label = "native-redis-lock";
    // SAFETY: as the caller promises; out-pointers are locals, `label` UTF-8 of its length.
    unsafe {
        checked(sys::napi_create_object(env, &mut object))?;
        checked(sys::napi_create_string_utf8(
            env,
            label.as_ptr().cast(),
            label.len() as isize,
            &mut name,
        ))?;
        checked(sys::napi_create_reference(env, object, 1, &mut resource))?;
        if let Err(status) = checked(sys::napi_async_init(env, object, name, &mut context)) {
            // Node refuses only while the environment ends, which frees the reference
            // anyway; deleting it now just does so sooner.
            let _ = checked(sys::napi_delete_reference(env, resource));
            return Err(status);
        }
    }
    Ok((resource, context))
}

fn check(status: sys::napi_status) -> napi::Result<()> {
    checked(status).map_err(|status| {
        napi::Error::new(
            napi::Status::from(status),
            "Node-API refused to create a promise",
        )
    })
}

unsafe extern "C" fn on_wake(_env: sys::napi_env, context: *mut c_void) {
    // The waker holds a weak reference: a thread state already dropped delivers nothing.
    // SAFETY: `context` is the `Weak` made in `JsThread::new`, borrowed here (ManuallyDrop),
    // and freed only by `drop_weak`, after the last wake.
    let weak = std::mem::ManuallyDrop::new(unsafe { Weak::from_raw(context as *const JsThread) });
    if let Some(thread) = weak.upgrade() {
        // SAFETY: the waker calls us from a libuv callback of this thread, no JS on the
        // stack, no borrow of ours held.
        unsafe { thread.deliver_queued() };
    }
}

unsafe extern "C" fn drop_weak(context: *mut c_void) {
    // SAFETY: the `Weak` made in `JsThread::new`; the waker gives it back once.
    drop(unsafe { Weak::from_raw(context as *const JsThread) });
}
