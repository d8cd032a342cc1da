use super::sys::env::{ErrorClass, Made, Scope, Value};
use crate::core::basics::error::{InvalidKind, LockError};
use crate::core::basics::pace::GaveUp;
use napi::bindgen_prelude::Env;

pub type Result<T> = std::result::Result<T, napi::Error>;

/// The non-enumerable property that marks an error as made here, so that `lib/errors.js`
/// maps only ours by `code` and leaves alone a user's error that happens to share one.
const MARK: &std::ffi::CStr = c"nativeRedisLock";

/// The JS error users match on, made natively: an `Error` (a `TypeError` or `RangeError`
/// for bad input) whose `code` is the core's stable code, with what its class needs to be
/// rebuilt by `lib/errors.js` as properties: `argument` (EINVAL), `retriesAttempted`
/// (ELOCKED), `gaveUp`, `elapsedMs` and `attempts` (EGAVEUP: which of syncguard's endings)
/// and `key` (the lock it is about). `Err` with the status of the call Node
/// refused (its environment is going away, or an exception is pending).
pub fn js_error<'s>(scope: &Scope<'s>, err: &LockError) -> Made<Value<'s>> {
    let code = scope.string(err.code())?;
    let message = scope.string(&err.to_string())?;
    let class = match err {
        LockError::Invalid {
            kind: InvalidKind::Type,
            ..
        } => ErrorClass::TypeError,
        LockError::Invalid {
            kind: InvalidKind::Range,
            ..
        } => ErrorClass::RangeError,
        _ => ErrorClass::Error,
    };
    let value = scope.error(class, code, message)?;
    match err {
        LockError::Invalid { arg, .. } => {
            let argument = scope.string(arg)?;
            scope.set_named(value, c"argument", argument)?;
        }
        LockError::Locked { retries, .. } => {
            let retries_value = scope.uint32(*retries)?;
            scope.set_named(value, c"retriesAttempted", retries_value)?;
        }
        LockError::GaveUp(gave_up) => {
            let (why, elapsed_ms, attempts) = match *gave_up {
                GaveUp::TimedOut {
                    elapsed_ms,
                    attempts,
                } => ("timedOut", Some(elapsed_ms), Some(attempts)),
                GaveUp::Contention { attempts } => ("contention", None, Some(attempts)),
                GaveUp::NoTimeForRetry { elapsed_ms } => ("noTimeForRetry", Some(elapsed_ms), None),
            };
            let why = scope.string(why)?;
            scope.set_named(value, c"gaveUp", why)?;
            if let Some(ms) = elapsed_ms {
                let ms = scope.number(ms as f64)?;
                scope.set_named(value, c"elapsedMs", ms)?;
            }
            if let Some(count) = attempts {
                let count = scope.number(count as f64)?;
                scope.set_named(value, c"attempts", count)?;
            }
        }
        _ => {}
    }
    if let Some(key) = err.key() {
        let key = scope.string(key)?;
        scope.set_named(value, c"key", key)?;
    }
    let yes = scope.boolean(true)?;
    // Not enumerable: the mark never shows in a log, JSON or a deep comparison.
    scope.define_hidden(value, MARK, yes)?;
    Ok(value)
}

/// A core error as the error a #[napi] call throws: the JS error of `js_error`, thrown as
/// it is.
pub fn to_napi(env: &Env, err: LockError) -> napi::Error {
    let scope = Scope::of_call(env);
    match js_error(&scope, &err) {
        Ok(value) => scope.thrown(value),
        // Node refuses to make values only while its environment ends or an exception is
        // already pending; napi-rs then throws the pending one, or nothing can be thrown.
        Err(status) => napi::Error::new(napi::Status::from(status), err.to_string()),
    }
}

pub trait OrThrow<T> {
    /// The core's error, thrown in `env` as the JS error users match on (see `js_error`).
    fn or_throw(self, env: &Env) -> Result<T>;
}

impl<T> OrThrow<T> for std::result::Result<T, LockError> {
    fn or_throw(self, env: &Env) -> Result<T> {
        self.map_err(|err| to_napi(env, err))
    }
}
