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
