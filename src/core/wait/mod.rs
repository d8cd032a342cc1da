//! Who waits for which lock, on whose behalf: waiters, tickets and wake tables, lent leases,
//! owners. Plain state and no I/O: what a departing waiter leaves to do (free a lock handed to
//! it, pass a wake on) is queued as a `Cleanup` for the operations layer to carry out.

pub mod cleanup;
pub mod lent;
pub mod owner;
pub mod releases;
pub mod tenure;
pub mod waiter;
pub mod wake;
