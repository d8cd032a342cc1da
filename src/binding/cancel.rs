use crate::core::basics::cancel::Cancel;
use napi_derive::napi;
use tokio_util::sync::CancellationToken;

/// The native end of an AbortSignal: the JS layer calls `cancel()` from the signal's `abort`
/// listener, and every wait that took this token stops sleeping at once.
#[napi]
#[derive(Default)]
pub struct NativeCancel {
    pub(crate) token: CancellationToken,
}

#[napi]
impl NativeCancel {
    #[napi(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    #[napi]
    pub fn cancel(&self) {
        self.token.cancel();
    }
}

/// What a call's optional signal gives the core: its token, or none to watch.
pub(crate) fn signal(cancel: Option<&NativeCancel>) -> Cancel {
    cancel.map_or_else(Cancel::never, |c| c.token.clone().into())
}
