//! syncguard's calls by lockId on a Redis Cluster while their slot migrates. Such a call
//! declares only the index key and reads the lock key the index names, which Redis cannot
//! see: with the slot half-moved the node that runs it may have the index but not the
//! record, or the other way round, and the call would answer "not found" for a lock that is
//! held. So a "not found" is checked once more: the index read, and the call sent again with
//! that lock key declared too, which Redis answers only where both keys are (TRYAGAIN or ASK
//! otherwise, which the crate follows). Outside a migration the second call answers as the
//! first did.

use crate::core::basics::error::LockError;
use crate::core::proto::{Op, Wire};
use redis::{Script, Value};

/// The lock key an index key names, `None` when there is none.
pub struct IndexTarget<'a> {
    pub index_key: &'a [u8],
}

impl Op for IndexTarget<'_> {
    type Out = Option<Vec<u8>>;

    fn encode<W: Wire>(&self, wire: &mut W) {
        wire.command(&[b"GET", self.index_key]);
    }

    fn decode(&self, reply: Value) -> Result<Option<Vec<u8>>, LockError> {
        match reply.extract_error()? {
            Value::Nil => Ok(None),
            Value::BulkString(key) => Ok(Some(key)),
            other => Err(LockError::Internal(format!(
                "an index key held {other:?}, not a lock key"
            ))),
        }
    }
}

/// `op` with `lock_key` declared after its own keys; the script reads only its own, so it
/// answers as `op` would. Only for scripts that take no key past their first.
pub struct Declaring<'a, O> {
    pub op: &'a O,
    pub lock_key: &'a [u8],
}

impl<O: Op> Op for Declaring<'_, O> {
    type Out = O::Out;
    const REPEATABLE: bool = O::REPEATABLE;

    fn encode<W: Wire>(&self, wire: &mut W) {
        self.op.encode(&mut AddKey {
            wire,
            key: self.lock_key,
        });
    }

    fn decode(&self, reply: Value) -> Result<O::Out, LockError> {
        self.op.decode(reply)
    }
}

struct AddKey<'w, W> {
    wire: &'w mut W,
    key: &'w [u8],
}

impl<W: Wire> Wire for AddKey<'_, W> {
    fn script(&mut self, script: &'static Script, keys: &[&[u8]], args: &[&[u8]]) {
        let mut all = keys.to_vec();
        all.push(self.key);
        self.wire.script(script, &all, args);
    }

    fn command(&mut self, parts: &[&[u8]]) {
        self.wire.command(parts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::proto::syncguard::{ExtendById, SyncguardLookup};

    fn sent<O: Op>(op: &O) -> Vec<u8> {
        let mut out = Vec::new();
        op.encode(&mut out);
        out
    }

    #[test]
    fn the_lock_key_is_declared_after_the_calls_own_keys_and_the_rest_is_unchanged() {
        let by_id = SyncguardLookup::ById {
            index_key: b"{ab}sg:id:x",
            lock_id: "x",
        };
        let declared = sent(&Declaring {
            op: &by_id,
            lock_key: b"sg:k",
        });
        let text = String::from_utf8_lossy(&declared);
        assert!(
            text.contains("$1\r\n2\r\n$11\r\n{ab}sg:id:x\r\n$4\r\nsg:k\r\n$1\r\nx\r\n"),
            "{text}"
        );
        let extend = ExtendById {
            index_key: b"i",
            lock_id: "x",
            ttl: std::time::Duration::from_millis(5),
        };
        let text = String::from_utf8_lossy(&sent(&Declaring {
            op: &extend,
            lock_key: b"k",
        }))
        .into_owned();
        assert!(
            text.contains("$1\r\n2\r\n$1\r\ni\r\n$1\r\nk\r\n$1\r\nx\r\n$1\r\n5\r\n"),
            "{text}"
        );
    }
}
