use super::direct::Settler;
use super::error::{to_napi, Result};
use super::handle::NativeLockHandle;
use crate::core::error::LockError;
use crate::core::sync::lock;
use futures_util::FutureExt;
use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{JsValue, Status};
use napi_derive::napi;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// How a call ended, as the JS layer settles its promise.
pub enum Outcome {
    Handle(NativeLockHandle),
    NoHandle,
    Bool(bool),
    Done,
    Inspected(Option<Inspection>),
    Failed(LockError),
}

/// What happened, in order: a call that ended (`id`), or news for a listener.
enum Entry {
    Settled(u32, Outcome),
    Event {
        listener: u32,
        event: &'static str,
        error: Option<LockError>,
    },
}

/// ExclusiveLock `inspect()`'s answer, in the original's field names.
#[napi(object)]
pub struct Inspection {
    #[napi(js_name = "lock_ttl_ms")]
    pub lock_ttl_ms: f64,
    #[napi(js_name = "lock_contents")]
    pub lock_contents: String,
}

/// One settled call (`id`; `error` is the encoded `[CODE ...] message` of a failure), or an
/// event for `listener` (`id` 0; a lost lock's error comes as `code` and `message`).
#[napi(object, object_from_js = false)]
pub struct Completion {
    pub id: u32,
    pub handle: Option<NativeLockHandle>,
    pub value: Option<bool>,
    pub inspection: Option<Inspection>,
    pub error: Option<String>,
    pub listener: Option<u32>,
    pub event: Option<String>,
    pub code: Option<String>,
    pub message: Option<String>,
}

type Wake = ThreadsafeFunction<(), (), (), Status, false, true>;

struct Queue {
    done: Mutex<Vec<Entry>>,
    wake: Wake,
}

/// Settles the JS promises of many calls per wake-up of the JS thread. napi's own async
/// functions create a threadsafe function (a libuv handle) for every promise; on the hot
/// path that costs more than the Redis round trip. Here finished calls join one queue, and
/// the first to join wakes JS once to drain everything that finished meanwhile. Watchdog
/// news for held locks travels the same queue (a threadsafe function per held lock would
/// cost kilobytes each), in order with the calls. The wake-up is weak: the JS layer keeps
/// the process alive while calls are pending or locks are held.
#[napi]
pub struct NativeCompletions {
    completer: Completer,
    /// Settles calls of the JS-thread connections from this thread's loop.
    settler: Option<Rc<Settler>>,
}

/// The sending side, held by every native object that settles promises through the queue.
#[derive(Clone)]
pub struct Completer(Arc<Queue>);

#[napi]
impl NativeCompletions {
    /// `wake` is called (with no arguments) when completions are waiting in `drain()`.
    #[napi(constructor)]
    pub fn new(wake: Function<(), ()>) -> Result<Self> {
        let drain = wake.value();
        // SAFETY: a constructor runs on the JS thread that owns `wake`.
        let settler = unsafe { super::direct::settler(drain.env, drain.value) };
        let wake = wake
            .build_threadsafe_function::<()>()
            .weak::<true>()
            .build()?;
        Ok(NativeCompletions {
            completer: Completer(Arc::new(Queue {
                done: Mutex::new(Vec::new()),
                wake,
            })),
            settler,
        })
    }

    /// Everything that finished since the last drain.
    #[napi]
    pub fn drain(&self) -> Vec<Completion> {
        let queue = &self.completer.0;
        let done = std::mem::take(&mut *lock(&queue.done));
        done.into_iter().map(completion).collect()
    }
}

impl NativeCompletions {
    pub fn completer(&self) -> Completer {
        self.completer.clone()
    }

    pub fn settler(&self) -> Option<&Rc<Settler>> {
        self.settler.as_ref()
    }
}

fn completion(entry: Entry) -> Completion {
    let mut completion = Completion {
        id: 0,
        handle: None,
        value: None,
        inspection: None,
        error: None,
        listener: None,
        event: None,
        code: None,
        message: None,
    };
    match entry {
        Entry::Settled(id, outcome) => {
            completion.id = id;
            match outcome {
                Outcome::Handle(handle) => completion.handle = Some(handle),
                Outcome::NoHandle | Outcome::Done => {}
                Outcome::Bool(value) => completion.value = Some(value),
                Outcome::Inspected(found) => completion.inspection = found,
                Outcome::Failed(err) => completion.error = Some(to_napi(err).reason),
            }
        }
        Entry::Event {
            listener,
            event,
            error,
        } => {
            completion.listener = Some(listener);
            completion.event = Some(event.to_owned());
            if let Some(err) = error {
                completion.code = Some(err.code().to_owned());
                completion.message = Some(err.to_string());
            }
        }
    }
    completion
}

impl Completer {
    /// Queues news for a JS listener (`refreshed`, or `lost` with its error).
    pub fn event(&self, listener: u32, event: &'static str, error: Option<LockError>) {
        self.push(Entry::Event {
            listener,
            event,
            error,
        });
    }

    /// Tells queues apart.
    pub fn address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Queues the outcome of call `id` without waking JS, for a caller on the JS thread
    /// that runs the drain itself right after (see binding/direct).
    pub fn settle_here(&self, id: u32, outcome: Outcome) {
        lock(&self.0.done).push(Entry::Settled(id, outcome));
    }

    fn push(&self, entry: Entry) {
        let queue = &self.0;
        let wake = {
            let mut done = lock(&queue.done);
            done.push(entry);
            done.len() == 1
        };
        if wake {
            // A closing environment refuses the call; nobody is left to settle.
            let _status = queue.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }

    /// Runs `work` on the runtime and queues its outcome under `id`.
    pub fn run<F>(&self, id: u32, work: F)
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        // Boxed first: an acquire's future is over 2 KB, and spawning moves the task by value
        // several times on the JS thread; a box moves as a pointer.
        let work = Box::pin(work);
        let completer = self.clone();
        napi::bindgen_prelude::spawn(async move {
            // A panic must still settle the promise, or the caller would wait forever.
            let outcome = match AssertUnwindSafe(work).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(_) => Outcome::Failed(LockError::Internal("a lock operation panicked".into())),
            };
            completer.push(Entry::Settled(id, outcome));
        });
    }
}
