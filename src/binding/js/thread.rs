//! The promises of our calls, made and settled natively on their JS thread. A call returns a
//! promise at once; whoever finishes it (the JS thread's own connection, or the runtime
//! through the waker) settles it by id. Settling happens in batches inside one callback
//! scope, so promise reactions run right after the batch, as for any I/O callback; no JS
//! object describes a completion, and no JS function stands between Redis and the caller.

use super::in_call::InCall;
use super::outcome::{Loss, Outcome, Queue, Settlement};
use crate::binding::error::js_error;
use crate::binding::sys::check::Check;
use crate::binding::sys::env::{AsyncResource, Env, Made, Ref, Scope, Value};
use crate::binding::sys::promise::Deferred;
use crate::binding::sys::uv::EventLoop;
use crate::binding::sys::waker::Waker;
use crate::core::api::{Owner, Unclaimed};
use crate::core::basics::background::within;
use crate::core::basics::clock::validity;
use crate::core::basics::error::LockError;
use crate::core::basics::trace::write_line;
use napi::bindgen_prelude::PromiseRaw;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Instant;

/// JS functions the layer above registers once (see lib/completions.js).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// `(owner, token, fence, deadline, acquiredAt, expiresAt, watch, lent, confirmed) =>
    /// handle`; times as ms (deadline and confirmed on `performance.now()`'s clock, the others
    /// after `baseWallMs`); no token for a watched lock (`watch`, see `watchToken`); `lent` 1
    /// for a holder that started before Redis ran its handover (see `lentState`); `confirmed`
    /// when the winning request was sent (see `inDoubt`).
    Handle,
    /// `(error, owner) => error`: the error class users match on, from the native error
    /// (its `code`, `key` and the rest are set in binding/error.rs).
    Error,
    /// `(listener, event, code, message, expiresAt, token)`: news of a held lock
    /// (`expiresAt` ms after `baseWallMs`).
    Event,
}

struct Slot {
    deferred: Deferred,
    /// A JS object the settlement needs (the handle being filled, or released).
    owner: Option<Ref>,
}

pub struct JsThread {
    env: Env,
    event_loop: EventLoop,
    hooks: RefCell<HashMap<Hook, Ref>>,
    slots: RefCell<HashMap<u32, Slot>>,
    /// Plain locks whose handles were settled in this loop turn, until their reactions ran
    /// (see `confirm_claims`).
    claims: RefCell<Vec<Unclaimed>>,
    /// Started while `claims` holds any: calls `confirm_claims` at the end of the loop turn.
    /// Taken (and closed) as the environment ends.
    claims_check: RefCell<Option<Check<Weak<JsThread>>>>,
    /// Calls answered inside the JS call that made them (run inline, on `memory://`), to
    /// settle at the start of the next loop turn.
    next_turn: RefCell<Vec<Settlement>>,
    /// Started while `next_turn` holds any: delivers it. Taken as the environment ends.
    next_turn_idle: RefCell<Option<Check<Weak<JsThread>>>>,
    next_id: Cell<u32>,
    /// The call being answered inside the JS call that made it, if it may be.
    pub(super) in_call: InCall,
    /// Promises pending plus holds that keep the process alive; the waker is referred
    /// while this is above zero.
    keepers: Cell<u32>,
    queue: Arc<Queue>,
    waker: RefCell<Option<Arc<Waker>>>,
    resource: AsyncResource,
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
    /// From a call JS made (`scope`'s); `perf_now` is `performance.now()` read just before.
    pub fn new(scope: &Scope<'_>, perf_now: f64, queue: Arc<Queue>) -> Option<Rc<JsThread>> {
        let env = scope.env();
        let event_loop = env.event_loop().ok()?;
        let resource = scope.async_resource("native-redis-lock").ok()?;
        let since = std::time::Duration::from_secs_f64((perf_now.max(0.0) / 1000.0).min(1e9));
        let now = Instant::now();
        let thread = Rc::new(JsThread {
            env,
            event_loop,
            hooks: RefCell::new(HashMap::new()),
            slots: RefCell::new(HashMap::new()),
            claims: RefCell::new(Vec::new()),
            claims_check: RefCell::new(None),
            next_turn: RefCell::new(Vec::new()),
            next_turn_idle: RefCell::new(None),
            next_id: Cell::new(1),
            in_call: InCall::default(),
            keepers: Cell::new(0),
            queue,
            waker: RefCell::new(None),
            resource,
            origin: now.checked_sub(since).unwrap_or(now),
            base_wall_ms: crate::core::basics::clock::wall_ms(),
            owner: Owner::new(),
        });
        // The waker holds a weak reference: a thread state already dropped delivers nothing.
        *thread.waker.borrow_mut() = Waker::new(env, Rc::downgrade(&thread), |weak| {
            if let Some(thread) = weak.upgrade() {
                thread.deliver_queued();
            }
        });
        *thread.next_turn_idle.borrow_mut() =
            Check::idle(event_loop, Rc::downgrade(&thread), |weak| {
                if let Some(thread) = weak.upgrade() {
                    thread.deliver_next_turn();
                }
            });
        *thread.claims_check.borrow_mut() =
            Check::new(event_loop, Rc::downgrade(&thread), |weak| {
                if let Some(thread) = weak.upgrade() {
                    thread.confirm_claims();
                }
            });
        Some(thread)
    }

    pub fn env(&self) -> Env {
        self.env
    }

    /// On whose behalf this thread's waits run and locks are held.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    pub fn event_loop(&self) -> EventLoop {
        self.event_loop
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

    /// Registers `function` (a value of `scope`) as `hook`; `false` if Node refused a
    /// reference to it.
    pub fn set_hook<'s>(&self, scope: &Scope<'s>, hook: Hook, function: Value<'s>) -> bool {
        let Ok(reference) = scope.reference(function) else {
            return false;
        };
        if let Some(old) = self.hooks.borrow_mut().insert(hook, reference) {
            // Node refuses only while the environment ends, which frees every reference;
            // the old function merely stays alive until then.
            let _ = old.delete(self.env);
        }
        true
    }

    /// A new pending promise and the id that settles it. `owner` stays alive until then.
    /// From a call JS made (`scope`'s).
    pub fn promise<'s>(
        &self,
        scope: &Scope<'s>,
        owner: Option<Value<'s>>,
    ) -> napi::Result<(u32, PromiseRaw<'s, ()>)> {
        let id = self.reserve_id();
        Ok((id, self.pending(scope, id, owner)?))
    }

    /// An id no pending promise has, for a promise made before this JS call returns.
    pub(super) fn reserve_id(&self) -> u32 {
        let slots = self.slots.borrow();
        let mut id = self.next_id.get();
        while id == 0 || slots.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next_id.set(id.wrapping_add(1));
        id
    }

    /// A new pending promise settled through `id` (from `reserve_id`, in this JS call).
    pub(super) fn pending<'s>(
        &self,
        scope: &Scope<'s>,
        id: u32,
        owner: Option<Value<'s>>,
    ) -> napi::Result<PromiseRaw<'s, ()>> {
        let (deferred, promise) = scope.promise().map_err(refused)?;
        let owner = match owner {
            Some(value) => match scope.reference(value) {
                Ok(reference) => Some(reference),
                Err(status) => {
                    // The promise never reaches JS, so nothing waits on it; it is settled
                    // all the same so that Node frees its deferred, and a refusal there
                    // (the environment ending) frees it as well.
                    let _ = deferred.settle(scope, Err(scope.undefined()));
                    return Err(refused(status));
                }
            },
            None => None,
        };
        self.slots.borrow_mut().insert(id, Slot { deferred, owner });
        self.keep(1);
        Ok(promise)
    }

    /// Counts a reason to keep the process alive (`delta` of +1 or -1).
    pub fn keep(&self, delta: i32) {
        let before = self.keepers.get();
        let after = before.saturating_add_signed(delta);
        self.keepers.set(after);
        if (before == 0) != (after == 0) {
            if let Some(waker) = self.waker.borrow().as_ref() {
                waker.keep_alive(self.env, after > 0);
            }
        }
    }

    /// Everything the runtime finished, delivered now. From a libuv callback of this
    /// thread, with no JS on the stack.
    pub fn deliver_queued(&self) {
        // The whole queue, in order: news queued since came after it, and waits its turn.
        let entries = self.queue.take();
        self.deliver_in_order(entries);
    }

    /// Settles and tells `entries`, settled by this thread itself, after the news still
    /// queued and what was queued before it (see `Queue::take_news`).
    pub fn deliver(&self, entries: Vec<Settlement>) {
        if entries.is_empty() {
            return;
        }
        let settling: Vec<u32> = (entries.iter())
            .filter_map(|entry| match entry {
                Settlement::Settled(id, _) => Some(*id),
                _ => None,
            })
            .collect();
        let mut news = self.queue.take_news(&settling);
        news.extend(entries);
        self.deliver_in_order(news);
    }

    /// Settles and tells `entries` in order, in one callback scope: promise reactions and
    /// `process.nextTick` callbacks run when it closes. A listener that throws does not stop
    /// the batch; its exception is raised as uncaught afterwards, as an EventEmitter's would.
    /// From a libuv callback of this thread, with no JS on the stack and no borrow of ours
    /// held (the reactions may call back into us).
    fn deliver_in_order(&self, entries: Vec<Settlement>) {
        if entries.is_empty() {
            return;
        }
        // Only an ending environment refuses a scope; its promises can no longer settle,
        // and the core ends its waits (see teardown.rs); the locks they hand out are freed.
        let mut entries = Some(entries);
        let _ = self.env.handle_scope(|scope| {
            let mut thrown = None;
            scope.callback_scope(&self.resource, || {
                // Only while the entries are told: the reactions run as the scope closes,
                // after every one of them, and a call they make may be answered in place
                // (held over them, a chain of awaits would never be again).
                let _telling = self.in_call.telling();
                for entry in entries.take().unwrap_or_default() {
                    if let Err(exception) = self.tell_entry(scope, entry) {
                        thrown.get_or_insert(exception);
                    }
                }
            });
            if self.claims_check.borrow().is_none() {
                // Without the check (libuv refused it), as close as can be told here.
                self.confirm_claims_now(scope);
            }
            if let Some(exception) = thrown {
                if scope.fatal_exception(exception).is_err() {
                    // Node could not raise it (its environment is ending): say so rather
                    // than lose a listener's exception without a trace.
                    write_line(
                        b"native-redis-lock: a lock listener threw, and Node could not raise it\n",
                    );
                }
            }
        });
        entries.into_iter().flatten().for_each(Settlement::forsake);
    }

    /// Settles or tells one entry; a listener's (or a hook's) exception comes back.
    fn tell_entry<'s>(&self, scope: &Scope<'s>, entry: Settlement) -> Result<(), Value<'s>> {
        match entry {
            Settlement::Settled(id, outcome) => self.settle(scope, id, outcome),
            Settlement::Event {
                listener,
                event,
                lost,
            } => self.tell(scope, listener, event, lost.map(|loss| *loss)),
            Settlement::Seen {
                listener,
                event,
                key,
            } => self.tell_seen(scope, listener, event, &key),
        }
    }

    /// Settles promise `id` at the start of the next loop turn, which then comes without
    /// waiting for I/O: for a call answered inside the JS call that made it, as a reply read
    /// from a socket would be, in order, and with no wake-up from another thread. Hands the
    /// outcome back when there is no such turn (libuv refused, or the environment ends).
    pub fn settle_next_turn(&self, id: u32, outcome: Outcome) -> Result<(), Outcome> {
        let idle = self.next_turn_idle.borrow();
        let Some(idle) = idle.as_ref() else {
            return Err(outcome);
        };
        self.next_turn
            .borrow_mut()
            .push(Settlement::Settled(id, outcome));
        // Refused only by a loop that is gone, whose environment's end forsakes them.
        let _started = idle.start();
        Ok(())
    }

    /// Call `id`, run inline, ended with `outcome`: answered in the JS call that made it
    /// when it may be (see in_call.rs: nothing told before it is pending), else at the next
    /// loop turn as `settle_next_turn`.
    pub fn settle_inline(&self, id: u32, outcome: Outcome) -> Result<(), Outcome> {
        let quiet = || self.next_turn.borrow().is_empty() && self.queue.is_idle();
        match self.in_call.keep(id, outcome, quiet) {
            Ok(()) => Ok(()),
            Err(outcome) => self.settle_next_turn(id, outcome),
        }
    }

    /// What `settle_next_turn` kept, delivered now. From the idle handle's callback.
    fn deliver_next_turn(&self) {
        if let Some(idle) = self.next_turn_idle.borrow().as_ref() {
            idle.stop();
        }
        self.in_call.loop_turned();
        let entries = std::mem::take(&mut *self.next_turn.borrow_mut());
        self.deliver(entries);
    }

    /// Settles promise `id` from inside a call of ours from JS: its reactions run once that
    /// call returns. No borrow of ours may be held.
    pub fn settle_in_call(&self, id: u32, outcome: Outcome) {
        // The call settling this waiter was answered in place already (a lent hand-over):
        // the waiter goes first, so that answer waits for the next turn.
        if let Some((answered, kept)) = self.in_call.withdraw() {
            if let Err(kept) = self.settle_next_turn(answered, kept) {
                // No next turn (libuv refused, the environment ends): in place after all.
                self.in_call.put_back((answered, kept));
            }
        }
        let _telling = self.in_call.telling();
        // As in `deliver`: only an ending environment refuses a scope; news still queued,
        // and what was queued before it, goes first (see `Queue::take_news`).
        let mut news = Some(self.queue.take_news(&[id]));
        let mut outcome = Some(outcome);
        let _ = self.env.handle_scope(|scope| {
            let mut thrown = None;
            for entry in news.take().unwrap_or_default() {
                // A waiter's hook that throws is the tracer's to report (lib/tracing.js); a
                // listener's is raised as uncaught once the rest is told, as in `deliver`.
                let seen = matches!(entry, Settlement::Seen { .. });
                if let Err(exception) = self.tell_entry(scope, entry) {
                    if !seen {
                        thrown.get_or_insert(exception);
                    }
                }
            }
            // The hooks throw only for the handle hook's caller, who is this very call's: a
            // throw inside a call from JS is left for that call to surface, not raised here.
            if let Some(outcome) = outcome.take() {
                let _thrown = self.settle(scope, id, outcome);
            }
            if let Some(exception) = thrown {
                if scope.fatal_exception(exception).is_err() {
                    eprintln!(
                        "native-redis-lock: a lock listener threw, and Node could not raise it"
                    );
                }
            }
        });
        news.into_iter().flatten().for_each(Settlement::forsake);
        if let Some(outcome) = outcome {
            outcome.forsake();
        }
        if self.claims_check.borrow().is_none() {
            // Its reactions run once the JS call that settled it returns, on a live thread.
            self.claims.borrow_mut().clear();
        }
    }

    /// The handles settled in this loop turn reached their callers' code unless the
    /// environment stopped running JS meanwhile (a worker terminated while the reactions
    /// ran, which stops them where they are): those locks are then freed, as nobody will run
    /// the code that could release them. Their reactions run as the callback that settled
    /// them returns, which for a threadsafe function's callback (the runtime's results) is
    /// Node's, after ours: only the check at the end of the loop turn comes after them.
    fn confirm_claims(&self) {
        if let Some(check) = self.claims_check.borrow().as_ref() {
            check.stop();
        }
        self.in_call.loop_turned();
        if self.claims.borrow().is_empty() {
            return;
        }
        // Only an ending environment refuses a scope: it runs no JS either.
        let runs_js = self.env.handle_scope(|scope| scope.can_run_js());
        if runs_js != Some(true) {
            self.forsake_claims();
        } else {
            self.claims.borrow_mut().clear();
        }
    }

    /// `confirm_claims` without the check: right after `deliver`'s callback scope closed.
    fn confirm_claims_now(&self, scope: &Scope<'_>) {
        if !self.claims.borrow().is_empty() && !scope.can_run_js() {
            self.forsake_claims();
        }
        self.claims.borrow_mut().clear();
    }

    /// Frees the plain locks handed out whose reactions are not known to have run.
    fn forsake_claims(&self) {
        let claims = std::mem::take(&mut *self.claims.borrow_mut());
        within(|| claims.into_iter().for_each(|claim| claim.free()));
    }

    /// The environment ends (see teardown.rs): the locks whose handles were settled in its
    /// last loop turn are freed, as its code may never have seen them. No more is checked.
    pub fn end_claims(&self) {
        drop(self.next_turn_idle.borrow_mut().take());
        let kept = std::mem::take(&mut *self.next_turn.borrow_mut());
        kept.into_iter().for_each(Settlement::forsake);
        drop(self.claims_check.borrow_mut().take());
        self.forsake_claims();
    }

    /// Resolves or rejects promise `id`. `Err` carries an exception a hook threw. No
    /// borrow of ours may be held.
    fn settle<'s>(
        &self,
        scope: &Scope<'s>,
        id: u32,
        mut outcome: Outcome,
    ) -> Result<(), Value<'s>> {
        // A plain lock is freed unless its handle resolves the promise: a thread being
        // terminated can no longer make the handle, or settle (see ops/delivery.rs).
        let unclaimed = outcome.unclaimed();
        let Some(slot) = self.slots.borrow_mut().remove(&id) else {
            if let Some(unclaimed) = unclaimed {
                within(|| unclaimed.free());
            }
            return Ok(());
        };
        self.keep(-1);
        let owner = slot.owner.and_then(|reference| {
            let read = reference.value(scope);
            // A reference Node will not delete is freed with the environment, which is
            // what refuses it.
            let _ = reference.delete(self.env);
            read.ok()
        });
        let value = match self.value_of(scope, outcome, owner) {
            Ok(value) => value,
            Err(status) => {
                // The value could not be made: the caller still hears of it, as an error.
                let err = LockError::Internal(format!(
                    "Node-API refused to make a call's result ({})",
                    napi::Status::from(status)
                ));
                Err(self.error(scope, &err))
            }
        };
        let handed = value.is_ok();
        // Refused only while the environment ends: nobody is left to hear the promise.
        let settled = slot.deferred.settle(scope, value).is_ok();
        self.claim(unclaimed, handed && settled);
        Ok(())
    }

    /// A plain lock whose handle reached JS (`handed`) is freed unless the code it reached
    /// runs (see `confirm_claims`); one that did not is freed now.
    pub(super) fn claim(&self, unclaimed: Option<Unclaimed>, handed: bool) {
        let Some(unclaimed) = unclaimed else {
            return;
        };
        if handed {
            self.claims.borrow_mut().push(unclaimed);
            self.end_of_turn();
        } else {
            within(|| unclaimed.free());
        }
    }

    /// Has `confirm_claims` run at the end of this loop turn.
    pub(super) fn end_of_turn(&self) {
        if let Some(check) = self.claims_check.borrow().as_ref() {
            // Refused only by a loop that is gone, whose environment's end frees it.
            let _started = check.start();
        }
    }

    /// The value a promise resolves with (`Ok(Ok)`), or the error it rejects with
    /// (`Ok(Err)`); `Err` with Node's status when a value could not be made.
    pub(super) fn value_of<'s>(
        &self,
        scope: &Scope<'s>,
        outcome: Outcome,
        owner: Option<Value<'s>>,
    ) -> Made<Result<Value<'s>, Value<'s>>> {
        let value = match outcome {
            Outcome::Lease(lease) => {
                let own = lease.sent.at + validity(lease.ttl);
                let deadline = lease.lent_until.map_or(own, |until| until.min(own));
                // A lent start is known to run only as long as the lease it stands on, until
                // Redis confirms the handover (the handle then moves its expiry to its own).
                let lasts = match lease.lent_until {
                    Some(_) => deadline.saturating_duration_since(lease.sent.at),
                    None => lease.ttl,
                };
                // A watched lock's token stays with the watchdog; the handle asks for it.
                let token = match lease.watch {
                    Some(_) => scope.undefined(),
                    None => scope.string(&lease.token)?,
                };
                let args = [
                    owner.unwrap_or_else(|| scope.undefined()),
                    token,
                    scope.number(lease.fence as f64)?,
                    // Whole ms, rounded down: never later, and a small integer in JS.
                    scope.number(self.perf_ms(deadline).floor())?,
                    scope.number(self.wall(lease.acquired_at_ms()))?,
                    // Whole ms, rounded down, as the deadline.
                    scope.number(self.wall(lease.sent.wall_ms + lasts.as_millis() as u64))?,
                    scope.number(lease.watch.map_or(0.0, |id| id as f64))?,
                    scope.number(if lease.lent_until.is_some() { 1.0 } else { 0.0 })?,
                    // When the winning request was sent, rounded down (see `inDoubt`).
                    scope.number(self.perf_ms(lease.sent.at).floor())?,
                ];
                return Ok(self.call_hook(scope, Hook::Handle, &args));
            }
            Outcome::NoHandle | Outcome::Inspected(None) => scope.null()?,
            Outcome::Bool(flag) => scope.boolean(flag)?,
            Outcome::Text(text) => scope.string(&text)?,
            Outcome::Done => scope.undefined(),
            Outcome::Extended {
                deadline,
                expires_at_ms,
                confirmed,
            } => {
                let deadline = scope.number(self.perf_ms(deadline).floor())?;
                let expires_at = scope.number(self.wall(expires_at_ms))?;
                // Rounded down: a drop in the same ms still counts as after it.
                let confirmed = scope.number(self.perf_ms(confirmed).floor())?;
                let value = scope.array(3)?;
                scope.set_element(value, 0, deadline)?;
                scope.set_element(value, 1, expires_at)?;
                scope.set_element(value, 2, confirmed)?;
                value
            }
            Outcome::Inspected(Some(found)) => {
                let ttl = scope.number(found.ttl_ms as f64)?;
                let contents = scope.string(&found.contents)?;
                let value = scope.object()?;
                scope.set_named(value, c"lock_ttl_ms", ttl)?;
                scope.set_named(value, c"lock_contents", contents)?;
                value
            }
            Outcome::Number(n) => scope.number(n)?,
            Outcome::SyncguardWon {
                fence,
                expires_at_ms,
                ..
            } => {
                // Both below 2^53: fences stop at 15 digits, expiries are epoch ms.
                let value = scope.array(2)?;
                let fence = scope.number(fence as f64)?;
                let expires_at = scope.number(expires_at_ms as f64)?;
                scope.set_element(value, 0, fence)?;
                scope.set_element(value, 1, expires_at)?;
                value
            }
            Outcome::Failed(err) => {
                let raw = self.error(scope, &err);
                let args = [raw, owner.unwrap_or_else(|| scope.undefined())];
                return Ok(Err(self
                    .call_hook(scope, Hook::Error, &args)
                    .unwrap_or(raw)));
            }
        };
        Ok(Ok(value))
    }

    /// Tells a held lock's listener of `event`.
    fn tell<'s>(
        &self,
        scope: &Scope<'s>,
        listener: u32,
        event: &str,
        lost: Option<Loss>,
    ) -> Result<(), Value<'s>> {
        // Node refuses to make the arguments only while the environment ends, when no
        // listener is left to hear the news.
        let Ok(args) = self.event_args(scope, listener, event, lost) else {
            return Ok(());
        };
        self.call_hook(scope, Hook::Event, &args).map(|_| ())
    }

    /// A waiter's news: `(listener, event, undefined, key)`.
    fn tell_seen<'s>(
        &self,
        scope: &Scope<'s>,
        listener: u32,
        event: &str,
        key: &str,
    ) -> Result<(), Value<'s>> {
        let Ok(mut args) = self.event_args(scope, listener, event, None) else {
            return Ok(());
        };
        let Ok(key) = scope.string(key) else {
            return Ok(());
        };
        args[3] = key;
        self.call_hook(scope, Hook::Event, &args).map(|_| ())
    }

    fn event_args<'s>(
        &self,
        scope: &Scope<'s>,
        listener: u32,
        event: &str,
        lost: Option<Loss>,
    ) -> Made<[Value<'s>; 6]> {
        let undefined = scope.undefined();
        let mut args = [
            scope.number(listener as f64)?,
            scope.string(event)?,
            undefined,
            undefined,
            undefined,
            undefined,
        ];
        if let Some(loss) = lost {
            args[2] = scope.string(loss.error.code())?;
            args[3] = scope.string(&loss.error.to_string())?;
            args[4] = scope.number(self.wall(loss.expires_at_ms))?;
            args[5] = scope.string(&loss.token)?;
        }
        Ok(args)
    }

    /// Calls a hook; `Err` with the exception it threw (or undefined when it is missing, or
    /// Node would not call it).
    fn call_hook<'s>(
        &self,
        scope: &Scope<'s>,
        hook: Hook,
        args: &[Value<'s>],
    ) -> Result<Value<'s>, Value<'s>> {
        let function = match self.hooks.borrow().get(&hook) {
            Some(reference) => reference.value(scope),
            None => return Err(scope.undefined()),
        };
        match function {
            Ok(function) => scope.call(function, args),
            Err(_) => Err(scope.take_exception()),
        }
    }

    /// The error a promise rejects with, `code` and all (see binding/error.rs); undefined if
    /// Node would not make it.
    fn error<'s>(&self, scope: &Scope<'s>, err: &LockError) -> Value<'s> {
        js_error(scope, err).unwrap_or_else(|_| scope.undefined())
    }
}

pub(super) fn refused(status: napi::sys::napi_status) -> napi::Error {
    napi::Error::new(
        napi::Status::from(status),
        "Node-API refused to create a promise",
    )
}
