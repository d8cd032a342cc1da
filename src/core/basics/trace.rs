//! `DEBUG=native-redis-lock`: every Redis call written to stderr with how long it took, as
//! the `debug` package would (`*`, comma or space lists, `-name` exclusions). The variable is
//! read once, at the first call; off, a call costs one relaxed load. Only command names, key
//! names and script names are written: never a token, a value or an AUTH argument. A
//! syncguard script's index key (`prefix:id:<lockId>`) names its holder's token, so it is
//! shown up to `:id:` only.

use super::resp;
use redis::Value;
use std::fmt::Write;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::time::Duration;

/// The name `DEBUG` enables.
pub const NAME: &str = "native-redis-lock";

const UNREAD: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNREAD);

/// Names a script by its SHA1, for the line (see proto/scripts).
pub type ScriptNames = fn(&[u8]) -> Option<&'static str>;

/// Whether calls are traced.
pub fn on() -> bool {
    match STATE.load(Relaxed) {
        OFF => false,
        ON => true,
        _ => {
            let on = std::env::var("DEBUG").is_ok_and(|spec| enabled(&spec, NAME));
            STATE.store(if on { ON } else { OFF }, Relaxed);
            on
        }
    }
}

/// Whether `spec` (a `DEBUG` value) enables `name`: some pattern matches it and no `-`
/// pattern does.
pub fn enabled(spec: &str, name: &str) -> bool {
    let patterns = spec
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty());
    let mut included = false;
    for pattern in patterns {
        match pattern.strip_prefix('-') {
            Some(skip) if matches(skip, name) => return false,
            Some(_) => {}
            None => included |= matches(pattern, name),
        }
    }
    included
}

/// `pattern` with `*` matching any run of characters, against all of `name`.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let tail: Vec<&str> = parts.collect();
    let Some((last, middle)) = tail.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Writes one call: its commands as sent (RESP bytes), over `via`, how long until its
/// answer, and what the answer was.
pub fn call(via: &str, packed: &[u8], took: Duration, outcome: &str, names: ScriptNames) {
    let ms = took.as_secs_f64() * 1000.0;
    let line = format!(
        "  {NAME} {via} {} +{ms:.2}ms {outcome}\n",
        describe(packed, names)
    );
    write_line(line.as_bytes());
}

/// How long a line waits for a full stderr before the rest of it is dropped.
const STDERR_PATIENCE: Duration = Duration::from_secs(1);

/// Writes `line` to stderr, never panicking. Node makes a pipe on fd 2 non-blocking, so a
/// reader that falls behind fills it (to 4 KB only, once the user's pipe pages run short)
/// and `eprintln!` would panic on EAGAIN, inside whatever callback traced: the JS-thread
/// connection breaks with the call it was answering lost. A full pipe is waited out as a
/// blocking stderr would, up to `STDERR_PATIENCE`; then the rest of the line is dropped.
pub fn write_line(line: &[u8]) {
    use std::io::{ErrorKind, Write as _};
    let mut stderr = std::io::stderr().lock();
    let mut rest = line;
    let deadline = std::time::Instant::now() + STDERR_PATIENCE;
    while !rest.is_empty() {
        match stderr.write(rest) {
            Ok(0) => return,
            Ok(written) => rest = rest.get(written..).unwrap_or_default(),
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                if std::time::Instant::now() >= deadline {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => return,
        }
    }
}

/// The commands in `packed`, each as its name and the keys it names.
pub fn describe(packed: &[u8], names: ScriptNames) -> String {
    let mut out = String::new();
    let mut at = 0;
    while let Ok(Some((value, used))) = resp::parse(&packed[at..]) {
        at += used;
        if !out.is_empty() {
            out.push_str("; ");
        }
        command(&mut out, &value, names);
    }
    out
}

/// A command's argument as text: printable ASCII as it is, other bytes as `\xNN` (as
/// redis-cli shows them: our sibling keys hold a separator byte).
fn text(value: Option<&Value>) -> String {
    let Some(Value::BulkString(bytes)) = value else {
        return String::new();
    };
    let mut out = String::with_capacity(bytes.len());
    for byte in bytes {
        match byte {
            b' '..=b'~' => out.push(char::from(*byte)),
            _ => {
                let _ = write!(out, "\\x{byte:02x}");
            }
        }
    }
    out
}

/// Commands whose first argument is the one key (or channel) they touch.
const KEYED: [&str; 20] = [
    "GET",
    "SET",
    "DEL",
    "EXISTS",
    "PTTL",
    "PEXPIRE",
    "PEXPIREAT",
    "INCR",
    // The fence counter a transaction draws from: a key of ours, never a secret.
    "INCRBY",
    "HGET",
    "HSET",
    "ZADD",
    "ZREM",
    "WATCH",
    "SUBSCRIBE",
    "SSUBSCRIBE",
    "UNSUBSCRIBE",
    "SUNSUBSCRIBE",
    "PUBLISH",
    "SPUBLISH",
];

/// Commands shown with their subcommand, which says what they do (`SCRIPT LOAD`, `CLIENT
/// SETINFO`, `SENTINEL GET-MASTER-ADDR-BY-NAME`): the arguments after it never are.
const WITH_SUBCOMMAND: [&str; 4] = ["SCRIPT", "CLIENT", "SENTINEL", "CONFIG"];

fn command(out: &mut String, value: &Value, names: ScriptNames) {
    let Value::Array(parts) = value else {
        out.push('?');
        return;
    };
    let name = text(parts.first()).to_ascii_uppercase();
    out.push_str(&name);
    match name.as_str() {
        "EVALSHA" | "EVALSHA_RO" => {
            let sha = text(parts.get(1));
            let script = names(sha.as_bytes()).unwrap_or("script");
            let _ = write!(out, " {script}");
            let token_keyed = script == "script" || script.starts_with("sg_");
            keys(out, &parts[2.min(parts.len())..], token_keyed);
        }
        // A script sent whole (the restart quarantine's, or one a node lacked): named by the
        // SHA1 of its source, as an EVALSHA of it would be.
        "EVAL" | "EVAL_RO" => {
            let Some(Value::BulkString(source)) = parts.get(1) else {
                return;
            };
            let sha = redis::Script::new(&String::from_utf8_lossy(source))
                .get_hash()
                .to_owned();
            let script = names(sha.as_bytes()).unwrap_or("script");
            let _ = write!(out, " {script}");
            let token_keyed = script == "script" || script.starts_with("sg_");
            keys(out, &parts[2.min(parts.len())..], token_keyed);
        }
        name if WITH_SUBCOMMAND.contains(&name) => {
            let _ = write!(out, " {}", text(parts.get(1)).to_ascii_uppercase());
        }
        name if KEYED.contains(&name) => {
            let _ = write!(out, " {}", text(parts.get(1)));
        }
        // Anything else (AUTH, HELLO, MULTI, EXEC, TIME...) by its name alone.
        _ => {}
    }
}

/// The part of an index key that follows its prefix: a lockId, which releases and extends.
const INDEX_MARK: &str = ":id:";

/// `numkeys key...` of an EVALSHA, as `[key, key]`; with `token_keyed` (syncguard's scripts,
/// and one we cannot name), what follows `:id:` in a key is elided.
fn keys(out: &mut String, rest: &[Value], token_keyed: bool) {
    let count: usize = text(rest.first()).parse().unwrap_or(0);
    let named: Vec<String> = (rest.iter().skip(1).take(count))
        .map(|key| {
            let mut key = text(Some(key));
            if let Some(at) = key.find(INDEX_MARK).filter(|_| token_keyed) {
                key.truncate(at + INDEX_MARK.len());
                key.push_str("...");
            }
            key
        })
        .collect();
    let _ = write!(out, " [{}]", named.join(", "));
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
