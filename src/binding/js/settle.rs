//! The runtime's side of a JS thread's promises: a `Completer` queues what ends (a call's
//! outcome, a listener's news) for the thread and wakes it once per batch.

use super::outcome::{Loss, Outcome, Queue, Settlement};
use super::thread::JsThread;
use crate::binding::error::Result;
use crate::binding::sys::env::Scope;
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use futures_util::FutureExt;
use napi::bindgen_prelude::{Env, Object, PromiseRaw};
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
        // Its environment was ended (`end()`, as at `process.exit()`): nothing would deliver
        // what the call ends with, so it fails now instead of pending forever.
        if self.owner().is_gone() {
            return Err(crate::binding::error::to_napi(env, LockError::Aborted));
        }
        let scope = Scope::<'env>::of_call(env);
        let owner = owner.map(|owner| scope.value(owner));
        let (id, promise) = self.promise(&scope, owner)?;
        Ok(PromisedCall { id, promise })
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

    /// Call `id` was answered on the JS thread while a runtime task still works for it.
    pub fn answered(&self, id: u32) {
        lock(&self.0.answered).insert(id);
    }

    fn push(&self, entry: Settlement) {
        let queue = &self.0;
        if let Settlement::Settled(id, _) = &entry {
            if lock(&queue.answered).remove(id) {
                return;
            }
        }
        let wake = {
            let mut done = lock(&queue.done);
            let Some(done) = done.as_mut() else {
                drop(done);
                entry.forsake();
                return;
            };
            done.push(entry);
            done.len() == 1
        };
        if wake {
            if let Some(waker) = queue.waker.get() {
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
        // Boxed first: an acquire's future is over 2 KB, and spawning moves the task by value
        // several times on the JS thread; a box moves as a pointer.
        let work = Box::pin(work);
        let completer = self.clone();
        let started = crate::binding::runtime::spawn(async move {
            // A panic must still settle the promise, or the caller would wait forever.
            let outcome = match AssertUnwindSafe(work).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(_) => Outcome::Failed(LockError::Internal("a lock operation panicked".into())),
            };
            completer.push(Settlement::Settled(id, outcome));
        });
        if started.is_err() {
            let err = LockError::Internal("no runtime: the OS refused its thread".into());
            self.push(Settlement::Settled(id, Outcome::Failed(err)));
        }
    }
}
