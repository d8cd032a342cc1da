//! `NativeCompletions`, what JS makes once per JS thread (lib/completions.js): the thread's
//! promises, the queue the runtime fills for it, and the hook that ends it with its
//! environment. The top of the JS-thread runtime: it puts the rest of this folder together.

use super::outcome::Queue;
use super::responder::JsCalls;
use super::settle::Completer;
use super::teardown;
use super::thread::{Hook, JsThread};
use crate::binding::error::Result;
use crate::binding::sys::env::{Env as JsEnv, Scope};
use crate::core::front::connection::LockConnection;
use napi::bindgen_prelude::{Env, Function};
use napi_derive::napi;
use std::rc::Rc;
use std::sync::Arc;

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
        let queue = Arc::new(Queue::default());
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
    /// How calls of this thread on `connection` are answered.
    pub fn calls(&self, connection: &LockConnection) -> JsCalls {
        JsCalls::new(connection, self.completer(), self.thread.clone())
    }

    pub fn completer(&self) -> Completer {
        self.completer.clone()
    }

    pub fn thread(&self) -> &Rc<JsThread> {
        &self.thread
    }
}
