//! A caller's way to give up on a call: the token its AbortSignal cancels, when it gave one.

use tokio_util::sync::CancellationToken;

/// The token of the caller's signal, or none. Most calls come without a signal, and a token
/// made for each of them (an allocation, and a lock taken on every clone and drop) was a
/// measurable share of a `memory://` acquire.
#[derive(Clone, Default, Debug)]
pub struct Cancel(Option<CancellationToken>);

impl Cancel {
    /// A call no signal can end.
    pub fn never() -> Self {
        Cancel(None)
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.as_ref().is_some_and(CancellationToken::is_cancelled)
    }

    /// Resolves once cancelled; never without a signal.
    pub async fn cancelled(&self) {
        match &self.0 {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
impl Cancel {
    /// A signal a test gives, then cancels as the caller's would.
    pub fn signal() -> Self {
        Cancel(Some(CancellationToken::new()))
    }

    pub fn cancel(&self) {
        let Some(token) = &self.0 else {
            panic!("a test cancelled a call it gave no signal (Cancel::signal)");
        };
        token.cancel();
    }
}

impl From<CancellationToken> for Cancel {
    fn from(token: CancellationToken) -> Self {
        Cancel(Some(token))
    }
}

/// The engine's callers (its tests among them) pass the token they keep to cancel with.
impl From<&CancellationToken> for Cancel {
    fn from(token: &CancellationToken) -> Self {
        Cancel(Some(token.clone()))
    }
}
