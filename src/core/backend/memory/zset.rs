//! The sorted-set commands (the set itself is in sorted_set.rs): ZADD, ZRANGE by
//! index, ZREM, ZSCORE, ZPOPMIN, ZCARD.

use super::keyspace::{keyword, syntax_error, Data, Entry, Keyspace};
use super::number::{format_g17, parse_f64, parse_i64};
use super::reply::{MemoryReply, NOT_FLOAT, NOT_INTEGER, WRONGTYPE};
use super::sorted_set::ZSet;

struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

impl Keyspace {
    /// The sorted set at `key`, `Ok(None)` when there is none, WRONGTYPE for another type.
    fn zset(&mut self, key: &[u8]) -> Result<Option<&mut ZSet>, MemoryReply> {
        match self.live(key) {
            None => Ok(None),
            Some(Entry {
                data: Data::ZSet(zset),
                ..
            }) => Ok(Some(zset)),
            Some(_) => Err(MemoryReply::error(WRONGTYPE)),
        }
    }

    /// Deletes a sorted set that lost its last member, as Redis does.
    fn drop_if_empty(&mut self, key: &[u8]) {
        if matches!(self.live(key), Some(Entry { data: Data::ZSet(zset), .. }) if zset.is_empty()) {
            self.remove(key);
        }
    }

    /// ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]
    pub(super) fn zadd(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key, rest @ ..] = args else {
            return MemoryReply::arity(name);
        };
        let mut flags = AddFlags {
            nx: false,
            xx: false,
            gt: false,
            lt: false,
            ch: false,
            incr: false,
        };
        let mut at = 0;
        while at < rest.len() {
            match keyword(rest[at]).as_str() {
                "NX" => flags.nx = true,
                "XX" => flags.xx = true,
                "GT" => flags.gt = true,
                "LT" => flags.lt = true,
                "CH" => flags.ch = true,
                "INCR" => flags.incr = true,
                _ => break,
            }
            at += 1;
        }
        let pairs = &rest[at..];
        if pairs.is_empty() || pairs.len() % 2 != 0 {
            return if rest.len() < 2 {
                MemoryReply::arity(name)
            } else {
                syntax_error()
            };
        }
        if flags.nx && flags.xx {
            return MemoryReply::error("ERR XX and NX options at the same time are not compatible");
        }
        if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
            return MemoryReply::error(
                "ERR GT, LT, and/or NX options at the same time are not compatible",
            );
        }
        if flags.incr && pairs.len() > 2 {
            return MemoryReply::error("ERR INCR option supports a single increment-element pair");
        }
        let mut parsed = Vec::with_capacity(pairs.len() / 2);
        for pair in pairs.chunks_exact(2) {
            let Some(score) = parse_f64(pair[0]) else {
                return MemoryReply::error(NOT_FLOAT);
            };
            parsed.push((score, pair[1]));
        }
        let zset = match self.zset(key) {
            Err(wrong) => return wrong,
            Ok(Some(_)) => None,
            Ok(None) if flags.xx => {
                return if flags.incr {
                    MemoryReply::Nil
                } else {
                    MemoryReply::Int(0)
                }
            }
            Ok(None) => Some(ZSet::default()),
        };
        if let Some(zset) = zset {
            self.insert(
                key,
                Entry {
                    data: Data::ZSet(zset),
                    expire_at: None,
                },
            );
        }
        let Ok(Some(zset)) = self.zset(key) else {
            return MemoryReply::error(WRONGTYPE);
        };
        let (mut added, mut changed) = (0, 0);
        let mut incr_result = MemoryReply::Nil;
        for (score, member) in parsed {
            let current = zset.score(member);
            let score = match (flags.incr, current) {
                (true, Some(current)) => current + score,
                _ => score,
            };
            if flags.incr && score.is_nan() {
                return MemoryReply::error("ERR resulting score is not a number (NaN)");
            }
            let allowed = match current {
                None => !flags.xx,
                Some(current) => {
                    !flags.nx && (!flags.gt || score > current) && (!flags.lt || score < current)
                }
            };
            if !allowed {
                continue;
            }
            match current {
                None => added += 1,
                Some(current) if current != score => changed += 1,
                Some(_) => {}
            }
            zset.insert(member, score);
            incr_result = MemoryReply::bulk(format_g17(score));
        }
        self.drop_if_empty(key);
        if flags.incr {
            incr_result
        } else if flags.ch {
            MemoryReply::Int(added + changed)
        } else {
            MemoryReply::Int(added)
        }
    }

    /// ZRANGE key start stop [REV] [WITHSCORES], by index only (BYSCORE and BYLEX are not
    /// used by our scripts).
    pub(super) fn zrange(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key, start, stop, options @ ..] = args else {
            return MemoryReply::arity(name);
        };
        let (mut rev, mut with_scores) = (false, false);
        for option in options {
            match keyword(option).as_str() {
                "REV" => rev = true,
                "WITHSCORES" => with_scores = true,
                "BYSCORE" | "BYLEX" => {
                    return MemoryReply::error("ERR memory:// supports ZRANGE by index only")
                }
                _ => return syntax_error(),
            }
        }
        let (Some(start), Some(stop)) = (parse_i64(start), parse_i64(stop)) else {
            return MemoryReply::error(NOT_INTEGER);
        };
        let zset = match self.zset(key) {
            Err(wrong) => return wrong,
            Ok(None) => return MemoryReply::Array(Vec::new()),
            Ok(Some(zset)) => zset,
        };
        let len = zset.len() as i64;
        let start = if start < 0 {
            (len + start).max(0)
        } else {
            start
        };
        let stop = if stop < 0 {
            len + stop
        } else {
            stop.min(len - 1)
        };
        if start > stop || start >= len {
            return MemoryReply::Array(Vec::new());
        }
        let (skip, take) = (start as usize, (stop - start + 1) as usize);
        let mut out = Vec::new();
        let mut push = |(member, score): (&[u8], f64)| {
            out.push(MemoryReply::bulk(member));
            if with_scores {
                out.push(MemoryReply::bulk(format_g17(score)));
            }
        };
        if rev {
            zset.iter().rev().skip(skip).take(take).for_each(&mut push);
        } else {
            zset.iter().skip(skip).take(take).for_each(&mut push);
        }
        MemoryReply::Array(out)
    }

    pub(super) fn zrem(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key, members @ ..] = args else {
            return MemoryReply::arity(name);
        };
        if members.is_empty() {
            return MemoryReply::arity(name);
        }
        let removed = match self.zset(key) {
            Err(wrong) => return wrong,
            Ok(None) => 0,
            Ok(Some(zset)) => members.iter().filter(|member| zset.remove(member)).count(),
        };
        self.drop_if_empty(key);
        MemoryReply::Int(removed as i64)
    }

    pub(super) fn zscore(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key, member] = args else {
            return MemoryReply::arity(name);
        };
        match self.zset(key) {
            Err(wrong) => wrong,
            Ok(zset) => zset
                .and_then(|zset| zset.score(member))
                .map_or(MemoryReply::Nil, |score| {
                    MemoryReply::bulk(format_g17(score))
                }),
        }
    }

    pub(super) fn zcard(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key] = args else {
            return MemoryReply::arity(name);
        };
        match self.zset(key) {
            Err(wrong) => wrong,
            Ok(zset) => MemoryReply::Int(zset.map_or(0, |zset| zset.len() as i64)),
        }
    }

    /// ZPOPMIN key [count]: a flat [member, score, ...] array, as RESP2 has it.
    pub(super) fn zpopmin(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let (key, count) = match args {
            [key] => (key, 1),
            [key, count] => match parse_i64(count) {
                Some(count) if count >= 0 => (key, count),
                Some(_) => {
                    return MemoryReply::error("ERR value is out of range, must be positive")
                }
                None => return MemoryReply::error(NOT_INTEGER),
            },
            _ => return MemoryReply::arity(name),
        };
        let mut out = Vec::new();
        match self.zset(key) {
            Err(wrong) => return wrong,
            Ok(None) => {}
            Ok(Some(zset)) => {
                for _ in 0..count {
                    let Some((member, score)) = zset.pop_first() else {
                        break;
                    };
                    out.push(MemoryReply::Bulk(member));
                    out.push(MemoryReply::bulk(format_g17(score)));
                }
            }
        }
        self.drop_if_empty(key);
        MemoryReply::Array(out)
    }
}
