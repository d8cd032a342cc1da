use crate::core::error::LockError;
use crate::core::watchdog::Sink;
use napi::bindgen_prelude::FnArgs;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `(event, code, message)` as the JS layer's listener receives them.
pub type EventArgs = FnArgs<(String, Option<String>, Option<String>)>;

/// Weak: a pending event never keeps Node alive; liveness is the JS layer's keep-alive timer,
/// which mirrors the original's interval.
pub type EventFn = ThreadsafeFunction<EventArgs, (), EventArgs, Status, false, true>;

/// Delivers watchdog news to JavaScript. `refreshed` crosses into JS only while someone
/// listens for it, so 10,000 held locks cost no JS work per tick.
pub struct JsSink {
    pub callback: EventFn,
    pub want_refreshed: Arc<AtomicBool>,
}

impl JsSink {
    pub fn lost(&self, error: LockError) {
        self.send("lost", Some(error.code().into()), Some(error.to_string()));
    }

    fn send(&self, event: &str, code: Option<String>, message: Option<String>) {
        // A closing environment refuses the call; nobody is left to tell, so that is fine.
        let _status = self.callback.call(
            (event.to_owned(), code, message).into(),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    }
}

impl Sink for JsSink {
    fn refreshed(&self, _sent: std::time::Instant, _ttl: std::time::Duration) {
        if self.want_refreshed.load(Ordering::Relaxed) {
            self.send("refreshed", None, None);
        }
    }

    fn lost(&self, error: LockError) {
        JsSink::lost(self, error);
    }
}
