use super::error::Result;
use super::promises::{Hook, JsThread};
use super::sys::env::{Env as JsEnv, Scope};
use super::sys::waker::Waker;
use super::teardown;
use crate::core::basics::background;
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::front::granted::Granted;
use crate::core::ops::won::Unclaimed;
use futures_util::FutureExt;
use napi::bindgen_prelude::{Env, Function, Object, PromiseRaw};
use napi_derive::napi;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// How a call ended, as its promise settles.
pub enum Outcome {
    Lease(Granted),
    NoHandle,
    Bool(bool),
    Text(String),
    Done,
    /// A lock's new local deadline and its expiry in Redis, epoch ms (`extend`).
    Extended {
        deadline: Instant,
        expires_at_ms: u64,
    },
    Inspected(Option<crate::core::ops::exclusive::Inspection>),
    Failed(LockError),
}

/// What happened, in order: a call that ended (`id`), or news for a listener.
pub enum Entry {
    Settled(u32, Outcome),
    Event {
        listener: u32,
        event: &'static str,
        /// For `lost`: why, the last confirmed expiry in Redis (epoch ms), and the token.
        lost: Option<Box<Loss>>,
    },
}

/// What a holder is told of its lost lock.
pub struct Loss {
    pub error: LockError,
    pub expires_at_ms: u64,
    pub token: String,
}

/// What the runtime finished for one JS thread, waiting for that thread to take it.
pub struct Queue {
    /// `None` once the JS environment ended: nothing will take what joins it.
    done: Mutex<Option<Vec<Entry>>>,
    waker: OnceLock<Arc<Waker>>,
    /// Calls the JS thread answered itself while their runtime task still ran (a waiter
    /// handed the lock by a release on that thread): what the task ends with is dropped
    /// here, without waking the thread for nothing.
    answered: Mutex<std::collections::HashSet<u32>>,
}

impl Queue {
    pub fn take(&self) -> Vec<Entry> {
        lock(&self.done)
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The JS environment ended (see teardown.rs): what waits here, and what joins later,
    /// is never delivered, and is forsaken instead.
    pub fn close(&self) {
        let left = lock(&self.done).take().unwrap_or_default();
        for entry in left {
            entry.forsake();
        }
    }
}

impl Entry {
    /// Nobody will hear this entry: a lock it hands out is freed (see ops/won.rs).
    pub fn forsake(self) {
        if let Entry::Settled(_, outcome) = self {
            outcome.forsake();
        }
    }
}

impl Outcome {
    /// Takes out what frees the lock this outcome hands out, should it never reach its caller.
    pub fn unclaimed(&mut self) -> Option<Unclaimed> {
        match self {
            Outcome::Lease(granted) => granted.unclaimed.take(),
            _ => None,
        }
    }

    /// Nobody will hear this outcome: a lock it hands out is freed.
    pub fn forsake(mut self) {
        if let Some(unclaimed) = self.unclaimed() {
            background::within(|| unclaimed.release());
        }
    }
}

/// The sending side, held by every native object that settles promises from the runtime.
/// The first entry to join an empty queue wakes the JS thread once for all that follow.
#[derive(Clone)]
pub struct Completer(Arc<Queue>);

/// The native end of one JS thread's calls: its promises and the queue the runtime fills.
#[napi]
pub struct NativeCompletions {
    completer: Completer,
    thread: Rc<JsThread>,
}

#[napi]
impl NativeCompletions {
    /// `perfNow` is `performance.now()`: deadlines handed to JS are on that clock.
    #[napi(constructor)]
    pub fn new(env: Env, perf_now: Option<f64>) -> Result<Self> {
        let perf_now = perf_now.filter(|ms| ms.is_finite()).unwrap_or(0.0);
        let queue = Arc::new(Queue {
            done: Mutex::new(Some(Vec::new())),
            waker: OnceLock::new(),
            answered: Mutex::new(std::collections::HashSet::new()),
        });
        let thread = JsThread::new(&Scope::of_call(&env), perf_now, queue.clone())
            .ok_or_else(|| napi::Error::from_reason("Node-API refused to set up promises"))?;
        if let Some(waker) = thread.waker() {
            let _first = queue.waker.set(waker);
        }
        // Without the hook (Node refused it) the environment's waits and locks outlive it as
        // they did before it existed: no reason to refuse the addon.
        let ending = (
            thread.owner().clone(),
            queue.clone(),
            Rc::downgrade(&thread),
        );
        let _registered = teardown::register(JsEnv::of(&env), ending);
        Ok(NativeCompletions {
            completer: Completer(queue),
            thread,
        })
    }

    /// Registers one of the functions settlements call: `handle`, `error` or `event`.
    #[napi]
    pub fn hook<'env>(&self, env: Env, name: String, callback: Function<'env>) -> Result<()> {
        let hook = match name.as_str() {
            "handle" => Hook::Handle,
            "error" => Hook::Error,
            "event" => Hook::Event,
            _ => return Err(napi::Error::from_reason(format!("no hook named {name:?}"))),
        };
        let scope = Scope::<'env>::of_call(&env);
        if self.thread.set_hook(&scope, hook, scope.value(&callback)) {
            Ok(())
        } else {
            Err(napi::Error::from_reason("Node-API refused a reference"))
        }
    }

    /// The epoch ms that wall-clock times of settlements count from: they arrive as small
    /// integers, which JS objects store in place.
    #[napi(getter)]
    pub fn base_wall_ms(&self) -> f64 {
        self.thread.base_wall_ms() as f64
    }

    /// This environment is ending (`process.exit()`, which runs no cleanup hook): its waits
    /// stop and its kept-alive locks are released before this returns (see teardown.rs).
    #[napi]
    pub fn end(&self) {
        teardown::end(self.thread.owner(), &self.completer.0, Some(&self.thread));
    }

    /// A held lock that keeps the process alive (`true`), or no longer does (`false`).
    #[napi]
    pub fn keep_alive(&self, on: bool) {
        self.thread.keep(if on { 1 } else { -1 });
    }
}

impl NativeCompletions {
    pub fn completer(&self) -> Completer {
        self.completer.clone()
    }

    pub fn thread(&self) -> &Rc<JsThread> {
        &self.thread
    }
}

/// A promise for a call made now, settled later through `id`.
pub struct Call<'env> {
    pub id: u32,
    pub promise: PromiseRaw<'env, ()>,
}

impl JsThread {
    /// A new promise; `owner` (a JS object) stays alive until it settles and is passed to
    /// the hooks that make its value.
    /// From the #[napi] method `env` was handed to.
    pub fn call<'env>(&self, env: &Env, owner: Option<&Object<'env>>) -> Result<Call<'env>> {
        // Its environment was ended (`end()`, as at `process.exit()`): nothing would deliver
        // what the call ends with, so it fails now instead of pending forever.
        if self.owner().is_gone() {
            return Err(super::error::to_napi(env, LockError::Aborted));
        }
        let scope = Scope::<'env>::of_call(env);
        let owner = owner.map(|owner| scope.value(owner));
        let (id, promise) = self.promise(&scope, owner)?;
        Ok(Call { id, promise })
    }
}

impl Completer {
    /// Queues a `refreshed` for a JS listener.
    pub fn refreshed(&self, listener: u32) {
        self.push(Entry::Event {
            listener,
            event: "refreshed",
            lost: None,
        });
    }

    /// Queues a `lost` for a JS listener, with the lock's last confirmed expiry and token.
    pub fn lost(&self, listener: u32, error: LockError, expires_at_ms: u64, token: String) {
        self.push(Entry::Event {
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
        self.push(Entry::Event {
            listener,
            event: "tick",
            lost: None,
        });
    }

    /// Call `id` was answered on the JS thread while a runtime task still works for it.
    pub fn answered(&self, id: u32) {
        lock(&self.0.answered).insert(id);
    }

    fn push(&self, entry: Entry) {
        let queue = &self.0;
        if let Entry::Settled(id, _) = &entry {
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
        self.push(Entry::Settled(id, outcome));
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
        let started = super::runtime::spawn(async move {
            // A panic must still settle the promise, or the caller would wait forever.
            let outcome = match AssertUnwindSafe(work).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(_) => Outcome::Failed(LockError::Internal("a lock operation panicked".into())),
            };
            completer.push(Entry::Settled(id, outcome));
        });
        if started.is_err() {
            let err = LockError::Internal("no runtime: the OS refused its thread".into());
            self.push(Entry::Settled(id, Outcome::Failed(err)));
        }
    }
}
