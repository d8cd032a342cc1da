//! Hash commands: HGET and HSET (what fenced_set.lua uses).

use super::keyspace::{Data, Entry, Keyspace};
use super::reply::{MemoryReply, WRONGTYPE};
use std::collections::HashMap;

impl Keyspace {
    pub(super) fn hget(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key, field] = args else {
            return MemoryReply::arity(name);
        };
        match self.live(key) {
            None => MemoryReply::Nil,
            Some(Entry {
                data: Data::Hash(hash),
                ..
            }) => hash
                .get(*field)
                .cloned()
                .map_or(MemoryReply::Nil, MemoryReply::Bulk),
            Some(_) => MemoryReply::error(WRONGTYPE),
        }
    }

    /// HSET key field value [field value ...]: the number of fields that were new.
    pub(super) fn hset(&mut self, name: &str, args: &[&[u8]]) -> MemoryReply {
        let [key, pairs @ ..] = args else {
            return MemoryReply::arity(name);
        };
        if pairs.is_empty() || pairs.len() % 2 != 0 {
            return MemoryReply::arity(name);
        }
        if self.live(key).is_none() {
            self.insert(
                key,
                Entry {
                    data: Data::Hash(HashMap::new()),
                    expire_at: None,
                },
            );
        }
        let Some(Entry {
            data: Data::Hash(hash),
            ..
        }) = self.live(key)
        else {
            return MemoryReply::error(WRONGTYPE);
        };
        let mut added = 0;
        for pair in pairs.chunks_exact(2) {
            if hash.insert(pair[0].to_vec(), pair[1].to_vec()).is_none() {
                added += 1;
            }
        }
        MemoryReply::Int(added)
    }
}
