//! The promises of our calls, made and settled natively on their JS thread. A call returns a
//! promise at once; whoever finishes it (the JS thread's own connection, or the runtime
//! through the waker) settles it by id. Settling happens in batches inside one callback
//! scope, so promise reactions run right after the batch, as for any I/O callback; no JS
//! object describes a completion, and no JS function stands between Redis and the caller.

use super::completions::{Entry, Loss, Outcome, Queue};
use super::error::to_napi;
use super::waker::Waker;
use crate::core::basics::clock::validity;
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
    /// `(error, key, owner) => error`: the error class users match on.
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

impl JsThread {
    /// # Safety
    /// On the JS thread of `env`; `perf_now` is `performance.now()` read just before.
    pub unsafe fn new(
        env: sys::napi_env,
        perf_now: f64,
        queue: Arc<Queue>,
    ) -> Option<Rc<JsThread>> {
        let mut event_loop = ptr::null_mut();
        if sys::napi_get_uv_event_loop(env, &mut event_loop) != sys::Status::napi_ok {
            return None;
        }
        let (mut object, mut name, mut resource, mut context) = (
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
        );
        let label = "native-redis-lock";
        if sys::napi_create_object(env, &mut object) != sys::Status::napi_ok
            || sys::napi_create_string_utf8(
                env,
                label.as_ptr().cast(),
                label.len() as isize,
                &mut name,
            ) != sys::Status::napi_ok
            || sys::napi_create_reference(env, object, 1, &mut resource) != sys::Status::napi_ok
            || sys::napi_async_init(env, object, name, &mut context) != sys::Status::napi_ok
        {
            return None;
        }
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
        *thread.waker.borrow_mut() = Waker::new(env, on_wake, drop_weak, weak);
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
        if sys::napi_create_reference(self.env, function, 1, &mut reference) != sys::Status::napi_ok
        {
            return false;
        }
        if let Some(old) = self.hooks.borrow_mut().insert(hook, reference) {
            sys::napi_delete_reference(self.env, old);
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
        check(sys::napi_create_promise(env, &mut deferred, &mut promise))?;
        let owner = match owner {
            Some(value) => {
                let mut reference = ptr::null_mut();
                check(sys::napi_create_reference(env, value, 1, &mut reference))?;
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
        self.deliver(entries);
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
        if sys::napi_open_handle_scope(env, &mut handles) != sys::Status::napi_ok {
            return;
        }
        let mut resource = ptr::null_mut();
        let mut scope = ptr::null_mut();
        let scoped = sys::napi_get_reference_value(env, self.resource, &mut resource)
            == sys::Status::napi_ok
            && sys::napi_open_callback_scope(env, resource, self.context, &mut scope)
                == sys::Status::napi_ok;
        let mut thrown = None;
        for entry in entries {
            let result = match entry {
                Entry::Settled(id, outcome) => self.settle(id, outcome),
                Entry::Event {
                    listener,
                    event,
                    lost,
                } => self.tell(listener, event, lost.map(|loss| *loss)),
            };
            if let Err(exception) = result {
                thrown.get_or_insert(exception);
            }
        }
        if scoped {
            sys::napi_close_callback_scope(env, scope);
        }
        if let Some(exception) = thrown {
            sys::napi_fatal_exception(env, exception);
        }
        sys::napi_close_handle_scope(env, handles);
    }

    /// Settles promise `id` from inside a call of ours from JS: its reactions run once that
    /// call returns.
    ///
    /// # Safety
    /// On this JS thread, inside a napi callback, with no borrow of ours held.
    pub unsafe fn settle_in_call(&self, id: u32, outcome: Outcome) {
        let mut handles = ptr::null_mut();
        if sys::napi_open_handle_scope(self.env, &mut handles) != sys::Status::napi_ok {
            return;
        }
        let _thrown = self.settle(id, outcome);
        sys::napi_close_handle_scope(self.env, handles);
    }

    /// Resolves or rejects promise `id`. `Err` carries an exception a hook threw.
    unsafe fn settle(&self, id: u32, outcome: Outcome) -> Result<(), sys::napi_value> {
        let Some(slot) = self.slots.borrow_mut().remove(&id) else {
            return Ok(());
        };
        self.keep(-1);
        let env = self.env;
        let owner = slot.owner.map(|reference| {
            let mut value = ptr::null_mut();
            sys::napi_get_reference_value(env, reference, &mut value);
            sys::napi_delete_reference(env, reference);
            value
        });
        match self.value_of(outcome, owner) {
            Ok(value) => sys::napi_resolve_deferred(env, slot.deferred, value),
            Err(error) => sys::napi_reject_deferred(env, slot.deferred, error),
        };
        Ok(())
    }

    /// The value a promise resolves with, or the error it rejects with.
    unsafe fn value_of(
        &self,
        outcome: Outcome,
        owner: Option<sys::napi_value>,
    ) -> Result<sys::napi_value, sys::napi_value> {
        let env = self.env;
        let mut value = ptr::null_mut();
        match outcome {
            Outcome::Lease(lease) => {
                let own = lease.sent.at + validity(lease.ttl);
                let deadline = lease.lent_until.map_or(own, |until| until.min(own));
                // A watched lock's token stays with the watchdog; the handle asks for it.
                let token = match lease.watch {
                    Some(_) => self.undefined(),
                    None => self.string(&lease.token),
                };
                let args = [
                    owner.unwrap_or_else(|| self.undefined()),
                    token,
                    self.number(lease.fence as f64),
                    // Whole ms, rounded down: never later, and a small integer in JS.
                    self.number(self.perf_ms(deadline).floor()),
                    self.number(self.wall(crate::core::basics::clock::wall_ms())),
                    self.number(self.wall(lease.sent.wall_ms + lease.ttl.as_millis() as u64)),
                    self.number(lease.watch.map_or(0.0, |id| id as f64)),
                    self.number(if lease.lent_until.is_some() { 1.0 } else { 0.0 }),
                ];
                return self.call_hook(Hook::Handle, &args);
            }
            Outcome::NoHandle => {
                sys::napi_get_null(env, &mut value);
            }
            Outcome::Bool(flag) => {
                sys::napi_get_boolean(env, flag, &mut value);
            }
            Outcome::Text(text) => value = self.string(&text),
            Outcome::Done => value = self.undefined(),
            Outcome::Extended {
                deadline,
                expires_at_ms,
            } => {
                sys::napi_create_array_with_length(env, 2, &mut value);
                sys::napi_set_element(env, value, 0, self.number(self.perf_ms(deadline).floor()));
                sys::napi_set_element(env, value, 1, self.number(self.wall(expires_at_ms)));
            }
            Outcome::Inspected(None) => {
                sys::napi_get_null(env, &mut value);
            }
            Outcome::Inspected(Some(found)) => {
                sys::napi_create_object(env, &mut value);
                let ttl = self.number(found.ttl_ms as f64);
                let contents = self.string(&found.contents);
                sys::napi_set_named_property(env, value, c"lock_ttl_ms".as_ptr(), ttl);
                sys::napi_set_named_property(env, value, c"lock_contents".as_ptr(), contents);
            }
            Outcome::Failed(err) => {
                let key = match err.key() {
                    Some(key) => self.string(key),
                    None => self.undefined(),
                };
                let raw = self.error(err);
                let args = [raw, key, owner.unwrap_or_else(|| self.undefined())];
                return Err(self.call_hook(Hook::Error, &args).unwrap_or(raw));
            }
        }
        Ok(value)
    }

    /// Tells a held lock's listener of `event`.
    unsafe fn tell(
        &self,
        listener: u32,
        event: &str,
        lost: Option<Loss>,
    ) -> Result<(), sys::napi_value> {
        let mut args = [
            self.number(listener as f64),
            self.string(event),
            self.undefined(),
            self.undefined(),
            self.undefined(),
            self.undefined(),
        ];
        if let Some(loss) = lost {
            args[2] = self.string(loss.error.code());
            args[3] = self.string(&loss.error.to_string());
            args[4] = self.number(self.wall(loss.expires_at_ms));
            args[5] = self.string(&loss.token);
        }
        self.call_hook(Hook::Event, &args).map(|_| ())
    }

    /// Calls a hook; `Err` with the exception it threw (or undefined when it is missing).
    unsafe fn call_hook(
        &self,
        hook: Hook,
        args: &[sys::napi_value],
    ) -> Result<sys::napi_value, sys::napi_value> {
        let env = self.env;
        let Some(reference) = self.hooks.borrow().get(&hook).copied() else {
            return Err(self.undefined());
        };
        let (mut function, mut global, mut result) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        sys::napi_get_reference_value(env, reference, &mut function);
        sys::napi_get_global(env, &mut global);
        let status = sys::napi_call_function(
            env,
            global,
            function,
            args.len(),
            args.as_ptr(),
            &mut result,
        );
        if status == sys::Status::napi_ok {
            return Ok(result);
        }
        let mut exception = ptr::null_mut();
        if sys::napi_get_and_clear_last_exception(env, &mut exception) != sys::Status::napi_ok
            || exception.is_null()
        {
            exception = self.undefined();
        }
        Err(exception)
    }

    unsafe fn undefined(&self) -> sys::napi_value {
        let mut value = ptr::null_mut();
        sys::napi_get_undefined(self.env, &mut value);
        value
    }

    unsafe fn number(&self, n: f64) -> sys::napi_value {
        let mut value = ptr::null_mut();
        sys::napi_create_double(self.env, n, &mut value);
        value
    }

    unsafe fn string(&self, text: &str) -> sys::napi_value {
        let mut value = ptr::null_mut();
        sys::napi_create_string_utf8(
            self.env,
            text.as_ptr().cast(),
            text.len() as isize,
            &mut value,
        );
        value
    }

    /// The encoded error the JS layer decodes (see binding/error.rs).
    unsafe fn error(&self, err: crate::core::basics::error::LockError) -> sys::napi_value {
        let message = self.string(&to_napi(err).reason);
        let mut value = ptr::null_mut();
        sys::napi_create_error(self.env, ptr::null_mut(), message, &mut value);
        value
    }
}

fn check(status: sys::napi_status) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::from_reason(
            "Node-API refused to create a promise",
        ))
    }
}

unsafe extern "C" fn on_wake(_env: sys::napi_env, context: *mut c_void) {
    // The waker holds a weak reference: a thread state already dropped delivers nothing.
    let weak = std::mem::ManuallyDrop::new(Weak::from_raw(context as *const JsThread));
    if let Some(thread) = weak.upgrade() {
        thread.deliver_queued();
    }
}

unsafe extern "C" fn drop_weak(context: *mut c_void) {
    drop(Weak::from_raw(context as *const JsThread));
}
