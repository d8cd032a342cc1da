//! An ExclusiveLock attempt as one transaction, for the JS thread's connection: inside a
//! script every write costs Redis several times what it costs in MULTI, and a service on a
//! small machine shares its cores with Redis. Both keys are set with NX and the fences drawn
//! as DistributedLock's transaction draws them; the two PEXPIRETIME tell whether the keys
//! share one absolute expiry (two PX read the clock apart, so a millisecond may lie between
//! them). What one transaction cannot settle (an owner key that was there already, or a
//! millisecond apart) `Exclusive::claim` settles with the expiry read here; a counter that
//! gives no fence goes to the acquire script, which takes the lock back (see fence.lua).

use super::AttemptRequest;
use crate::core::basics::resp;
use crate::core::basics::token;
use redis::Value;

/// What EXEC answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Someone else's lock. `stray`: our owner key was set all the same (its holder is not
    /// one of ours, so there was none) and must be deleted.
    Held { stray: bool },
    /// The lock key is ours. `fence` when the counter gave one; `settled` when the owner key
    /// is ours too, on the lock key's expiry, which is `expiry` (ms).
    Set {
        fence: Option<u64>,
        settled: bool,
        expiry: i64,
    },
    /// Not this transaction's answer (an error, EXECABORT, the script's reply): read as the
    /// script's.
    Other,
}

fn is_set(value: &Value) -> Option<bool> {
    match value {
        Value::Okay | Value::SimpleString(_) => Some(true),
        Value::Nil => Some(false),
        _ => None,
    }
}

impl AttemptRequest {
    /// Appends the transaction to `out`; the answer is how many replies it gets (EXEC's is
    /// the last, read by `answer`).
    pub fn write_transaction(&self, out: &mut Vec<u8>) -> usize {
        let ttl = resp::decimal(self.ttl.as_millis() as u64);
        resp::write_command(out, &[b"MULTI"]);
        resp::write_command(
            out,
            &[
                b"SET",
                &self.redis_key,
                self.contents.as_bytes(),
                b"NX",
                b"PX",
                ttl.as_bytes(),
            ],
        );
        resp::write_command(
            out,
            &[
                b"SET",
                &self.owner_key,
                self.token.as_bytes(),
                b"NX",
                b"PX",
                ttl.as_bytes(),
            ],
        );
        resp::write_command(out, &[b"INCRBY", &self.fence_key, b"2"]);
        resp::write_command(out, &[b"PEXPIRETIME", &self.redis_key]);
        resp::write_command(out, &[b"PEXPIRETIME", &self.owner_key]);
        resp::write_command(out, &[b"EXEC"]);
        7
    }

    /// What EXEC's `[lock set?, owner set?, counter, lock expiry, owner expiry]` says.
    pub fn answer(reply: &Value) -> Answer {
        let Value::Array(items) = reply else {
            return Answer::Other;
        };
        let [lock, owner, counter, lock_at, owner_at] = items.as_slice() else {
            return Answer::Other;
        };
        let (Some(lock), Some(owner)) = (is_set(lock), is_set(owner)) else {
            return Answer::Other;
        };
        if !lock {
            return Answer::Held { stray: owner };
        }
        let Value::Int(expiry) = lock_at else {
            return Answer::Other;
        };
        // Two at a time, as acquire.lua: the counter is the kept one, which must be a fence
        // too (a counter refused by INCRBY answers an error here).
        let fence = match counter {
            Value::Int(after) if (2..=token::FENCE_MAX as i64).contains(after) => {
                Some(*after as u64 - 1)
            }
            _ => None,
        };
        Answer::Set {
            fence,
            settled: owner && matches!(owner_at, Value::Int(at) if at == expiry),
            expiry: *expiry,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(items: Vec<Value>) -> Value {
        Value::Array(items)
    }

    #[test]
    fn a_won_transaction_is_settled_only_with_both_keys_on_one_expiry() {
        let won = exec(vec![
            Value::Okay,
            Value::Okay,
            Value::Int(8),
            Value::Int(5000),
            Value::Int(5000),
        ]);
        assert_eq!(
            AttemptRequest::answer(&won),
            Answer::Set {
                fence: Some(7),
                settled: true,
                expiry: 5000
            }
        );
        let apart = exec(vec![
            Value::Okay,
            Value::Okay,
            Value::Int(8),
            Value::Int(5000),
            Value::Int(5001),
        ]);
        assert!(matches!(
            AttemptRequest::answer(&apart),
            Answer::Set {
                settled: false,
                fence: Some(7),
                expiry: 5000
            }
        ));
        let owner_taken = exec(vec![
            Value::Okay,
            Value::Nil,
            Value::Int(8),
            Value::Int(5000),
            Value::Int(9000),
        ]);
        assert!(matches!(
            AttemptRequest::answer(&owner_taken),
            Answer::Set { settled: false, .. }
        ));
    }

    #[test]
    fn a_counter_that_gives_no_fence_leaves_the_win_without_one() {
        let error = match resp::parse(b"-ERR value is not an integer or out of range\r\n") {
            Ok(Some((reply, _))) => reply,
            other => panic!("{other:?}"),
        };
        for counter in [
            error,
            Value::Int(1),
            Value::Int(token::FENCE_MAX as i64 + 1),
        ] {
            let reply = exec(vec![
                Value::Okay,
                Value::Okay,
                counter,
                Value::Int(5000),
                Value::Int(5000),
            ]);
            assert!(matches!(
                AttemptRequest::answer(&reply),
                Answer::Set { fence: None, .. }
            ));
        }
    }

    #[test]
    fn a_held_lock_says_whether_our_owner_key_was_set_stray() {
        let stray = exec(vec![
            Value::Nil,
            Value::Okay,
            Value::Int(8),
            Value::Int(5000),
            Value::Int(6000),
        ]);
        assert_eq!(AttemptRequest::answer(&stray), Answer::Held { stray: true });
        let ours_held = exec(vec![
            Value::Nil,
            Value::Nil,
            Value::Int(8),
            Value::Int(5000),
            Value::Int(5000),
        ]);
        assert_eq!(
            AttemptRequest::answer(&ours_held),
            Answer::Held { stray: false }
        );
    }

    #[test]
    fn anything_else_is_read_as_the_scripts_answer() {
        let script = exec(vec![Value::Int(1), Value::Int(7)]);
        assert_eq!(AttemptRequest::answer(&script), Answer::Other);
        assert_eq!(AttemptRequest::answer(&Value::Nil), Answer::Other);
    }

    #[test]
    fn writes_seven_commands_whose_last_reply_is_exec() {
        let request = super::super::tests::request();
        let mut out = Vec::new();
        assert_eq!(request.write_transaction(&mut out), 7);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("*1\r\n$5\r\nMULTI\r\n"), "{text}");
        assert!(text.ends_with("*1\r\n$4\r\nEXEC\r\n"), "{text}");
        assert_eq!(text.matches("PEXPIRETIME").count(), 2);
        assert_eq!(text.matches("\r\nNX\r\n").count(), 2);
    }
}
