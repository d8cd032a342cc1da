//! A connection as the fronts take it: found (or opened) once for its address and handed to
//! every lock made on it, so that making a lock sets nothing up that the address already has.

use crate::core::backend::endpoint::Endpoint;
use crate::core::ops::store::Store;
use crate::core::ops::watchdog::{Stats, Watchdog};
use std::sync::Arc;

#[derive(Clone)]
pub struct LockConnection {
    store: Arc<Store>,
}

impl LockConnection {
    /// The connection to `endpoint`: the one already open to it, if any (see `Store::shared`).
    pub fn open(endpoint: Endpoint) -> LockConnection {
        LockConnection {
            store: Store::shared(endpoint),
        }
    }

    pub(crate) fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn endpoint(&self) -> &Endpoint {
        self.store.endpoint()
    }

    /// The same number for every `LockConnection` of one open connection, and for no other
    /// while it is open.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.store) as usize
    }

    /// What the refreshes of this connection have cost so far (for tests and benchmarks).
    pub fn watchdog_stats(&self) -> Stats {
        Watchdog::of(&self.store).stats()
    }
}
