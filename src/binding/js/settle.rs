//! The runtime's side of a JS thread's promises: a `Completer` queues what ends (a call's
//! outcome, a listener's news) for the thread and wakes it once per batch.

use super::outcome::{Loss, Outcome, Queue, Settlement};
use super::thread::JsThread;
use crate::binding::error::Result;
use crate::binding::sys::env::{Scope, Value};
use crate::core::basics::error::LockError;
use futures_util::FutureExt;
use napi::bindgen_prelude::{Env, Object, PromiseRaw, Unknown};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// The sending side, held by every native object that settles promises from the runtime.
/// The first entry to join an empty queue wakes the JS thread once for all that follow.
#[derive(Clone)]
pub struct Completer(pub(super) Arc<Queue>);

/// A promise for a call made now, settled later through `id`.
pub struct PromisedCall<'env> {
    pub id: u32,
    pub promise: PromiseRaw<'env, ()>,
}

impl JsThread {
    /// A new promise; `owner` (a JS object) stays alive until it settles and is passed to
    /// the hooks that make its value.
    /// From the #[napi] method `env` was handed to.
    pub fn call<'env>(
        &self,
        env: &Env,
        owner: Option<&Object<'env>>,
    ) -> Result<PromisedCall<'env>> {
        let (scope, owner) = self.made_by(env, owner)?;
        let (id, promise) = self.promise(&scope, owner)?;
        Ok(PromisedCall { id, promise })
    }

    /// The scope of the JS call `env` was handed to, and `owner` in it.
    fn made_by<'env>(
        &self,
        env: &Env,
        owner: Option<&Object<'env>>,
    ) -> Result<(Scope<'env>, Option<Value<'env>>)> {
        // Its environment was ended (`end()`, as at `process.exit()`): nothing would deliver
        // what the call ends with, so it fails now instead of pending forever.
        if self.owner().is_gone() {
            return Err(crate::binding::error::to_napi(env, LockError::Aborted));
        }
        let scope = Scope::<'env>::of_call(env);
        let owner = owner.map(|owner| scope.value(owner));
        Ok((scope, owner))
    }
}

/// A call that may be answered before the JS call that made it returns (run inline on
/// `memory://`, see in_call.rs); `returned` ends it.
pub struct InPlaceCall<'env> {
    pub id: u32,
    outer: u32,
    scope: Scope<'env>,
    owner: Option<Value<'env>>,
}

impl JsThread {
    /// As `call`, with no promise made yet: `returned` makes one if the call is not
    /// answered by then. The call's `start` comes in between.
    pub fn call_in_place<'env>(
        &self,
        env: &Env,
        owner: Option<&Object<'env>>,
    ) -> Result<InPlaceCall<'env>> {
        let (scope, owner) = self.made_by(env, owner)?;
        let id = self.reserve_id();
        let outer = self.in_call.begin(id);
        Ok(InPlaceCall {
            id,
            outer,
            scope,
            owner,
        })
    }

    /// What the JS call returns: the value the call was answered with in place (as its
    /// promise would resolve with it, the lock it hands out claimed as `settle` does), else
    /// a promise settled later through its id. A failure is never answered in place.
    pub fn returned<'env>(&self, call: InPlaceCall<'env>) -> Unknown<'env> {
        let InPlaceCall {
            id,
            outer,
            scope,
            owner,
        } = call;
        // The call started already (a release is on its way): Node refusing to make its
        // answer, which it does only while the environment ends, is no throw, which would
        // tell JS that the call never ran (a released handle would count itself held again).
        // Undefined is returned instead; the answer finds no promise, and frees the lock it
        // hands out (`settle`, `claim`).
        let Some(mut outcome) = self.in_call.end(id, outer) else {
            return match self.pending(&scope, id, owner) {
                Ok(promise) => scope.returned(scope.value(&promise)),
                Err(_) => scope.returned(scope.undefined()),
            };
        };
        let unclaimed = outcome.unclaimed();
        let value = self.value_of(&scope, outcome, owner);
        self.claim(unclaimed, matches!(value, Ok(Ok(_))));
        // The loop's turn ends with the check that lets calls be answered in place again.
        self.end_of_turn();
        let returned = match value {
            Ok(Ok(value)) => value,
            // The handle hook threw: the call rejects with it, as a settled promise would.
            Ok(Err(thrown)) => match scope.promise() {
                Ok((deferred, promise)) => {
                    let _refused_only_at_the_end = deferred.settle(&scope, Err(thrown));
                    scope.value(&promise)
                }
                Err(_) => scope.undefined(),
            },
            Err(_) => scope.undefined(),
        };
        scope.returned(returned)
    }
}

impl Completer {
    /// Queues what a waiter for `key` went through, for the JS listener of its API object.
    pub fn seen(&self, listener: u32, event: &'static str, key: &str) {
        self.push(Settlement::Seen {
            listener,
            event,
            key: key.into(),
        });
    }

    /// Queues a `refreshed` for a JS listener.
    pub fn refreshed(&self, listener: u32) {
        self.push(Settlement::Event {
            listener,
            event: "refreshed",
            lost: None,
        });
    }

    /// Queues `event` (`suspended`, `resumed`: news with nothing more to say) for a JS listener.
    pub fn news(&self, listener: u32, event: &'static str) {
        self.push(Settlement::Event {
            listener,
            event,
            lost: None,
        });
    }

    /// Queues a `lost` for a JS listener, with the lock's last confirmed expiry and token.
    pub fn lost(&self, listener: u32, error: LockError, expires_at_ms: u64, token: String) {
        self.push(Settlement::Event {
            listener,
            event: "lost",
            lost: Some(Box::new(Loss {
                error,
                expires_at_ms,
                token,
            })),
        });
    }

    /// Queues a `tick` of a native period (see ticker.rs) for a JS listener.
    pub fn tick(&self, listener: u32) {
        self.push(Settlement::Event {
            listener,
            event: "tick",
            lost: None,
        });
    }

    /// Call `id` was answered on the JS thread, its runtime task (if any) still working.
    pub fn answered(&self, id: u32) {
        let unstarted = self.0.unpark(id);
        if unstarted.is_some_and(|task| task.drop_task()) {
            self.0.never_ends(id);
            return;
        }
        self.0.answered(id);
    }

    fn push(&self, entry: Settlement) {
        if let Settlement::Settled(id, _) = &entry {
            self.0.unpark(*id);
        }
        if self.0.put(entry) {
            if let Some(waker) = self.0.waker.get() {
                waker.wake();
            }
        }
    }

    /// Settles promise `id` with `outcome` from the JS thread's queue (never synchronously:
    /// its caller has not returned the promise yet).
    pub fn settle(&self, id: u32, outcome: Outcome) {
        self.push(Settlement::Settled(id, outcome));
    }

    /// Runs `work` on the runtime and settles promise `id` with its outcome.
    pub fn run<F>(&self, id: u32, work: F)
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        self.start(id, work, false);
    }

    /// `run`, polled once here first; it reaches the runtime only once woken (see
    /// runtime::start_here).
    pub fn run_here_first<F>(&self, id: u32, work: F)
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        self.start(id, work, true);
    }

    fn start<F>(&self, id: u32, work: F, here_first: bool)
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let task = self.task(id, work);
        // Before the task can end (start_here polls it here, and it may end there).
        self.0.started(id);
        let started = match here_first {
            true => crate::binding::runtime::start_here(task, |unstarted| {
                self.0.park(id, unstarted);
            })
            .is_ok(),
            false => crate::binding::runtime::spawn(task).is_ok(),
        };
        if !started {
            let err = LockError::Internal("no runtime: the OS refused its thread".into());
            self.push(Settlement::Settled(id, Outcome::Failed(err)));
        }
    }

    /// `work` as a task that settles promise `id`.
    fn task<F>(&self, id: u32, work: F) -> impl Future<Output = ()> + Send + 'static
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        // Boxed first: an acquire's future is over 2 KB, and spawning moves the task by value
        // several times on the JS thread; a box moves as a pointer.
        let work = Box::pin(work);
        let completer = self.clone();
        async move {
            // A panic must still settle the promise, or the caller would wait forever.
            let outcome = match AssertUnwindSafe(work).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(_) => Outcome::Failed(LockError::Internal("a lock operation panicked".into())),
            };
            completer.push(Settlement::Settled(id, outcome));
        }
    }
}

#[cfg(test)]
#[path = "settle_tests.rs"]
mod tests;
