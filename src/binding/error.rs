use crate::core::basics::error::{InvalidKind, LockError};
use napi::bindgen_prelude::{Env, Unknown};
use napi::sys;
use std::ptr;

pub type Result<T> = std::result::Result<T, napi::Error>;

/// The non-enumerable property that marks an error as made here, so that `lib/errors.js`
/// maps only ours by `code` and leaves alone a user's error that happens to share one.
const MARK: &std::ffi::CStr = c"nativeRedisLock";

/// A Node-API call's status as a `Result`, so that no status goes unread.
pub fn checked(status: sys::napi_status) -> std::result::Result<(), sys::napi_status> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(status)
    }
}

/// The JS error users match on, made natively: an `Error` (a `TypeError` or `RangeError`
/// for bad input) whose `code` is the core's stable code, with what its class needs to be
/// rebuilt by `lib/errors.js` as properties: `argument` (EINVAL), `retriesAttempted`
/// (ELOCKED) and `key` (the lock it is about). `Err` with the status of the call Node
/// refused (its environment is going away, or an exception is pending).
///
/// # Safety
/// On the JS thread of `env`, inside a napi callback or a handle scope.
pub unsafe fn js_error(
    env: sys::napi_env,
    err: &LockError,
) -> std::result::Result<sys::napi_value, sys::napi_status> {
    // SAFETY: the caller is on `env`'s thread with a scope open, which is all these calls
    // ask; every out-pointer is a local, and every name a NUL-terminated literal.
    unsafe {
        let code = string(env, err.code())?;
        let message = string(env, &err.to_string())?;
        let mut value = ptr::null_mut();
        checked(match err {
            LockError::Invalid {
                kind: InvalidKind::Type,
                ..
            } => sys::napi_create_type_error(env, code, message, &mut value),
            LockError::Invalid {
                kind: InvalidKind::Range,
                ..
            } => sys::napi_create_range_error(env, code, message, &mut value),
            _ => sys::napi_create_error(env, code, message, &mut value),
        })?;
        match err {
            LockError::Invalid { arg, .. } => {
                let argument = string(env, arg)?;
                checked(sys::napi_set_named_property(
                    env,
                    value,
                    c"argument".as_ptr(),
                    argument,
                ))?;
            }
            LockError::Locked { retries, .. } => {
                let mut retries_value = ptr::null_mut();
                checked(sys::napi_create_uint32(env, *retries, &mut retries_value))?;
                checked(sys::napi_set_named_property(
                    env,
                    value,
                    c"retriesAttempted".as_ptr(),
                    retries_value,
                ))?;
            }
            _ => {}
        }
        if let Some(key) = err.key() {
            let key = string(env, key)?;
            checked(sys::napi_set_named_property(
                env,
                value,
                c"key".as_ptr(),
                key,
            ))?;
        }
        let mut yes = ptr::null_mut();
        checked(sys::napi_get_boolean(env, true, &mut yes))?;
        let mark = sys::napi_property_descriptor {
            utf8name: MARK.as_ptr(),
            name: ptr::null_mut(),
            method: None,
            getter: None,
            setter: None,
            value: yes,
            // Not enumerable: the mark never shows in a log, JSON or a deep comparison.
            attributes: sys::PropertyAttributes::default,
            data: ptr::null_mut(),
        };
        checked(sys::napi_define_properties(env, value, 1, &mark))?;
        Ok(value)
    }
}

/// # Safety
/// On the JS thread of `env`, inside a napi callback or a handle scope.
unsafe fn string(
    env: sys::napi_env,
    text: &str,
) -> std::result::Result<sys::napi_value, sys::napi_status> {
    let mut value = ptr::null_mut();
    // SAFETY: as the caller promises; `text` is valid UTF-8 of the length given.
    checked(unsafe {
        sys::napi_create_string_utf8(env, text.as_ptr().cast(), text.len() as isize, &mut value)
    })?;
    Ok(value)
}

/// A core error as the error a #[napi] call throws: the JS error of `js_error`, which
/// napi-rs throws as it is (it keeps a reference to it, and reads it without running JS).
pub fn to_napi(env: &Env, err: LockError) -> napi::Error {
    // SAFETY: napi-rs hands an `Env` only to calls running on its JS thread, inside their
    // callback scope.
    match unsafe { js_error(env.raw(), &err) } {
        Ok(value) => {
            // SAFETY: a value just made in this environment, on its thread.
            let value = unsafe { Unknown::from_raw_unchecked(env.raw(), value) };
            napi::Error::from_unknown_without_coercion(value)
        }
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
