//! The end of a JS environment (a worker thread that ends or is terminated, the main thread
//! at exit). Its calls' promises can no longer settle, so what they still wait for must not
//! be won for it: one cleanup hook per environment closes its own connections and ends its
//! owner in the core (see core::owner), which stops its waits, takes its watched locks off
//! the watchdog and releases them. The hook waits for those releases, bounded: at the main
//! thread's exit the process ends right after, and an unsent release would leave the lock to
//! its TTL. The same holds for a grant being passed on (it would keep the lock for its claim),
//! so the hook also leaves the rings of locks nobody here waits for and lets those go out.

use super::outcome::Queue;
use super::socket;
use super::thread::JsThread;
use crate::binding::runtime;
use crate::binding::sys::env::Env;
use crate::core::api::{Owner, Store};
use crate::core::basics::validate::DEFAULT_COMMAND_TIMEOUT;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Weak;
use std::sync::Arc;
use std::time::Duration;

/// How long the hook waits for the releases beyond their own bound (see core::ops::orphan).
const SLACK: Duration = Duration::from_millis(100);

/// Ends `owner`, closes its answers' `queue` and frees the locks `thread` handed out in its
/// last loop turn when `env` goes away; `false` if Node refused the hook.
pub fn register(env: Env, ending: (Owner, Arc<Queue>, Weak<JsThread>)) -> bool {
    env.on_end(ending, |(owner, queue, thread)| {
        end(&owner, &queue, thread.upgrade().as_deref())
    })
}

/// Ends `owner`'s environment: its connections, its waits, its kept-alive locks; returns
/// once those locks are released (or their bound passed). On the environment's JS thread.
/// Later calls find nothing left to do.
pub fn end(owner: &Owner, queue: &Queue, thread: Option<&JsThread>) {
    // No panic may unwind into Node.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        socket::close_thread();
        let ending = owner.end();
        // After the owner ended: a lock won from now on is released where it is won (see
        // ops/delivery.rs); one won before and not yet delivered is freed as its answer is
        // forsaken, now or as it joins the closed queue.
        queue.close();
        // Handles settled in the last loop turn whose reactions may never have run.
        if let Some(thread) = thread {
            thread.end_claims();
        }
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let waited = runtime::spawn(async move {
            ending.await;
            Store::leave_all_rings(DEFAULT_COMMAND_TIMEOUT).await;
            let _ = done.send(());
        });
        // Without a runtime (the OS refused its thread) nothing was sent: no wait.
        if waited.is_ok() {
            let _ = finished.recv_timeout(DEFAULT_COMMAND_TIMEOUT + SLACK);
        }
    }));
}
