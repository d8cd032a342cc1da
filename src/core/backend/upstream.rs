//! Where `Link` opens its connection: a fixed address, or the master a Sentinel set names
//! at the time (asked again when `Link` finds the connection stale).

use super::endpoint::{Address, Endpoint};
use super::sentinel::Resolver;
use super::staleness::Staleness;
use crate::core::basics::drops::Drops;
use crate::core::basics::error::LockError;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::time::Instant;

pub(super) enum Upstream {
    Fixed,
    Sentinel(Resolver),
}

impl Upstream {
    /// `stale` is marked, and `dropped` signalled, when a Sentinel set names another master
    /// than the one in use.
    pub(super) fn of(endpoint: &Endpoint, stale: Arc<Staleness>, dropped: Arc<Drops>) -> Upstream {
        match endpoint.address {
            Address::Sentinel { .. } => Upstream::Sentinel(Resolver::new(endpoint, stale, dropped)),
            _ => Upstream::Fixed,
        }
    }

    /// Whether the server behind the connection can change (a failover): a dropped,
    /// refused or READONLY connection is then a reason to ask where it went.
    pub(super) fn moves(&self) -> bool {
        matches!(self, Upstream::Sentinel(_))
    }

    /// A client for the server to use now, found before `deadline`. Boxed and type-erased:
    /// a Sentinel lookup's state would otherwise sit in every call's future (and its type in
    /// every caller's, past the compiler's recursion limit).
    pub(super) fn client<'a>(
        &'a self,
        endpoint: &'a Endpoint,
        resp3: bool,
        deadline: Instant,
    ) -> Pin<Box<dyn Future<Output = Result<redis::Client, LockError>> + Send + 'a>> {
        match self {
            Upstream::Fixed => Box::pin(std::future::ready(endpoint.client(resp3))),
            Upstream::Sentinel(resolver) => {
                Box::pin(async move { resolver.master(deadline).await?.client(resp3) })
            }
        }
    }

    /// Called on each use of a kept connection: a Sentinel set is asked again now and then.
    pub(super) fn used(&self) {
        if let Upstream::Sentinel(resolver) = self {
            resolver.recheck();
        }
    }
}
