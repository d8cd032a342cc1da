use super::*;

#[test]
fn debug_patterns_as_the_debug_package_reads_them() {
    for (spec, on) in [
        ("native-redis-lock", true),
        ("*", true),
        ("native-*", true),
        ("express,native-redis-lock", true),
        ("express native-redis-lock", true),
        ("*,-native-redis-lock", false),
        ("-native-redis-lock,*", false),
        ("*,-express", true),
        ("native-redis", false),
        ("express", false),
        ("", false),
        ("*lock", true),
        ("n*r*k", true),
        ("n*x*k", false),
    ] {
        assert_eq!(enabled(spec, NAME), on, "{spec:?}");
    }
}

fn packed(parts: &[&[&[u8]]]) -> Vec<u8> {
    let mut out = Vec::new();
    for command in parts {
        out.extend(format!("*{}\r\n", command.len()).as_bytes());
        for part in *command {
            out.extend(format!("${}\r\n", part.len()).as_bytes());
            out.extend(*part);
            out.extend(b"\r\n");
        }
    }
    out
}

fn name_of(sha: &[u8]) -> Option<&'static str> {
    match sha {
        b"abc" => Some("acquire"),
        b"5e5" => Some("sg_release"),
        _ => None,
    }
}

#[test]
fn a_call_shows_names_and_keys_never_values() {
    let call = packed(&[
        &[
            b"EVALSHA",
            b"abc",
            b"2",
            b"lock:k",
            b"lock:k:fence",
            b"SECRET-TOKEN",
            b"30000",
        ],
        &[b"SET", b"lock:x", b"SECRET-VALUE", b"PX", b"100"],
        &[b"INCRBY", b"{lock:x}\xfffence", b"2"],
        &[b"AUTH", b"user", b"SECRET-PASSWORD"],
        &[b"HELLO", b"3", b"AUTH", b"user", b"SECRET-PASSWORD"],
        &[b"EVALSHA", b"fff", b"1", b"odd\xffkey"],
        &[b"EVALSHA", b"fff", b"1", b"sg:id:SECRET-LOCKID"],
        &[
            b"EVALSHA",
            b"5e5",
            b"1",
            b"sg:id:SECRET-LOCKID",
            b"SECRET-LOCKID",
        ],
        &[b"EVALSHA", b"abc", b"1", b"user:id:kept"],
        &[b"SCRIPT", b"load", b"return SECRET"],
    ]);
    let line = describe(&call, name_of);
    assert_eq!(
        line,
        "EVALSHA acquire [lock:k, lock:k:fence]; SET lock:x; INCRBY {lock:x}\\xfffence; AUTH; HELLO; EVALSHA script [odd\\xffkey]; EVALSHA script [sg:id:...]; EVALSHA sg_release [sg:id:...]; EVALSHA acquire [user:id:kept]; SCRIPT LOAD"
    );
    assert!(!line.contains("SECRET"));
}

#[test]
fn what_the_connections_send_beside_the_lock_calls_is_named() {
    let source = b"return SECRET";
    let sha = redis::Script::new("return SECRET").get_hash().to_owned();
    let names: ScriptNames =
        |sha| (sha == redis::Script::new("return SECRET").get_hash().as_bytes()).then_some("epoch");
    assert_eq!(names(sha.as_bytes()), Some("epoch"));
    let call = packed(&[
        &[b"EVAL", source, b"1", b"\xffepoch"],
        &[b"EVAL", b"return 2", b"1", b"sg:id:SECRET-LOCKID"],
        &[b"SSUBSCRIBE", b"{lock:k}:released"],
        &[b"SUNSUBSCRIBE", b"{lock:k}:released"],
        &[b"UNSUBSCRIBE", b"a", b"b"],
        &[b"CLIENT", b"setinfo", b"LIB-NAME", b"redis-rs"],
        &[b"SENTINEL", b"get-master-addr-by-name", b"mymaster"],
        &[b"HELLO", b"3"],
    ]);
    assert_eq!(
        describe(&call, names),
        "EVAL epoch [\\xffepoch]; EVAL script [sg:id:...]; SSUBSCRIBE {lock:k}:released; SUNSUBSCRIBE {lock:k}:released; UNSUBSCRIBE a; CLIENT SETINFO; SENTINEL GET-MASTER-ADDR-BY-NAME; HELLO"
    );
}
