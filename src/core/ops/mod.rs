//! The lock operations: acquire, wait, hand over, release, refresh, and the scripts that do
//! each atomically in Redis.

pub mod acquire;
pub mod again;
pub mod attempt;
pub mod claims;
pub mod closing;
pub mod delivery;
pub mod direct;
#[cfg(test)]
mod dropped_stragglers_tests;
pub mod exclusive;
pub mod fast;
pub mod holder;
pub mod inline;
pub mod kept_fences;
pub mod key_scheme;
pub mod lock;
pub mod orphan;
pub mod pair;
pub mod passing;
pub mod pause;
pub mod release;
pub mod release_by_id;
#[cfg(test)]
mod reserved_down_tests;
pub mod route;
pub mod schedule;
pub use crate::core::proto::scripts;
pub mod signals;
pub mod store;
pub mod store_cleanup;
pub mod syncguard;
pub mod tenure;
#[cfg(test)]
pub(crate) mod test_support;
pub mod watchdog;
pub mod watched;
