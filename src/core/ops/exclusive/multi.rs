//! An ExclusiveLock attempt as one transaction, for the caller's own connection: for Redis it
//! costs what the commands in it cost, where a script costs more. Both keys are set with NX
//! and the fences drawn as DistributedLock's transaction draws them; PEXPIRETIME reads the
//! lock key's absolute expiry, which tells our lock key apart from one another client
//! re-created (see same_expiry.lua): the owner key's own expiry may lie a millisecond off
//! (two PX read the clock apart), so the hold counts on the lock key's alone until its first
//! refresh sets both together. A counter that gives no fence takes the lock back.

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
    /// The lock key is ours, with the absolute expiry `expiry` (ms); `fence` when the counter
    /// gave one.
    Set { fence: Option<u64>, expiry: i64 },
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
        for (key, value) in [
            (&self.redis_key, self.contents.as_bytes()),
            (&self.owner_key, self.token.as_bytes()),
        ] {
            resp::write_command(out, &[b"SET", key, value, b"NX", b"PX", ttl.as_bytes()]);
        }
        resp::write_command(out, &[b"INCRBY", &self.fence_key, b"2"]);
        resp::write_command(out, &[b"PEXPIRETIME", &self.redis_key]);
        resp::write_command(out, &[b"EXEC"]);
        6
    }

    /// What EXEC's `[lock set?, owner set?, counter, lock expiry]` says.
    pub fn answer(reply: &Value) -> Answer {
        let Value::Array(items) = reply else {
            return Answer::Other;
        };
        let [lock, owner, counter, Value::Int(expiry)] = items.as_slice() else {
            return Answer::Other;
        };
        let (Some(lock), Some(owner)) = (is_set(lock), is_set(owner)) else {
            return Answer::Other;
        };
        if !lock {
            return Answer::Held { stray: owner };
        }
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
    fn a_won_transaction_answers_the_lock_keys_expiry_whatever_became_of_the_owner_key() {
        for owner in [Value::Okay, Value::Nil] {
            let won = exec(vec![Value::Okay, owner, Value::Int(8), Value::Int(5000)]);
            assert_eq!(
                AttemptRequest::answer(&won),
                Answer::Set {
                    fence: Some(7),
                    expiry: 5000
                }
            );
        }
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
            let reply = exec(vec![Value::Okay, Value::Okay, counter, Value::Int(5000)]);
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
        ]);
        assert_eq!(AttemptRequest::answer(&stray), Answer::Held { stray: true });
        let ours_held = exec(vec![
            Value::Nil,
            Value::Nil,
            Value::Int(8),
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
    fn writes_six_commands_whose_last_reply_is_exec() {
        let request = super::super::tests::request();
        let mut out = Vec::new();
        assert_eq!(request.write_transaction(&mut out), 6);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("*1\r\n$5\r\nMULTI\r\n"), "{text}");
        assert!(text.ends_with("*1\r\n$4\r\nEXEC\r\n"), "{text}");
        assert_eq!(text.matches("PEXPIRETIME").count(), 1);
        assert_eq!(text.matches("\r\nNX\r\n").count(), 2);
    }
}
