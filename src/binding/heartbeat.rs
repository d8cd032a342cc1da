use super::sys::env::Env as JsEnv;
use super::sys::timer::Timer;
use super::sys::uv::{self, EventLoop};
use crate::core::api::Heartbeat;
use napi::bindgen_prelude::Env;
use napi_derive::napi;
use std::cell::{Cell, OnceCell};
use std::rc::Rc;
use std::sync::Arc;

/// How often a held lock's JS thread proves it is alive.
const BEAT_MS: u64 = 100;

/// Proof of life from one JavaScript thread: a timer of that thread's own event loop beats
/// it while stall-guarded locks are held, natively (no JavaScript runs for it, so holding
/// locks costs the thread nothing). A blocked event loop stops the beats, and the watchdog
/// gives those locks up once the beats are older than `max_stall_ms`. The timer does not
/// keep the process alive.
#[napi]
pub struct NativeHeartbeat {
    pub(crate) inner: Arc<Heartbeat>,
    beater: Rc<Beater>,
}

/// The heartbeat's native timer and the count of stall-guarded locks it beats for. Shared
/// with the lock classes, whose hot calls apply their own changes to the count (see
/// `hold`), so a hold costs no call of its own.
pub struct Beater {
    heartbeat: Arc<Heartbeat>,
    event_loop: Option<EventLoop>,
    /// The timer, made on first use, beating the heartbeat it holds.
    timer: OnceCell<Timer<Arc<Heartbeat>>>,
    holders: Cell<u32>,
}

#[napi]
impl NativeHeartbeat {
    #[napi(constructor)]
    pub fn new(env: Env) -> Self {
        // No loop, no native timer: `hold` answers `false`, and the JS layer beats from its
        // own timer instead.
        let event_loop = JsEnv::of(&env).event_loop().ok();
        let inner = Arc::new(Heartbeat::default());
        let beater = Beater {
            heartbeat: inner.clone(),
            event_loop,
            timer: OnceCell::new(),
            holders: Cell::new(0),
        };
        NativeHeartbeat {
            inner,
            beater: Rc::new(beater),
        }
    }

    #[napi]
    pub fn beat(&self) {
        self.inner.beat();
    }

    /// One more (`delta` 1) or one fewer (-1) stall-guarded lock; 0 only asks. `false`
    /// when no native timer can beat (libuv not found): the JS layer then beats from its
    /// own timer.
    #[napi]
    pub fn hold(&self, delta: i32) -> bool {
        self.beater.hold(delta)
    }
}

impl NativeHeartbeat {
    pub(crate) fn beater(&self) -> Rc<Beater> {
        self.beater.clone()
    }
}

impl Beater {
    /// See `NativeHeartbeat::hold`. The timer is made by the first call, so a JS layer that
    /// asked with 0 knows that later changes, applied by other calls, will beat.
    pub fn hold(&self, delta: i32) -> bool {
        if !uv::available() || self.event_loop.is_none() {
            return false;
        }
        let Some(timer) = self.timer() else {
            return false;
        };
        let before = self.holders.get();
        let after = before.saturating_add_signed(delta);
        self.holders.set(after);
        if before == 0 && after > 0 {
            self.heartbeat.beat();
            if !timer.start(BEAT_MS, BEAT_MS) {
                // libuv refuses only a closing timer: the JS layer beats instead.
                return false;
            }
        } else if before > 0 && after == 0 {
            timer.stop();
        }
        true
    }

    fn timer(&self) -> Option<&Timer<Arc<Heartbeat>>> {
        if let Some(made) = self.timer.get() {
            return Some(made);
        }
        let made = Timer::new(self.event_loop?, self.heartbeat.clone(), |heartbeat| {
            heartbeat.beat()
        })?;
        Some(self.timer.get_or_init(|| made))
    }
}
