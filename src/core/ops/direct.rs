//! The JS thread's own socket (see binding/js/socket), as the backend opens it (see
//! backend/direct.rs) with the scripts that thread sends already loaded, so that no lock's
//! TTL is counted from an EVALSHA that came back NOSCRIPT, and no call there is answered
//! NOSCRIPT and sent again through the runtime. Which scripts those are is the operations'
//! business, hence this file; the binding reaches the socket only through it.

use super::scripts;
use crate::core::backend::direct as socket;
use crate::core::backend::endpoint::{Address, Endpoint};
use crate::core::basics::error::LockError;

pub use socket::RETRY_AFTER;

/// Every script a fast call (fast/) may send by its hash: a first attempt (plain or
/// ExclusiveLock's), its release, a handover, an extend, syncguard's attempt and release by
/// lockId (what goes with no one to read its reply goes whole: proto/missed.rs, the undo of
/// a late win). A script missing here is refused there until the runtime happens to load it
/// (see fast/tests.rs).
pub(super) const SCRIPTS: [&str; 7] = [
    scripts::ACQUIRE_SOURCE,
    scripts::RELEASE_WAKE_SOURCE,
    scripts::RELEASE_SOURCE,
    scripts::HANDOFF_SOURCE,
    scripts::EXTEND_SOURCE,
    scripts::SG_ACQUIRE_SOURCE,
    scripts::SG_RELEASE_SOURCE,
];

/// The nodes of a Redlock at `endpoint`, each with a socket of its own on the JS thread
/// (empty for any other endpoint).
pub fn nodes(endpoint: &Endpoint) -> &[Endpoint] {
    match &endpoint.address {
        Address::Redlock(nodes) => nodes,
        _ => &[],
    }
}

/// A connected, ready socket in non-blocking mode, within the endpoint's connect timeout.
pub async fn open(endpoint: &Endpoint) -> Result<std::net::TcpStream, LockError> {
    socket::open(endpoint, &SCRIPTS).await
}
