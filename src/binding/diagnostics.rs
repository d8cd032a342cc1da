use super::error::{OrThrow, Result};
use super::options::ConnectionOptions;
use crate::core::front::connection::LockConnection;
use napi::bindgen_prelude::{Buffer, Env};
use napi_derive::napi;

/// What the refreshes of one connection have cost so far (for tests and benchmarks).
#[napi(object)]
pub struct WatchdogStats {
    /// Pipelines sent: one round trip each.
    pub pipelines: f64,
    /// Refresh commands inside them.
    pub refreshes: f64,
    /// Locks being kept alive now.
    pub watched: f64,
    /// Entries the scheduler looked at so far: grows with the locks started, stopped and
    /// refreshed, not with the number held.
    pub visited: f64,
}

#[napi]
pub fn watchdog_stats(env: Env, connection: ConnectionOptions) -> Result<WatchdogStats> {
    let stats = LockConnection::open(connection.endpoint().or_throw(&env)?).watchdog_stats();
    Ok(WatchdogStats {
        pipelines: stats.pipelines as f64,
        refreshes: stats.refreshes as f64,
        watched: stats.watched as f64,
        visited: stats.visited as f64,
    })
}

/// Returns the memory the allocator holds free to the system now, as V8's `gc()` does for
/// the JS heap; it would otherwise keep it for later. For benchmarks that read RSS
/// (scenario e of bench/).
#[napi]
pub fn collect_native_memory() {
    super::sys::memory::give_back_freed();
}

/// What the C allocator holds (MB), for the soak's native memory rule (scripts/soak/verdict.js):
/// every native allocation of the process (ours, Node's, V8's own outside its heap) and none of
/// V8's heap pages, whose resident share moves by megabytes between samples.
#[napi(object)]
pub struct NativeMemory {
    /// Taken from the system by the allocator's arenas and its mmapped blocks.
    pub from_system_mb: f64,
    /// Of that, in live allocations.
    pub in_use_mb: f64,
}

/// `null` where the allocator cannot be asked (not glibc, or glibc before 2.33).
#[napi]
pub fn native_memory() -> Option<NativeMemory> {
    let mb = |bytes: u64| bytes as f64 / 1_048_576.0;
    super::sys::memory::holding().map(|held| NativeMemory {
        from_system_mb: mb(held.from_system),
        in_use_mb: mb(held.in_use),
    })
}

/// Runs one command on the `memory://` keyspace of `url` and answers its reply as JSON:
/// integers, `null`, arrays, `{"bulk": base64}`, `{"status": text}`, `{"error": text}`. How
/// tests read and write beside the locks on the embedded backend, as with a client on Redis.
#[napi]
pub fn memory_command(url: String, args: Vec<Buffer>) -> Result<String> {
    let Some(name) = url.strip_prefix("memory://") else {
        return Err(napi::Error::from_reason(
            "memoryCommand takes a memory:// URL",
        ));
    };
    let args: Vec<&[u8]> = args.iter().map(|arg| &arg[..]).collect();
    let mut out = String::new();
    json(&crate::core::api::memory_command(name, &args), &mut out);
    Ok(out)
}

fn json(value: &redis::Value, out: &mut String) {
    use redis::Value;
    match value {
        Value::Nil => out.push_str("null"),
        Value::Int(n) => out.push_str(&n.to_string()),
        Value::Okay => tagged("status", "OK", out),
        Value::SimpleString(text) => tagged("status", text, out),
        Value::BulkString(bytes) => tagged("bulk", &base64(bytes), out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json(item, out);
            }
            out.push(']');
        }
        Value::ServerError(err) => {
            let text = match err.details() {
                Some(details) => format!("{} {details}", err.code()),
                None => err.code().to_owned(),
            };
            tagged("error", &text, out);
        }
        other => tagged("error", &format!("unexpected reply {other:?}"), out),
    }
}

/// `{"tag":"text"}`, the text escaped as JSON wants it.
fn tagged(tag: &str, text: &str, out: &mut String) {
    out.push_str("{\"");
    out.push_str(tag);
    out.push_str("\":\"");
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push_str("\"}");
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
