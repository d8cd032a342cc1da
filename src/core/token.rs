//! Owner tokens and fencing numbers.

/// A fresh owner token: a UUID v4 drawn from the OS CSPRNG (the `uuid` crate reads
/// `getrandom`). The same format as `crypto.randomUUID()`, which the JS original stores.
pub fn new_token() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

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
    fn fence_strings_sort_like_numbers() {
        assert_eq!(format_fence(1), "000000000000001");
        assert!(format_fence(9) < format_fence(10));
        assert!(format_fence(999) < format_fence(1000));
    }
}
