//! Owner tokens and fencing numbers.

use std::cell::RefCell;

/// Tokens drawn per `getrandom` call. The call costs more than the rest of an acquire's CPU
/// on a VM; the bytes are the OS CSPRNG's all the same, each used once. (Node never forks
/// without exec, so no two processes can share a thread's pool.)
const POOL_TOKENS: usize = 64;

struct Pool {
    bytes: [u8; 16 * POOL_TOKENS],
    used: usize,
}

thread_local! {
    // Boxed: thread-locals of an addon share the small static TLS block that glibc keeps for
    // libraries loaded at run time; a kilobyte there makes the addon fail to load.
    static POOL: RefCell<Option<Box<Pool>>> = const { RefCell::new(None) };
}

impl Pool {
    fn take(&mut self) -> Option<[u8; 16]> {
        if self.used == self.bytes.len() {
            getrandom::fill(&mut self.bytes).ok()?;
            self.used = 0;
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&self.bytes[self.used..self.used + 16]);
        // Spent bytes are wiped: nothing left in memory predicts a token already handed out.
        self.bytes[self.used..self.used + 16].fill(0);
        self.used += 16;
        Some(out)
    }
}

/// A fresh owner token: a UUID v4 of 16 bytes from the OS CSPRNG, the same format as
/// `crypto.randomUUID()`, which the JS original stores.
pub fn new_token() -> String {
    let drawn = POOL.with(|pool| {
        let mut pool = pool.try_borrow_mut().ok()?;
        pool.get_or_insert_with(|| {
            Box::new(Pool {
                bytes: [0; 16 * POOL_TOKENS],
                used: 16 * POOL_TOKENS,
            })
        })
        .take()
    });
    let uuid = match drawn {
        Some(bytes) => uuid::Builder::from_random_bytes(bytes).into_uuid(),
        // The pool could not be filled: the crate draws for itself, as it always did.
        None => uuid::Uuid::new_v4(),
    };
    uuid.hyphenated().to_string()
}

/// The largest fence: fences are 15 digits. At a million acquisitions a second on one key,
/// the counter reaches it after 31 years; past it, no fence can be drawn and acquisitions of
/// that key fail (see fence.lua) rather than give a 16-digit fence that sorts wrong.
pub const FENCE_MAX: u64 = 999_999_999_999_999;

/// How long a lock's fence counter is kept past the last lock it numbered, unless told
/// otherwise (`fenceRetentionMs`): a holder stalled longer than this after its lock expired
/// may see a fence drawn anew from 1 (README, "Fencing tokens"). 0 keeps counters forever.
pub const FENCE_RETENTION_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// The longest retention window: about 100 years, so a TTL plus it stays a whole number Lua
/// and Redis both read exactly.
pub const FENCE_RETENTION_MAX_MS: u64 = 100 * 366 * 24 * 60 * 60 * 1000;

/// Fencing numbers as 15-digit zero-padded decimals: string order and numeric order agree,
/// and every value fits a JavaScript number exactly.
pub fn format_fence(fence: u64) -> String {
    format!("{fence:015}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_v4_uuids() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn pooled_tokens_are_distinct_v4_uuids_across_refills() {
        let tokens: std::collections::HashSet<String> =
            (0..3 * POOL_TOKENS + 5).map(|_| new_token()).collect();
        assert_eq!(tokens.len(), 3 * POOL_TOKENS + 5);
        for token in &tokens {
            assert_eq!(token.len(), 36);
            assert_eq!(&token[14..15], "4");
            assert!(matches!(&token[19..20], "8" | "9" | "a" | "b"));
        }
    }

    #[test]
    fn fence_strings_sort_like_numbers() {
        assert_eq!(format_fence(1), "000000000000001");
        assert!(format_fence(9) < format_fence(10));
        assert!(format_fence(999) < format_fence(1000));
    }
}
