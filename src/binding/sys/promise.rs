//! Promises made natively and settled later, by whoever keeps their `Deferred`.

use super::env::{checked, Made, Scope, Value};
use napi::bindgen_prelude::PromiseRaw;
use napi::sys;
use std::ptr;

/// What settles one promise. Not `Clone`: settled once (dropped unsettled, Node frees it
/// with the environment).
pub struct Deferred(sys::napi_deferred);

impl<'s> Scope<'s> {
    /// A pending promise, and what settles it.
    pub fn promise(&self) -> Made<(Deferred, PromiseRaw<'s, ()>)> {
        let env = self.env().raw();
        let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: on this scope's thread, inside it; the out-pointers are locals.
        checked(unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) })?;
        Ok((Deferred(deferred), PromiseRaw::new(env, promise)))
    }
}

impl Deferred {
    /// Resolves (`Ok`) or rejects (`Err`) the promise with a value of `scope`.
    pub fn settle<'s>(self, scope: &Scope<'s>, value: Result<Value<'s>, Value<'s>>) -> Made<()> {
        let env = scope.env().raw();
        // SAFETY: a pending deferred of this env, settled once (this consumes it), on its
        // thread, with a value of the scope.
        checked(unsafe {
            match value {
                Ok(value) => sys::napi_resolve_deferred(env, self.0, value.raw()),
                Err(error) => sys::napi_reject_deferred(env, self.0, error.raw()),
            }
        })
    }
}
