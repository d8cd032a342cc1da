//! Locks handed to us that are being freed or passed on in the background, counted so that a
//! closing environment can wait for them (see closing.rs).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// Locks handed to us that are being freed or passed on in the background.
#[derive(Default)]
pub struct Passing {
    count: AtomicUsize,
    idle: Notify,
}

/// One freeing in flight; dropped once it is done (or abandoned).
pub struct PassingGuard(Arc<Passing>);

impl Drop for PassingGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Passing {
    pub fn start(self: &Arc<Self>) -> PassingGuard {
        self.count.fetch_add(1, Ordering::SeqCst);
        PassingGuard(self.clone())
    }

    /// Resolves once nothing is in flight.
    pub async fn settled(&self) {
        loop {
            let idle = self.idle.notified();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}
