//! `npx native-redis-lock watch`'s request and our processes' answer (issue 27): a connection
//! subscribes to `CHANNEL` with its first waiter's subscription (`backend/link.rs`); a watch
//! publishes a request there each frame, and each store that heard it publishes its per-key
//! counts (`basics/key_counts.rs`) on the channel the request names.
//!
//! Request, one line each: `1`, the request's id, the reply channel, the key pattern
//! (Redis's glob; empty for every key). Answer, JSON: `{"v":1,"id","process","pid",
//! "session","keys":[[key, handedOver, woken], ...],"others":[handedOver, woken]}`, totals
//! since `session` began; `process` names the store that answers.
//!
//! Anyone who may PUBLISH on the server can send a request: one out of bounds is dropped
//! unread, and the answer goes only to a channel of `REPLY_PREFIX`, never to a lock's.

use super::{int, Op, Wire};
use crate::core::basics::error::LockError;
use crate::core::basics::key_counts::KeyTally;
use redis::Value;
use std::fmt::Write;

pub use crate::core::basics::key_counts::CHANNEL;

/// The requests this version reads: any other is ignored.
const VERSION: &[u8] = b"1";

/// Where every answer goes: a watch's reply channel starts so (`lib/cli/watch-answers.js`),
/// and no channel of a lock does, whose message would wake its waiters.
pub const REPLY_PREFIX: &[u8] = b"native-redis-lock:watch:reply:";

/// The longest pattern, id and reply channel read: each is copied, and the pattern run against
/// every key counted.
const MAX_PATTERN: usize = 256;
const MAX_ID: usize = 64;
const MAX_REPLY_TO: usize = 128;

/// A watch's request, read from its message.
#[derive(Debug, PartialEq, Eq)]
pub struct WatchRequest<'a> {
    pub id: &'a [u8],
    pub reply_to: &'a [u8],
    pub pattern: &'a [u8],
}

impl<'a> WatchRequest<'a> {
    /// `None` for anything but a request of this version with an id and a reply channel of
    /// `REPLY_PREFIX`, each within its bound and free of control bytes.
    pub fn parse(payload: &'a [u8]) -> Option<Self> {
        let mut lines = payload.splitn(4, |&b| b == b'\n');
        if lines.next()? != VERSION {
            return None;
        }
        let fits =
            |part: &[u8], max: usize| part.len() <= max && !part.iter().any(u8::is_ascii_control);
        let id = lines
            .next()
            .filter(|id| !id.is_empty() && fits(id, MAX_ID))?;
        let reply_to = lines.next().filter(|to| {
            to.len() > REPLY_PREFIX.len() && to.starts_with(REPLY_PREFIX) && fits(to, MAX_REPLY_TO)
        })?;
        let pattern = lines.next().unwrap_or_default();
        if !fits(pattern, MAX_PATTERN) {
            return None;
        }
        Some(WatchRequest {
            id,
            reply_to,
            pattern,
        })
    }
}

/// The answer's JSON, naming this process by `process` (random, made once) and its pid.
pub fn answer(id: &[u8], process: &str, tally: &KeyTally) -> Vec<u8> {
    let mut out = String::with_capacity(96 + tally.keys.len() * 48);
    out.push_str("{\"v\":1,\"id\":");
    json_string(&mut out, &String::from_utf8_lossy(id));
    out.push_str(",\"process\":");
    json_string(&mut out, process);
    let _infallible = write!(
        out,
        ",\"pid\":{},\"session\":{},\"keys\":[",
        std::process::id(),
        tally.session
    );
    for (n, (key, counts)) in tally.keys.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push('[');
        json_string(&mut out, &String::from_utf8_lossy(key));
        let _infallible = write!(out, ",{},{}]", counts.handed_over, counts.woken);
    }
    let others = tally.others;
    let _infallible = write!(
        out,
        "],\"others\":[{},{}]}}",
        others.handed_over, others.woken
    );
    out.into_bytes()
}

/// `text` as a JSON string: quotes, backslashes and control characters escaped.
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _infallible = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// PUBLISH of an answer; its reply, how many received it, is of no use.
pub struct Publish<'a> {
    pub channel: &'a [u8],
    pub payload: &'a [u8],
}

impl Op for Publish<'_> {
    type Out = i64;

    fn encode<W: Wire>(&self, wire: &mut W) {
        wire.command(&[b"PUBLISH", self.channel, self.payload]);
    }

    fn decode(&self, reply: Value) -> Result<i64, LockError> {
        int(reply)
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
