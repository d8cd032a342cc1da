//! `NativeSyncguardEval`: for lib/syncguard/eval-transport.js, each backend call's script
//! call (text, keys, args) to hand to the user's `eval`, and what that `eval` answered read
//! by the core (core::front::syncguard_eval). Converts only; synchronous, nothing connects.

use super::error::{OrThrow, Result};
use super::syncguard::{call_of, SyncguardCallKeys, SyncguardOptions};
use crate::core::api::{EvalCall, EvalWon, SyncguardEval};
use napi::bindgen_prelude::Env;
use napi_derive::napi;
use redis::Value;

/// One script call: `eval(script, keys.length, ...keys, ...args)`.
#[napi(object)]
pub struct SyncguardEvalCall {
    pub script: String,
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

/// What the user's `eval` answered, as JS tagged it: an integer, a text, an array, `other`
/// (anything else, shown) or, with none of them, nothing (null).
#[napi(object)]
pub struct SyncguardEvalReply {
    pub int: Option<f64>,
    pub bulk: Option<String>,
    pub items: Option<Vec<SyncguardEvalReply>>,
    pub other: Option<String>,
}

fn value(reply: SyncguardEvalReply) -> Value {
    match reply {
        SyncguardEvalReply { int: Some(n), .. } => Value::Int(n as i64),
        SyncguardEvalReply {
            bulk: Some(text), ..
        } => Value::BulkString(text.into_bytes()),
        SyncguardEvalReply {
            items: Some(items), ..
        } => Value::Array(items.into_iter().map(value).collect()),
        SyncguardEvalReply {
            other: Some(shown), ..
        } => Value::SimpleString(shown),
        _ => Value::Nil,
    }
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}

fn js_call(call: EvalCall) -> SyncguardEvalCall {
    SyncguardEvalCall {
        script: call.script.to_owned(),
        keys: call.keys.into_iter().map(text).collect(),
        args: call.args.into_iter().map(text).collect(),
    }
}

fn won((fence, expires_at_ms): EvalWon) -> Vec<f64> {
    vec![fence as f64, expires_at_ms as f64]
}

#[napi]
pub struct NativeSyncguardEval {
    front: SyncguardEval,
}

#[napi]
impl NativeSyncguardEval {
    #[napi(constructor)]
    pub fn new(options: SyncguardOptions) -> Self {
        let front = SyncguardEval::new(options.key_prefix, options.cleanup_in_is_locked);
        NativeSyncguardEval { front }
    }

    #[napi]
    pub fn acquire(
        &self,
        env: Env,
        keys: SyncguardCallKeys,
        ttl_ms: f64,
    ) -> Result<SyncguardEvalCall> {
        self.front
            .acquire(&call_of(&keys), ttl_ms)
            .map(js_call)
            .or_throw(&env)
    }

    /// `[fence, expiresAtMs]`, or `null` when the key is held.
    #[napi(ts_return_type = "[number, number] | null")]
    pub fn acquired(
        &self,
        env: Env,
        keys: SyncguardCallKeys,
        ttl_ms: f64,
        reply: SyncguardEvalReply,
    ) -> Result<Option<Vec<f64>>> {
        let answer = self.front.acquired(&call_of(&keys), ttl_ms, value(reply));
        answer
            .map(|won_or_held| won_or_held.map(won))
            .or_throw(&env)
    }

    /// The release to send when the acquire's reply came past its bound, or `null`.
    #[napi]
    pub fn late_acquired(
        &self,
        env: Env,
        keys: SyncguardCallKeys,
        ttl_ms: f64,
        reply: SyncguardEvalReply,
    ) -> Result<Option<SyncguardEvalCall>> {
        let release = self
            .front
            .late_acquired(&call_of(&keys), ttl_ms, value(reply));
        release.map(|call| call.map(js_call)).or_throw(&env)
    }

    #[napi]
    pub fn release(
        &self,
        env: Env,
        index_key: String,
        lock_id: String,
    ) -> Result<SyncguardEvalCall> {
        self.front
            .release(index_key.as_bytes(), &lock_id)
            .map(js_call)
            .or_throw(&env)
    }

    /// syncguard's release code: 1, 0, -1 or -2.
    #[napi]
    pub fn released(
        &self,
        env: Env,
        index_key: String,
        lock_id: String,
        reply: SyncguardEvalReply,
    ) -> Result<f64> {
        let code = self
            .front
            .released(index_key.as_bytes(), &lock_id, value(reply));
        code.map(|code| code as f64).or_throw(&env)
    }

    #[napi]
    pub fn extend(
        &self,
        env: Env,
        index_key: String,
        lock_id: String,
        ttl_ms: f64,
    ) -> Result<SyncguardEvalCall> {
        let call = self.front.extend(index_key.as_bytes(), &lock_id, ttl_ms);
        call.map(js_call).or_throw(&env)
    }

    /// The new expiry (ms), or `null` when not extended.
    #[napi]
    pub fn extended(
        &self,
        env: Env,
        index_key: String,
        lock_id: String,
        ttl_ms: f64,
        reply: SyncguardEvalReply,
    ) -> Result<Option<f64>> {
        let expiry = self
            .front
            .extended(index_key.as_bytes(), &lock_id, ttl_ms, value(reply));
        expiry.map(|ms| ms.map(|ms| ms as f64)).or_throw(&env)
    }

    #[napi]
    pub fn is_locked(&self, env: Env, lock_key: String) -> Result<SyncguardEvalCall> {
        self.front
            .is_locked(lock_key.as_bytes())
            .map(js_call)
            .or_throw(&env)
    }

    #[napi]
    pub fn is_locked_reply(
        &self,
        env: Env,
        lock_key: String,
        reply: SyncguardEvalReply,
    ) -> Result<bool> {
        self.front
            .is_locked_reply(lock_key.as_bytes(), value(reply))
            .or_throw(&env)
    }

    #[napi]
    pub fn lookup_by_key(&self, env: Env, lock_key: String) -> Result<SyncguardEvalCall> {
        self.front
            .lookup(Some(lock_key.as_bytes()), None)
            .map(js_call)
            .or_throw(&env)
    }

    #[napi]
    pub fn lookup_by_id(
        &self,
        env: Env,
        index_key: String,
        lock_id: String,
    ) -> Result<SyncguardEvalCall> {
        let by_id = Some((index_key.as_bytes(), lock_id.as_str()));
        self.front.lookup(None, by_id).map(js_call).or_throw(&env)
    }

    /// The live record's JSON, or `null`.
    #[napi]
    pub fn looked_up_by_key(
        &self,
        env: Env,
        lock_key: String,
        reply: SyncguardEvalReply,
    ) -> Result<Option<String>> {
        let json = self
            .front
            .looked_up(Some(lock_key.as_bytes()), None, value(reply));
        json.map(|json| json.map(text)).or_throw(&env)
    }

    #[napi]
    pub fn looked_up_by_id(
        &self,
        env: Env,
        index_key: String,
        lock_id: String,
        reply: SyncguardEvalReply,
    ) -> Result<Option<String>> {
        let by_id = Some((index_key.as_bytes(), lock_id.as_str()));
        let json = self.front.looked_up(None, by_id, value(reply));
        json.map(|json| json.map(text)).or_throw(&env)
    }
}
