use super::error::{to_napi, Result};
use super::handle::NativeLockHandle;
use crate::core::error::LockError;
use crate::core::sync::lock;
use futures_util::FutureExt;
use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

/// How a call ended, as the JS layer settles its promise.
pub enum Outcome {
    Handle(NativeLockHandle),
    NoHandle,
    Bool(bool),
    Done,
    Failed(LockError),
}

/// One settled call; `error` is the encoded `[CODE ...] message` of a failure.
#[napi(object, object_from_js = false)]
pub struct Completion {
    pub id: u32,
    pub handle: Option<NativeLockHandle>,
    pub value: Option<bool>,
    pub error: Option<String>,
}

type Wake = ThreadsafeFunction<(), (), (), Status, false, true>;

struct Queue {
    done: Mutex<Vec<(u32, Outcome)>>,
    wake: Wake,
}

/// Settles the JS promises of many calls per wake-up of the JS thread. napi's own async
/// functions create a threadsafe function (a libuv handle) for every promise; on the hot
/// path that costs more than the Redis round trip. Here finished calls join one queue, and
/// the first to join wakes JS once to drain everything that finished meanwhile. The wake-up
/// is weak: the JS layer keeps the process alive while calls are pending.
#[napi]
pub struct NativeCompletions {
    completer: Completer,
}

/// The sending side, held by every native object that settles promises through the queue.
#[derive(Clone)]
pub struct Completer(Arc<Queue>);

#[napi]
impl NativeCompletions {
    /// `wake` is called (with no arguments) when completions are waiting in `drain()`.
    #[napi(constructor)]
    pub fn new(wake: Function<(), ()>) -> Result<Self> {
        let wake = wake
            .build_threadsafe_function::<()>()
            .weak::<true>()
            .build()?;
        Ok(NativeCompletions {
            completer: Completer(Arc::new(Queue {
                done: Mutex::new(Vec::new()),
                wake,
            })),
        })
    }

    /// Everything that finished since the last drain.
    #[napi]
    pub fn drain(&self) -> Vec<Completion> {
        let queue = &self.completer.0;
        let done = std::mem::take(&mut *lock(&queue.done));
        done.into_iter()
            .map(|(id, outcome)| {
                let mut completion = Completion {
                    id,
                    handle: None,
                    value: None,
                    error: None,
                };
                match outcome {
                    Outcome::Handle(handle) => completion.handle = Some(handle),
                    Outcome::NoHandle | Outcome::Done => {}
                    Outcome::Bool(value) => completion.value = Some(value),
                    Outcome::Failed(err) => completion.error = Some(to_napi(err).reason),
                }
                completion
            })
            .collect()
    }
}

impl NativeCompletions {
    pub fn completer(&self) -> Completer {
        self.completer.clone()
    }
}

impl Completer {
    /// Runs `work` on the runtime and queues its outcome under `id`.
    pub fn run<F>(&self, id: u32, work: F)
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let queue = self.0.clone();
        napi::bindgen_prelude::spawn(async move {
            // A panic must still settle the promise, or the caller would wait forever.
            let outcome = match AssertUnwindSafe(work).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(_) => Outcome::Failed(LockError::Internal("a lock operation panicked".into())),
            };
            let wake = {
                let mut done = lock(&queue.done);
                done.push((id, outcome));
                done.len() == 1
            };
            if wake {
                // A closing environment refuses the call; nobody is left to settle.
                let _status = queue.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
            }
        });
    }
}
