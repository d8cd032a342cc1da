//! Background work of the engine (freeing a lock nobody will use, passing a wake on) can be
//! started on a thread outside the runtime: a waiter that won on the caller's own connection
//! is dropped there. The runtime installed here runs it; inside the runtime, the current one.

use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Handle;

static RUNTIME: OnceLock<Handle> = OnceLock::new();

/// The runtime that runs background work started outside any runtime; the first one stays.
pub fn install(runtime: Handle) {
    let _first = RUNTIME.set(runtime);
}

pub fn spawn(work: impl Future<Output = ()> + Send + 'static) {
    if let Ok(runtime) = Handle::try_current() {
        runtime.spawn(work);
    } else if let Some(runtime) = RUNTIME.get() {
        runtime.spawn(work);
    }
}

/// Runs `work` inside a runtime: the current one, or the installed one when called from
/// outside any (the JS thread, answering a call its own connection carried), so that what
/// `work` starts (a watchdog's scheduler, a release in the background) has one to run on.
pub fn within<T>(work: impl FnOnce() -> T) -> T {
    let _entered = match (Handle::try_current(), RUNTIME.get()) {
        (Err(_), Some(runtime)) => Some(runtime.enter()),
        _ => None,
    };
    work()
}
