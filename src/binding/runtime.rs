//! One small named runtime for the whole process, built when the addon first loads and never
//! shut down. napi-rs's runtime (its `tokio_rt` feature, not enabled) is shut down when the
//! last JS environment using the addon ends (in a process whose main thread never loads it,
//! once its workers are gone): the releases of those workers' locks would stop mid-way, and a
//! worker started later would find its calls on a dead runtime, their timeouts never firing.
//! One worker is enough: every Redis call is I/O on a multiplexed socket, and on a 2-core
//! machine a second worker only competes with Node and Redis for the CPU.

use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

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
