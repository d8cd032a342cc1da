//! String commands: GET, SET with its options, INCR and INCRBY.

use super::keyspace::{command_name, syntax_error, Data, Entry, Keyspace};
use super::number::parse_i64;
use super::reply::{MemoryReply, NOT_INTEGER, WRONGTYPE};

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
        match self.live(key) {
            None => MemoryReply::Nil,
            Some(Entry {
                data: Data::Str(value),
                ..
            }) => MemoryReply::Bulk(value.clone()),
            Some(_) => MemoryReply::error(WRONGTYPE),
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
            // Uppercased on the stack: SET NX PX runs in every acquisition.
            let mut buf = [0; 32];
            let option = command_name(options[i], &mut buf);
            match &*option {
                "NX" if !xx => nx = true,
                "XX" if !nx => xx = true,
                "GET" => get = true,
                "KEEPTTL" if !has_expiry => {
                    has_expiry = true;
                    expiry = Expiry::Keep;
                }
                "EX" | "PX" | "EXAT" | "PXAT" if !has_expiry && i + 1 < options.len() => {
                    has_expiry = true;
                    i += 1;
                    let Some(amount) = parse_i64(options[i]) else {
                        return MemoryReply::error(NOT_INTEGER);
                    };
                    match self.expiry_at(&option, amount) {
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
        let current = self
            .live(key)
            .map(|entry| (entry.data.clone(), entry.expire_at));
        let old = match &current {
            Some((Data::Str(old), _)) => MemoryReply::Bulk(old.clone()),
            Some(_) if get => return MemoryReply::error(WRONGTYPE),
            _ => MemoryReply::Nil,
        };
        let blocked = (nx && current.is_some()) || (xx && current.is_none());
        if !blocked {
            let expire_at = match expiry {
                Expiry::Clear => None,
                Expiry::Keep => current.and_then(|(_, at)| at),
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
        let (current, expire_at) = match self.live(key) {
            None => (0, None),
            Some(Entry {
                data: Data::Str(value),
                expire_at,
            }) => match parse_i64(value) {
                Some(current) => (current, *expire_at),
                None => return MemoryReply::error(NOT_INTEGER),
            },
            Some(_) => return MemoryReply::error(WRONGTYPE),
        };
        let Some(next) = current.checked_add(by) else {
            return MemoryReply::error("ERR increment or decrement would overflow");
        };
        self.insert(
            key,
            Entry {
                data: Data::Str(next.to_string().into_bytes()),
                expire_at,
            },
        );
        MemoryReply::Int(next)
    }
}
