//! Locking that cannot panic.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, recovering it if a thread panicked while holding it. Everything we keep
/// behind a mutex is plain data updated in single statements (an Option, a map, a queue, a
/// few flags), so a poisoned value is still consistent, and a panic must not spread into
/// every later call, let alone into Node.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
