//! An ExclusiveLock attempt as one transaction, for the caller's own connection: for Redis it
//! costs what the commands in it cost, where a script costs more. It sets the lock key with
//! NX, draws the fences as DistributedLock's transaction draws them, and reads the lock key's
//! absolute expiry, which tells our lock key apart from one another client re-created (see
//! same_expiry.lua). It writes no owner key: the hold counts on that expiry until its first
//! refresh sets the owner key to our token, beside the lock key on one new expiry (a short
//! hold never writes one). A counter that gives no fence takes the lock back.

use super::super::lock;
use super::AttemptRequest;
use crate::core::basics::resp;
use crate::core::basics::token;
use redis::Value;

/// What EXEC answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Someone else's lock.
    Held,
    /// The lock key is ours, with the absolute expiry `expiry` (ms); `fence` when the counter
    /// gave one.
    Set { fence: Option<u64>, expiry: i64 },
    /// Not this transaction's answer (an error, EXECABORT, the script's reply): read as the
    /// script's.
    Other,
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
        resp::write_command(out, &[b"INCRBY", &self.fence_key, b"2"]);
        let kept = lock::write_keep_fences(
            out,
            &self.fence_key,
            self.ttl.as_millis() as u64,
            self.fence_retention_ms,
            self.keep_fences,
        );
        resp::write_command(out, &[b"PEXPIRETIME", &self.redis_key]);
        resp::write_command(out, &[b"EXEC"]);
        5 + kept
    }

    /// What EXEC's `[lock set?, counter, the counter kept (none, one or two), lock expiry]`
    /// says.
    pub fn answer(reply: &Value) -> Answer {
        let Value::Array(items) = reply else {
            return Answer::Other;
        };
        // The script's answer has two items; the transaction's, three to five.
        let [lock, counter, .., Value::Int(expiry)] = items.as_slice() else {
            return Answer::Other;
        };
        match lock {
            Value::Nil => return Answer::Held,
            Value::Okay | Value::SimpleString(_) => {}
            _ => return Answer::Other,
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
    fn a_won_transaction_answers_the_lock_keys_expiry() {
        let won = exec(vec![
            Value::Okay,
            Value::Int(8),
            Value::Int(1),
            Value::Int(0),
            Value::Int(5000),
        ]);
        assert_eq!(
            AttemptRequest::answer(&won),
            Answer::Set {
                fence: Some(7),
                expiry: 5000
            }
        );
        let held = exec(vec![
            Value::Nil,
            Value::Int(8),
            Value::Int(0),
            Value::Int(1),
            Value::Int(5000),
        ]);
        assert_eq!(AttemptRequest::answer(&held), Answer::Held);
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
            let reply = exec(vec![Value::Okay, counter, Value::Int(1), Value::Int(5000)]);
            assert!(matches!(
                AttemptRequest::answer(&reply),
                Answer::Set { fence: None, .. }
            ));
        }
    }

    #[test]
    fn anything_else_is_read_as_the_scripts_answer() {
        let script = exec(vec![Value::Int(1), Value::Int(7)]);
        assert_eq!(AttemptRequest::answer(&script), Answer::Other);
        assert_eq!(AttemptRequest::answer(&Value::Nil), Answer::Other);
    }

    #[test]
    fn writes_seven_commands_whose_last_reply_is_exec_and_no_owner_key() {
        let request = super::super::tests::request();
        let mut out = Vec::new();
        assert_eq!(request.write_transaction(&mut out), 7);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("*1\r\n$5\r\nMULTI\r\n"), "{text}");
        assert!(text.ends_with("*1\r\n$4\r\nEXEC\r\n"), "{text}");
        assert_eq!(text.matches("PEXPIRETIME").count(), 1);
        // The lock's SET, and the counter's first expiry.
        assert_eq!(text.matches("\r\nNX\r\n").count(), 2);
        // Kept its retention (5000 ms) and a quarter more past the lock's 3000 ms.
        assert_eq!(text.matches("$4\r\n9250\r\n").count(), 2);
        assert_eq!(text.matches("\r\nGT\r\n").count(), 1);
        assert!(!text.contains("owner"), "{text}");
    }

    #[test]
    fn a_counter_known_kept_is_not_pushed_and_the_shorter_answer_reads_the_same() {
        let mut request = super::super::tests::request();
        request.keep_fences = false;
        let mut out = Vec::new();
        assert_eq!(request.write_transaction(&mut out), 5);
        assert!(!String::from_utf8_lossy(&out).contains("PEXPIRE\r\n"));
        let won = exec(vec![Value::Okay, Value::Int(8), Value::Int(5000)]);
        assert_eq!(
            AttemptRequest::answer(&won),
            Answer::Set {
                fence: Some(7),
                expiry: 5000
            }
        );
        let held = exec(vec![Value::Nil, Value::Int(8), Value::Int(5000)]);
        assert_eq!(AttemptRequest::answer(&held), Answer::Held);
    }

    #[test]
    fn a_counter_kept_forever_is_persisted_instead() {
        let mut request = super::super::tests::request();
        request.fence_retention_ms = 0;
        let mut out = Vec::new();
        assert_eq!(request.write_transaction(&mut out), 6);
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("PERSIST"), "{text}");
        assert!(!text.contains("\r\nGT\r\n"), "{text}");
    }
}
