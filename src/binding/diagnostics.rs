use super::error::{OrThrow, Result};
use super::options::ConnectionOptions;
use crate::core::ops::store::Store;
use crate::core::ops::watchdog::Watchdog;
use napi::bindgen_prelude::Env;
use napi_derive::napi;

/// What the refreshes of one connection have cost so far (for tests and benchmarks).
#[napi(object)]
pub struct WatchdogStats {
    /// Pipelines sent: one round trip each.
    pub pipelines: f64,
    /// Refresh commands inside them.
    pub refreshes: f64,
    /// Locks being kept alive now.
    pub watched: f64,
    /// Entries the scheduler looked at so far: grows with the locks started, stopped and
    /// refreshed, not with the number held.
    pub visited: f64,
}

#[napi]
pub fn watchdog_stats(env: Env, connection: ConnectionOptions) -> Result<WatchdogStats> {
    let store = Store::shared(connection.endpoint().or_throw(&env)?);
    let stats = Watchdog::of(&store).stats();
    Ok(WatchdogStats {
        pipelines: stats.pipelines as f64,
        refreshes: stats.refreshes as f64,
        watched: stats.watched as f64,
        visited: stats.visited as f64,
    })
}

/// Returns the memory the allocator holds free to the system now, as V8's `gc()` does for
/// the JS heap; it would otherwise keep it for later. For benchmarks that read RSS
/// (scenario e of bench/).
#[napi]
pub fn collect_native_memory() {
    super::sys::memory::give_back_freed();
}
