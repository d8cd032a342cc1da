//! One small named runtime for the whole process, built when the addon first loads and never
//! shut down. napi-rs's runtime (its `tokio_rt` feature, not enabled) is shut down when the
//! last JS environment using the addon ends (in a process whose main thread never loads it,
//! once its workers are gone): the releases of those workers' locks would stop mid-way, and a
//! worker started later would find its calls on a dead runtime, their timeouts never firing.
//! One worker is enough: every Redis call is I/O on a multiplexed socket, and on a 2-core
//! machine a second worker only competes with Node and Redis for the CPU.

use crate::core::basics::sync::lock;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Wake, Waker};
use tokio::runtime::{Handle, Runtime};

static RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();

#[napi_derive::module_init]
fn init() {
    // Node unloads an addon with the last worker that loaded it, while our runtime's thread
    // runs its code: the image stays mapped for the process.
    napi::bindgen_prelude::retain_current_module_for_unload_safety();
    if let Some(runtime) = runtime() {
        crate::core::basics::background::install(runtime.handle().clone());
    }
}

/// The process's runtime; `None` only if the OS refused every thread to run it on.
fn runtime() -> Option<&'static Runtime> {
    RUNTIME.get_or_init(build).as_ref()
}

fn build() -> Option<Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(1)
        .thread_name("native-redis-lock")
        .enable_all();
    // With the LIFO slot, the connection's writer task runs right after each call that woke
    // it and writes one command per syscall; without it, the calls that are ready run first
    // and the writer sends them in one write (bench (b): +20 % pairs/s, -20 % CPU per pair).
    // The switch is tokio-unstable, enabled in .cargo/config.toml.
    #[cfg(tokio_unstable)]
    builder.disable_lifo_slot();
    builder.build().ok()
}

/// Runs `work` on the runtime; gives it back if there is none (the caller answers without it).
pub fn spawn<F>(work: F) -> Result<(), F>
where
    F: Future<Output = ()> + Send + 'static,
{
    match runtime() {
        Some(runtime) => {
            runtime.spawn(work);
            Ok(())
        }
        None => Err(work),
    }
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// `spawn`, but polled once on the calling thread first: work that starts by sleeping
/// (registering a timer, a wake-up) then reaches the runtime only once something wakes it,
/// and is spawned from there. Spawning from another thread wakes the runtime's thread at
/// once: with Node, Redis and that thread on one core, a context switch each way per call.
/// (A timer registered here still wakes the runtime's driver when it is the earliest one.)
/// `register` is handed the task's `Unstarted` before that first poll.
pub fn start_here<F>(work: F, register: impl FnOnce(Unstarted)) -> Result<(), F>
where
    F: Future<Output = ()> + Send + 'static,
{
    let Some(runtime) = runtime() else {
        return Err(work);
    };
    // Timers and I/O registered by the first poll belong to the runtime.
    let _context = runtime.enter();
    let mut task: Task = Box::pin(work);
    let parked = Arc::new(Parked {
        slot: Mutex::new(Waiting::default()),
        runtime: runtime.handle().clone(),
    });
    register(Unstarted(parked.clone()));
    let waker = Waker::from(parked.clone());
    if task
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_ready()
    {
        return Ok(());
    }
    // A wake during that poll found no task to move; one after this finds it parked.
    let mut slot = lock(&parked.slot);
    if slot.woken {
        drop(slot);
        parked.runtime.spawn(task);
    } else {
        slot.task = Some(task);
    }
    Ok(())
}

/// A task started by `start_here`, for as long as it has not reached the runtime.
/// Holds its `Parked` (the slot, not the task, once a wake moved that to the runtime), so
/// that a task a release dropped unrun is known so until its call's answer asks.
pub struct Unstarted(Arc<Parked>);

impl Unstarted {
    /// Drops the task if no wake has moved it to the runtime yet (its end is then never
    /// heard of); `false` when it is there, or over.
    pub fn drop_task(&self) -> bool {
        let parked = &self.0;
        let task = {
            let mut slot = lock(&parked.slot);
            // A release that answered its call in place took it and dropped it already.
            if slot.dropped {
                return true;
            }
            slot.task.take()
        };
        // A wake that took it first is moving it to the runtime.
        let Some(task) = task else {
            return false;
        };
        parked.drop_unrun(task);
        true
    }

    /// Takes the task while it waits parked: no wake moves it to the runtime until the
    /// `Claimed` is dropped (it then goes there) or dropped unrun. `None` when a wake moved it
    /// there already, or it is over.
    pub fn claim(&self) -> Option<Claimed> {
        let task = lock(&self.0.slot).task.take()?;
        Some(Claimed {
            task: Some(task),
            parked: self.0.clone(),
        })
    }
}

/// A parked task taken by `Unstarted::claim`; dropped, it is started on the runtime, as the
/// wake it may have missed meanwhile would have.
pub struct Claimed {
    task: Option<Task>,
    parked: Arc<Parked>,
}

impl Claimed {
    /// Its call was answered without it: dropped unrun, and `drop_task` says so after.
    pub fn drop_unrun(mut self) {
        lock(&self.parked.slot).dropped = true;
        if let Some(task) = self.task.take() {
            self.parked.drop_unrun(task);
        }
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            self.parked.runtime.spawn(task);
        }
    }
}

/// A task polled outside the runtime, until a wake moves it there.
struct Parked {
    slot: Mutex<Waiting>,
    runtime: Handle,
}

/// Whether a wake came, and the task while it waits: under one lock, so that a wake and
/// `start_here` parking the task after its first poll cannot miss each other.
#[derive(Default)]
struct Waiting {
    task: Option<Task>,
    woken: bool,
    /// A release answered its call in place and dropped the task (`Claimed::drop_unrun`).
    dropped: bool,
}

impl Parked {
    fn drop_unrun(&self, task: Task) {
        // Its timers are the runtime's to cancel.
        let _context = self.runtime.enter();
        drop(task);
    }
}

impl Wake for Parked {
    fn wake(self: Arc<Self>) {
        let task = {
            let mut slot = lock(&self.slot);
            slot.woken = true;
            slot.task.take()
        };
        if let Some(task) = task {
            self.runtime.spawn(task);
        }
    }
}

#[cfg(test)]
#[path = "runtime_tests.rs"]
mod tests;
