//! String commands: GET, SET with its options, INCR and INCRBY.

use super::keyspace::{syntax_error, Data, Entry, Keyspace};
use super::number::parse_i64;
use super::reply::{MemoryReply, NOT_INTEGER, WRONGTYPE};
use crate::core::basics::resp::decimal;

enum Expiry {
    /// SET without an expiry option drops any TTL the key had.
    Clear,
    Keep,
    At(i64),
}

impl Keyspace {
    pub(super) fn get(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key] = args else {
            return MemoryReply::arity(name);
        };
        match self.peek(key) {
            Ok(Some(value)) => MemoryReply::Bulk(value.to_vec()),
            Ok(None) => MemoryReply::Nil,
            Err(wrong_type) => wrong_type,
        }
    }

    /// What GET reads at `key`, borrowed where it lies (a native form compares it, and
    /// needs no copy); `Err` with GET's error for a key of another type.
    pub(super) fn peek(&mut self, key: &[u8]) -> Result<Option<&[u8]>, MemoryReply> {
        match self.live(key) {
            None => Ok(None),
            Some(Entry {
                data: Data::Str(value),
                ..
            }) => Ok(Some(value)),
            Some(_) => Err(MemoryReply::error(WRONGTYPE)),
        }
    }

    /// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
    pub(super) fn set(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key, value, options @ ..] = args else {
            return MemoryReply::arity(name);
        };
        let (mut nx, mut xx, mut get) = (false, false, false);
        let mut expiry = Expiry::Clear;
        let mut has_expiry = false;
        let mut i = 0;
        while i < options.len() {
            // Compared in place, in any case: SET NX PX runs in every acquisition.
            match set_option(options[i]) {
                Some("NX") if !xx => nx = true,
                Some("XX") if !nx => xx = true,
                Some("GET") => get = true,
                Some("KEEPTTL") if !has_expiry => {
                    has_expiry = true;
                    expiry = Expiry::Keep;
                }
                Some(option @ ("EX" | "PX" | "EXAT" | "PXAT"))
                    if !has_expiry && i + 1 < options.len() =>
                {
                    has_expiry = true;
                    i += 1;
                    let Some(amount) = parse_i64(options[i]) else {
                        return MemoryReply::error(NOT_INTEGER);
                    };
                    match self.expiry_at(option, amount) {
                        Some(at) => expiry = Expiry::At(at),
                        None => {
                            return MemoryReply::error("ERR invalid expire time in 'set' command")
                        }
                    }
                }
                _ => return syntax_error(),
            }
            i += 1;
        }
        // What the key holds is copied only where the reply is it (GET).
        let (found, old) = match self.live(key) {
            None => (None, MemoryReply::Nil),
            Some(entry) => {
                let old = match &entry.data {
                    Data::Str(old) if get => MemoryReply::Bulk(old.clone()),
                    Data::Str(_) => MemoryReply::Nil,
                    _ if get => return MemoryReply::error(WRONGTYPE),
                    _ => MemoryReply::Nil,
                };
                (Some(entry.expire_at), old)
            }
        };
        let blocked = (nx && found.is_some()) || (xx && found.is_none());
        if !blocked {
            let expire_at = match expiry {
                Expiry::Clear => None,
                Expiry::Keep => found.flatten(),
                Expiry::At(at) => Some(at),
            };
            self.insert(
                key,
                Entry {
                    data: Data::Str(value.to_vec()),
                    expire_at,
                },
            );
        }
        match (get, blocked) {
            (true, _) => old,
            (false, true) => MemoryReply::Nil,
            (false, false) => MemoryReply::ok(),
        }
    }

    /// The absolute expiry an EX/PX/EXAT/PXAT amount names; `None` where Redis answers
    /// "invalid expire time".
    fn expiry_at(&mut self, option: &str, amount: i64) -> Option<i64> {
        if amount <= 0 {
            return None;
        }
        let now_ms = self.now().ms();
        match option {
            "EX" => amount.checked_mul(1000)?.checked_add(now_ms),
            "PX" => amount.checked_add(now_ms),
            "EXAT" => amount.checked_mul(1000),
            _ => Some(amount),
        }
    }

    /// INCR / DECR (`fixed`) and INCRBY. The TTL stays, as in Redis.
    pub(super) fn incr_by(
        &mut self,
        name: &str,
        args: &[&[u8]],
        fixed: Option<i64>,
    ) -> MemoryReply {
        let (key, by) = match (args, fixed) {
            ([key], Some(by)) => (key, by),
            ([key, by], None) => match parse_i64(by) {
                Some(by) => (key, by),
                None => return MemoryReply::error(NOT_INTEGER),
            },
            _ => return MemoryReply::arity(name),
        };
        let Some(entry) = self.live(key) else {
            let data = Data::Str(by.to_string().into_bytes());
            let expire_at = None;
            self.insert(key, Entry { data, expire_at });
            return MemoryReply::Int(by);
        };
        let Data::Str(value) = &mut entry.data else {
            return MemoryReply::error(WRONGTYPE);
        };
        let Some(current) = parse_i64(value) else {
            return MemoryReply::error(NOT_INTEGER);
        };
        let Some(next) = current.checked_add(by) else {
            return MemoryReply::error("ERR increment or decrement would overflow");
        };
        // Written over the old digits, in place: the key, its expiry and its room stay
        // (a fence counter is incremented by every acquisition).
        value.clear();
        if next < 0 {
            value.push(b'-');
        }
        value.extend_from_slice(decimal(next.unsigned_abs()).as_bytes());
        MemoryReply::Int(next)
    }
}

/// A SET option's name, in capitals, whatever case it came in.
fn set_option(arg: &[u8]) -> Option<&'static str> {
    const OPTIONS: [&str; 8] = ["NX", "XX", "GET", "KEEPTTL", "EX", "PX", "EXAT", "PXAT"];
    OPTIONS
        .into_iter()
        .find(|option| arg.eq_ignore_ascii_case(option.as_bytes()))
}
