use crate::core::watchdog::Heartbeat;
use napi_derive::napi;
use std::sync::Arc;

/// Proof of life from one JavaScript thread. The JS layer beats it from a timer while it
/// holds stall-guarded locks; a blocked event loop stops the beats, and the watchdog gives
/// those locks up once the beats are older than `max_stall_ms`.
#[napi]
#[derive(Default)]
pub struct NativeHeartbeat {
    pub(crate) inner: Arc<Heartbeat>,
}

#[napi]
impl NativeHeartbeat {
    #[napi(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    #[napi]
    pub fn beat(&self) {
        self.inner.beat();
    }
}
