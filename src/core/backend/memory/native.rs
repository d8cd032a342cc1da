//! The hottest scripts' second form on this keyspace: the same commands, in the same order,
//! sent from Rust rather than from Lua, whose calls into the keyspace (a string made per
//! argument and reply, and the garbage they leave) cost more than the commands themselves.
//! Which script runs natively is chosen here alone (`run`), by its SHA-1, once Redis would
//! run it (it is loaded); the Lua source stays what every other server runs, and
//! native_tests.rs proves both forms answer alike and leave the keyspace alike.
//! A native form answers only where its script would run to its end without an error: on
//! anything else (a key of the wrong type, arguments it was not written for) it declines,
//! before writing anything, and the script runs in Lua as ever, its error included.

use super::keyspace::Keyspace;
use super::number::parse_i64;
use super::reply::MemoryReply;
use crate::core::basics::token;
use crate::core::proto::scripts;
use std::sync::LazyLock;

/// A script's native form: its reply, or `None` to leave the call to the script.
pub type Form = fn(&mut Keyspace, &[&[u8]], &[&[u8]]) -> Option<MemoryReply>;

static FORMS: LazyLock<[(String, Form); 3]> = LazyLock::new(|| {
    [
        (scripts::RELEASE_WAKE.get_hash().to_owned(), release_wake),
        (scripts::RELEASE.get_hash().to_owned(), release),
        (scripts::ACQUIRE.get_hash().to_owned(), acquire),
    ]
});

/// Which script of `FORMS` `sha` (lowercase, as clients send it) is, if any: compared as
/// bytes, with no string made of them.
pub fn index(sha: &[u8]) -> Option<usize> {
    FORMS.iter().position(|(known, _)| known.as_bytes() == sha)
}

/// The native form of the script `sha` (see `index`), with its index. It runs on a
/// keyspace whose clock was read for it (`Keyspace::tick`).
pub fn form(sha: &[u8]) -> Option<(usize, Form)> {
    let at = index(sha)?;
    Some((at, FORMS[at].1))
}

/// What `redis.call` would hand the script: the reply, or `None` for an error (which the
/// script would raise).
fn call(keyspace: &mut Keyspace, args: &[&[u8]]) -> Option<MemoryReply> {
    match keyspace.execute(args) {
        MemoryReply::Error(_) => None,
        reply => Some(reply),
    }
}

/// Whether GET `key` answers `value` (a Lua comparison of the reply with the argument).
fn holds(keyspace: &mut Keyspace, key: &[u8], value: &[u8]) -> Option<bool> {
    // GET's read, compared where the value lies rather than copied into a reply.
    let held = keyspace.peek(key).ok()?;
    Some(held == Some(value))
}

/// An integer reply, as the scripts compare them.
fn int(reply: MemoryReply) -> Option<i64> {
    match reply {
        MemoryReply::Int(n) => Some(n),
        _ => None,
    }
}

/// release_wake.lua.
fn release_wake(keyspace: &mut Keyspace, keys: &[&[u8]], argv: &[&[u8]]) -> Option<MemoryReply> {
    let ([lock, queue], [token, channel, ours_wait]) = (keys, argv) else {
        return None;
    };
    if !holds(keyspace, lock, token)? {
        return Some(MemoryReply::Int(0));
    }
    keyspace.execute(&[b"DEL", lock]);
    if *ours_wait != b"1" {
        wake_first(keyspace, queue, channel);
    }
    Some(MemoryReply::Int(1))
}

/// announce.lua `wake_first`: every command it sends is a `pcall`, its errors read as
/// "nobody to wake".
fn wake_first(keyspace: &mut Keyspace, queue: &[u8], channel: &[u8]) -> bool {
    // The channel up to one byte past its tag, then `wake:`; after it, what follows
    // `released` (as the script's string.sub bounds read).
    let close = channel
        .iter()
        .position(|&byte| byte == b'}')
        .map_or(0, |at| at + 1);
    let before = &channel[..(close + 1).min(channel.len())];
    let after = channel.get(close + 9..).unwrap_or_default();
    loop {
        let MemoryReply::Array(popped) = keyspace.execute(&[b"ZPOPMIN", queue]) else {
            return false;
        };
        let Some(MemoryReply::Bulk(member)) = popped.into_iter().next() else {
            return false;
        };
        let Some(id) = member.strip_suffix(b"!") else {
            announce(keyspace, channel, &member);
            return true;
        };
        let own = [before, b"wake:", id, after].concat();
        if told(keyspace, &own, &member) > 0 {
            return true;
        }
    }
}

/// announce.lua `announce`.
fn announce(keyspace: &mut Keyspace, channel: &[u8], message: &[u8]) {
    if keyspace
        .execute(&[b"SPUBLISH", channel, message])
        .is_error()
    {
        keyspace.execute(&[b"PUBLISH", channel, message]);
    }
}

/// announce.lua `told`.
fn told(keyspace: &mut Keyspace, channel: &[u8], message: &[u8]) -> i64 {
    let mut heard = keyspace.execute(&[b"SPUBLISH", channel, message]);
    if heard.is_error() {
        heard = keyspace.execute(&[b"PUBLISH", channel, message]);
    }
    int(heard).unwrap_or(0)
}

/// release.lua: KEYS[1] the key holding our token, KEYS[2] (ExclusiveLock's) the lock key.
fn release(keyspace: &mut Keyspace, keys: &[&[u8]], argv: &[&[u8]]) -> Option<MemoryReply> {
    match (keys, argv) {
        ([owner], [token, ..]) => {
            if !holds(keyspace, owner, token)? {
                return Some(MemoryReply::Int(0));
            }
            call(keyspace, &[b"DEL", owner])
        }
        ([owner, lock], [token, value, rest @ ..]) => {
            let set_at = match rest {
                [] | [b""] => None,
                // Our own writes only (a decimal); Lua's tonumber reads more.
                [set_at] => Some(parse_i64(set_at)?),
                _ => return None,
            };
            if exclusive_ours(keyspace, lock, owner, value, token, set_at)? {
                keyspace.execute(&[b"DEL", lock, owner]);
                return Some(MemoryReply::Int(1));
            }
            if holds(keyspace, owner, token)? {
                keyspace.execute(&[b"DEL", owner]);
            }
            Some(MemoryReply::Int(0))
        }
        _ => None,
    }
}

/// same_expiry.lua `alike`.
fn alike(x: i64, y: i64) -> bool {
    if x < 0 || y < 0 {
        return x == y;
    }
    x.abs_diff(y) <= scripts::EXPIRY_SLACK_MS as u64
}

/// same_expiry.lua `same_expiry`: PEXPIRETIME is always known here.
fn same_expiry(keyspace: &mut Keyspace, a: &[u8], b: &[u8]) -> Option<bool> {
    let at = int(call(keyspace, &[b"PEXPIRETIME", a])?)?;
    let bt = int(call(keyspace, &[b"PEXPIRETIME", b])?)?;
    Some(alike(at, bt))
}

/// same_expiry.lua `exclusive_ours`; reads only.
fn exclusive_ours(
    keyspace: &mut Keyspace,
    lock: &[u8],
    owner: &[u8],
    value: &[u8],
    token: &[u8],
    set_at: Option<i64>,
) -> Option<bool> {
    if !holds(keyspace, lock, value)? {
        return Some(false);
    }
    let holder = call(keyspace, &[b"GET", owner])?;
    if matches!(&holder, MemoryReply::Bulk(held) if held == token) {
        return same_expiry(keyspace, lock, owner);
    }
    let Some(set_at) = set_at else {
        return Some(false);
    };
    let at = int(call(keyspace, &[b"PEXPIRETIME", lock])?)?;
    if at != set_at {
        return Some(false);
    }
    Some(matches!(holder, MemoryReply::Nil) || !same_expiry(keyspace, lock, owner)?)
}

/// fence.lua's `FENCE_MAX`.
const FENCE_MAX: i64 = token::FENCE_MAX as i64;
/// Below this, Lua's numbers (doubles) add a TTL and a window exactly.
const EXACT: i64 = 1 << 52;

/// acquire.lua, both layouts (DistributedLock's, and ExclusiveLock's with its owner key).
/// Declines, before it writes, where the script would give no fence (a counter that is not a
/// whole number with room for two more, or one too low for the attempt found set already):
/// the script's own way out (taking the lock back) stays its own.
fn acquire(keyspace: &mut Keyspace, keys: &[&[u8]], argv: &[&[u8]]) -> Option<MemoryReply> {
    let (lock, fence, owner, value, ttl, window, token) = match (keys, argv) {
        ([lock, fence], [value, ttl, window]) => (*lock, *fence, None, *value, ttl, *window, None),
        ([lock, fence, owner], [value, ttl, window, token]) => (
            *lock,
            *fence,
            Some(*owner),
            *value,
            ttl,
            *window,
            Some(*token),
        ),
        _ => return None,
    };
    let ttl = parse_i64(ttl).filter(|ttl| (1..EXACT).contains(ttl))?;
    // '-': the client knows the counter kept (ops/kept_fences.rs), so no upkeep at all.
    let window_ms = match window {
        b"-" => 0,
        _ => parse_i64(window).filter(|ms| (0..EXACT).contains(ms))?,
    };
    let counter = match call(keyspace, &[b"GET", fence])? {
        MemoryReply::Nil => 0,
        // parse_i64 reads only what fence.lua's pattern takes, bar a '-'.
        MemoryReply::Bulk(held) if held.len() <= 15 => parse_i64(&held).filter(|n| *n >= 0)?,
        _ => return None,
    };
    if counter > FENCE_MAX - 2 {
        return None;
    }
    // The same attempt again finds its value set, and reads its fence below the counter.
    let again =
        matches!(keyspace.execute(&[b"GET", lock]), MemoryReply::Bulk(held) if held == value);
    if again && counter < 2 {
        return None;
    }
    let fences = Fences {
        key: fence,
        ttl,
        window,
        window_ms,
    };
    // The one write a decline may follow: the script's first as well, and the same done
    // twice.
    if window == b"0" {
        call(keyspace, &[b"PERSIST", fence])?;
    }
    let (Some(owner), Some(token)) = (owner, token) else {
        let ttl = ttl.to_string();
        let set = call(
            keyspace,
            &[b"SET", lock, value, b"NX", b"PX", ttl.as_bytes()],
        )?;
        if set != MemoryReply::Nil {
            return Some(fences.numbered(keyspace));
        }
        if again {
            return Some(fences.drawn(keyspace, counter));
        }
        return holder_ttl(keyspace, lock);
    };
    let at = (keyspace.now().ms() + ttl).to_string();
    let set = call(
        keyspace,
        &[b"SET", lock, value, b"NX", b"PXAT", at.as_bytes()],
    )?;
    if set == MemoryReply::Nil {
        let ours = again && same_expiry(keyspace, lock, owner)?;
        if ours && holds(keyspace, owner, token).unwrap_or(false) {
            return Some(fences.drawn(keyspace, counter));
        }
        return holder_ttl(keyspace, lock);
    }
    let owned = keyspace.execute(&[b"SET", owner, token, b"PXAT", at.as_bytes()]);
    if owned.is_error() {
        return Some(owned);
    }
    Some(fences.numbered(keyspace))
}

/// acquire.lua's `{0, pttl}`: the lock someone else holds.
fn holder_ttl(keyspace: &mut Keyspace, lock: &[u8]) -> Option<MemoryReply> {
    let ttl = call(keyspace, &[b"PTTL", lock])?;
    Some(MemoryReply::Array(vec![MemoryReply::Int(0), ttl]))
}

/// An attempt's fence counter, its upkeep read as fence.lua's.
struct Fences<'a> {
    key: &'a [u8],
    ttl: i64,
    window: &'a [u8],
    window_ms: i64,
}

impl Fences<'_> {
    /// acquire.lua `numbered`: two fences drawn (the counter had room, see `acquire`). The
    /// lock is written: an error from here on is the reply, never a decline that would run
    /// the script on top of what was written.
    fn numbered(&self, keyspace: &mut Keyspace) -> MemoryReply {
        let after = match keyspace.execute(&[b"INCRBY", self.key, b"2"]) {
            MemoryReply::Int(after) => after,
            other => return failed(other),
        };
        self.kept(keyspace, after - 1)
    }

    /// acquire.lua `won_before`: the fence the same attempt drew (the counter is at least 2).
    fn drawn(&self, keyspace: &mut Keyspace, counter: i64) -> MemoryReply {
        self.kept(keyspace, counter - 1)
    }

    /// fence.lua `keep_fences`, then the attempt's `{1, fence}`.
    fn kept(&self, keyspace: &mut Keyspace, fence: i64) -> MemoryReply {
        if self.window != b"0" && self.window != b"-" {
            let want = self.ttl + self.window_ms;
            match keyspace.execute(&[b"PTTL", self.key]) {
                MemoryReply::Int(left) if left >= want + self.window_ms / 8 => {}
                MemoryReply::Int(_) => {
                    let push = (want + self.window_ms / 4).to_string();
                    let pushed = keyspace.execute(&[b"PEXPIRE", self.key, push.as_bytes()]);
                    if pushed.is_error() {
                        return pushed;
                    }
                }
                other => return failed(other),
            }
        }
        MemoryReply::Array(vec![MemoryReply::Int(1), MemoryReply::Int(fence)])
    }
}

/// A command's reply where a script's `redis.call` could not have gone on: its error, as
/// the script would have raised it (unreachable after `acquire`'s checks).
fn failed(reply: MemoryReply) -> MemoryReply {
    match reply {
        MemoryReply::Error(_) => reply,
        _ => MemoryReply::error("ERR unexpected reply in the memory:// backend"),
    }
}

#[cfg(test)]
#[path = "native_tests.rs"]
mod tests;
