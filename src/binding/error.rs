use crate::core::basics::error::{InvalidKind, LockError};

/// Encodes a core error for the JS layer, which turns it into a real error class:
/// `[CODE detail...] message`. Async rejections from napi cannot carry a custom `code`, so the
/// code travels in the message and `lib/errors.js` takes it back out.
pub fn to_napi(err: LockError) -> napi::Error {
    let head = match &err {
        LockError::Invalid { kind, arg, .. } => {
            let class = match kind {
                InvalidKind::Type => "TypeError",
                InvalidKind::Range => "RangeError",
            };
            format!("{} {class} {arg}", err.code())
        }
        LockError::Locked { retries, .. } => format!("{} {retries}", err.code()),
        _ => err.code().to_string(),
    };
    napi::Error::from_reason(format!("[{head}] {err}"))
}

pub type Result<T> = std::result::Result<T, napi::Error>;

pub trait OrThrow<T> {
    fn or_throw(self) -> Result<T>;
}

impl<T> OrThrow<T> for std::result::Result<T, LockError> {
    fn or_throw(self) -> Result<T> {
        self.map_err(to_napi)
    }
}
