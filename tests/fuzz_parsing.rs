//! Property-based fuzzing of everything the core parses or checks before (or after) talking
//! to Redis: argument validation, key layout, endpoint specs and URLs, reply decoding and
//! error mapping. Every property runs on arbitrary input, so besides its own contract each
//! one also says "never panics": a panic here is a crash of the Node process in production.
//!
//! Case counts are sized so the whole file runs in a few seconds on a debug build.

use native_redis_lock::core::api::{Address, Endpoint, EndpointSpec};
use native_redis_lock::core::basics::error::{InvalidKind, LockError};
use native_redis_lock::core::basics::keys;
use native_redis_lock::core::basics::validate::{self, MAX_KEY_BYTES, MAX_MS, MAX_RETRIES};
use proptest::prelude::*;
use proptest::test_runner::Config;
use redis::{ErrorKind, FromRedisValue, PushKind, RedisError, ServerErrorKind, Value};
use std::collections::HashMap;
use std::time::Duration;

/// No regression files are written into the tree; known failures are plain tests below.
fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    }
}

const MAX: f64 = MAX_MS as f64;

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

/// Numbers as JavaScript can pass them: every class of f64 (NaN with any payload, ±inf,
/// subnormals, ±0, huge), plus the whole numbers and fractions around every boundary.
fn js_numbers() -> impl Strategy<Value = f64> {
    prop_oneof![
        proptest::num::f64::ANY,
        any::<u64>().prop_map(f64::from_bits),
        (-5i64..=5).prop_map(|n| n as f64),
        (0u64..=MAX_MS + 10).prop_map(|n| n as f64),
        (MAX_MS - 5..=MAX_MS + 5).prop_map(|n| n as f64),
        (any::<i32>(), 0.0f64..1.0).prop_map(|(n, f)| n as f64 + f),
        (0u32..=2_000).prop_map(f64::from),
        prop::sample::select(vec![
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            1e21,
            -1e21,
            9_007_199_254_740_992.0,
            9_007_199_254_740_994.0,
            2_147_483_648.0,
            2_147_483_647.0,
            4_294_967_296.0,
            18_446_744_073_709_551_616.0,
            0.5,
            1.5,
            1.0 - f64::EPSILON,
            1.0 + f64::EPSILON,
            MAX + 0.5,
            MAX - 0.5,
        ]),
    ]
}

/// Strings with the characters that break naive code: NUL, CR/LF, braces, globs, RESP
/// framing, multi-byte and astral characters.
fn hostile_strings() -> impl Strategy<Value = String> {
    let hostile_char = prop_oneof![
        any::<char>(),
        prop::sample::select(vec![
            '\0', '\r', '\n', '{', '}', '*', '?', '[', ']', '\\', ':', '$', ' ', 'é', '🔒', 'я',
            '\u{FFFD}', '\u{FEFF}', '\u{200B}',
        ]),
    ];
    prop_oneof![
        any::<String>(),
        prop::collection::vec(hostile_char, 0..40).prop_map(|c| c.into_iter().collect()),
        "[a-z]{1,8}".prop_map(|s| format!("{s}\r\n*1\r\n$8\r\nFLUSHALL\r\n")),
    ]
}

/// Byte strings biased towards braces, so hash-tag edge cases come up often.
fn key_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => Just(b'{'),
        4 => Just(b'}'),
        2 => Just(b':'),
        4 => b'a'..=b'c',
        3 => any::<u8>(),
    ];
    prop_oneof![
        prop::collection::vec(byte, 0..24),
        prop::collection::vec(any::<u8>(), 0..200),
    ]
}

// ---------------------------------------------------------------------------------------
// validate
// ---------------------------------------------------------------------------------------

/// The rejection every validator returns: EINVAL, of the given kind, naming the argument,
/// and short (it never echoes a huge input back).
fn assert_invalid(
    err: LockError,
    arg: &'static str,
    kind: InvalidKind,
) -> Result<String, TestCaseError> {
    prop_assert_eq!(err.code(), "EINVAL");
    prop_assert!(!err.is_infrastructure());
    let message = err.to_string();
    match err {
        LockError::Invalid {
            arg: got_arg,
            kind: got_kind,
            ..
        } => {
            prop_assert_eq!(got_arg, arg);
            prop_assert_eq!(got_kind, kind);
        }
        other => prop_assert!(false, "not a validation error: {:?}", other),
    }
    prop_assert!(message.contains(arg), "{message:?} does not name {arg}");
    // f64::MAX and 5e-324 print in full (about 330 digits); nothing longer gets in.
    prop_assert!(message.len() < 500, "message of {} bytes", message.len());
    Ok(message)
}

/// Oracle for "a whole number in `lo..=hi`", written without `fract`: NaN and ±inf fail
/// both comparisons or the trunc check.
fn whole_in(value: f64, lo: f64, hi: f64) -> bool {
    value.trunc() == value && value >= lo && value <= hi
}

proptest! {
    #![proptest_config(config(4_000))]

    #[test]
    fn positive_ms_accepts_exactly_whole_numbers_from_1_to_max(value in js_numbers()) {
        match validate::positive_ms("ttlMs", value) {
            Ok(duration) => {
                prop_assert!(whole_in(value, 1.0, MAX), "accepted {value:?}");
                prop_assert_eq!(duration.as_millis() as f64, value);
                prop_assert_eq!(duration.subsec_nanos() % 1_000_000, 0);
            }
            Err(err) => {
                prop_assert!(!whole_in(value, 1.0, MAX), "rejected {value:?}");
                let message = assert_invalid(err, "ttlMs", InvalidKind::Range)?;
                let shown = validate::js_number(value);
                prop_assert!(message.contains(&shown), "{message:?} does not show {shown}");
            }
        }
    }

    #[test]
    fn non_negative_ms_accepts_exactly_whole_numbers_from_0_to_max(value in js_numbers()) {
        match validate::non_negative_ms("timeoutMs", value) {
            Ok(duration) => {
                prop_assert!(whole_in(value, 0.0, MAX), "accepted {value:?}");
                // -0.0 is accepted as 0, and 0.0 == -0.0.
                prop_assert_eq!(duration.as_millis() as f64, value);
            }
            Err(err) => {
                prop_assert!(!whole_in(value, 0.0, MAX), "rejected {value:?}");
                assert_invalid(err, "timeoutMs", InvalidKind::Range)?;
            }
        }
    }

    #[test]
    fn count_accepts_exactly_whole_numbers_up_to_its_max(
        value in js_numbers(),
        max in prop_oneof![Just(MAX_RETRIES), Just(0u32), Just(u32::MAX), any::<u32>()],
    ) {
        match validate::count("maxRetries", value, max) {
            Ok(n) => {
                prop_assert!(whole_in(value, 0.0, f64::from(max)), "accepted {value:?}");
                prop_assert!(n <= max);
                prop_assert_eq!(f64::from(n), value);
            }
            Err(err) => {
                prop_assert!(!whole_in(value, 0.0, f64::from(max)), "rejected {value:?}");
                assert_invalid(err, "maxRetries", InvalidKind::Range)?;
            }
        }
    }

    #[test]
    fn js_number_prints_every_number_readably(value in js_numbers()) {
        let shown = validate::js_number(value);
        if value.is_nan() {
            prop_assert_eq!(shown, "NaN");
        } else if value.is_infinite() {
            prop_assert_eq!(shown, if value > 0.0 { "Infinity" } else { "-Infinity" });
        } else {
            // Round-trips (Rust's shortest representation, or an exact integer).
            prop_assert_eq!(shown.parse::<f64>().ok(), Some(value), "{}", shown);
        }
    }
}

proptest! {
    #![proptest_config(config(2_000))]

    #[test]
    fn key_accepts_any_non_empty_string_within_the_byte_bound(key in hostile_strings()) {
        match validate::key("key", &key) {
            Ok(()) => prop_assert!(!key.is_empty() && key.len() <= MAX_KEY_BYTES),
            Err(err) => {
                prop_assert!(key.is_empty());
                assert_invalid(err, "key", InvalidKind::Type)?;
            }
        }
    }
}

proptest! {
    // Each case builds a ~4 MB string: a few are enough to pin the boundary.
    #![proptest_config(config(12))]

    #[test]
    fn key_bound_counts_bytes_not_characters(
        chars in (MAX_KEY_BYTES / 2 - 3)..=(MAX_KEY_BYTES / 2 + 3),
        tail in prop::sample::select(vec!["", "k", "é", "\0", "🔒"]),
    ) {
        // Two-byte characters: the byte length is twice the character count.
        let key = format!("{}{tail}", "é".repeat(chars));
        match validate::key("name", &key) {
            Ok(()) => prop_assert!(key.len() <= MAX_KEY_BYTES),
            Err(err) => {
                prop_assert!(key.len() > MAX_KEY_BYTES);
                let message = assert_invalid(err, "name", InvalidKind::Range)?;
                prop_assert!(message.contains(&key.len().to_string()));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// keys
// ---------------------------------------------------------------------------------------

fn first(hay: &[u8], byte: u8) -> Option<usize> {
    hay.iter().position(|&b| b == byte)
}

fn contains_slice(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

proptest! {
    #![proptest_config(config(3_000))]

    /// Redis Cluster's rule: the tag is what lies between the first `{` and the first `}`
    /// after it, when that is non-empty; otherwise the whole key is hashed.
    #[test]
    fn hash_tag_follows_the_cluster_spec(key in key_bytes()) {
        let tag = keys::hash_tag(&key);
        // Always a sub-slice of the key itself.
        let (start, end) = (key.as_ptr() as usize, key.as_ptr() as usize + key.len());
        prop_assert!(tag.as_ptr() as usize >= start);
        prop_assert!(tag.as_ptr() as usize + tag.len() <= end);
        let open = first(&key, b'{');
        let close = open.and_then(|o| first(&key[o + 1..], b'}').map(|c| o + 1 + c));
        match (open, close) {
            (Some(o), Some(c)) if c > o + 1 => {
                prop_assert_eq!(tag, &key[o + 1..c]);
                let closed = tag.contains(&b'}');
                prop_assert!(!tag.is_empty() && !closed, "bad tag {:?}", tag);
            }
            _ => prop_assert_eq!(tag, &key[..]),
        }
        // A tag is its own tag.
        prop_assert_eq!(keys::hash_tag(tag), tag);
    }

    #[test]
    fn slot_is_in_range_and_depends_only_on_the_tag(key in key_bytes()) {
        let slot = keys::slot(&key);
        prop_assert!(slot < 16384);
        prop_assert_eq!(slot, keys::slot(keys::hash_tag(&key)));
    }

    #[test]
    fn keys_with_the_same_tag_share_a_slot(
        before in prop::collection::vec(any::<u8>().prop_filter("no {", |b| *b != b'{'), 0..8),
        tag in prop::collection::vec(any::<u8>().prop_filter("no }", |b| *b != b'}'), 1..12),
        after in prop::collection::vec(any::<u8>(), 0..12),
    ) {
        let key = [&before[..], b"{", &tag[..], b"}", &after[..]].concat();
        prop_assert_eq!(keys::hash_tag(&key), &tag[..]);
        prop_assert_eq!(keys::slot(&key), keys::slot(&tag));
    }

}

proptest! {
    // A key with a `}` but no tag costs a short-tag search (milliseconds on a debug build).
    #![proptest_config(config(200))]

    /// The property Redis Cluster (and the one-slot Lua scripts) rely on: every key beside
    /// a lock key hashes to the lock key's slot. It also must not be the lock key, must
    /// carry its suffix, and must contain the whole lock key (so distinct locks never share
    /// a sibling).
    #[test]
    fn siblings_share_the_slot_of_the_lock_key(
        key in key_bytes().prop_filter("lock keys are never empty", |k| !k.is_empty()),
        suffix in prop_oneof![Just("fence".to_string()), Just("owner".to_string()), "[a-z]{1,8}"],
    ) {
        let sibling = keys::sibling_key(&key, &suffix);
        prop_assert_eq!(keys::slot(&sibling), keys::slot(&key), "sibling {:?}", String::from_utf8_lossy(&sibling));
        prop_assert_ne!(&sibling, &key);
        prop_assert!(contains_slice(&sibling, suffix.as_bytes()));
        prop_assert!(contains_slice(&sibling, &key));
        // A sibling always carries a real hash tag, so Cluster routes it by that tag.
        prop_assert!(keys::hash_tag(&sibling).len() < sibling.len());
        prop_assert_eq!(keys::fence_key(&key), keys::sibling_key(&key, "fence"));
        prop_assert_eq!(keys::owner_key(&key), keys::sibling_key(&key, "owner"));
        prop_assert_ne!(keys::fence_key(&key), keys::owner_key(&key));
    }

}

proptest! {
    #![proptest_config(config(3_000))]

    /// `/[\s\W]+/g` -> `-`, as @logdna/exclusive-lock does it.
    #[test]
    fn slug_is_word_characters_and_single_dashes(text in hostile_strings()) {
        let slug = keys::slug(&text);
        prop_assert!(slug.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{:?}", slug);
        prop_assert!(!slug.contains("--"), "{:?}", slug);
        prop_assert_eq!(keys::slug(&slug), slug.clone(), "not idempotent");
        prop_assert!(slug.len() <= text.len());
        // Word characters survive in order; each maximal run of the rest is one '-'.
        let word = |c: &char| c.is_ascii_alphanumeric() || *c == '_';
        let kept: String = text.chars().filter(word).collect();
        prop_assert_eq!(slug.chars().filter(word).collect::<String>(), kept);
        let mut runs = 0;
        let mut in_run = false;
        for c in text.chars() {
            if !word(&c) && !in_run {
                runs += 1;
            }
            in_run = !word(&c);
        }
        prop_assert_eq!(slug.matches('-').count(), runs);
    }
}

#[test]
fn slots_match_redis_cluster_keyslot() {
    // Values of CLUSTER KEYSLOT on a real Redis.
    // CRC16 of "123456789" is 0x31C3 (the spec's check value), already below 16384.
    assert_eq!(keys::slot(b"123456789"), 0x31C3);
    assert_eq!(keys::slot(b"foo"), 12182);
    assert_eq!(keys::slot(b"bar"), 5061);
    assert_eq!(
        keys::slot(b"{user1000}.following"),
        keys::slot(b"{user1000}.followers")
    );
    assert_eq!(keys::slot(b""), 0);
}

/// All strings over a small, brace-heavy alphabet, up to `len` characters.
fn all_strings(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut layer = vec![Vec::new()];
    for _ in 0..len {
        layer = layer
            .iter()
            .flat_map(|s: &Vec<u8>| {
                alphabet.iter().map(move |&c| {
                    let mut next = s.clone();
                    next.push(c);
                    next
                })
            })
            .collect();
        out.extend(layer.iter().cloned());
    }
    out
}

/// Exhaustively over short keys: under one prefix, two different lock keys never share a
/// fence counter (each of the three layouts embeds the whole lock key unambiguously).
#[test]
fn distinct_lock_keys_never_share_a_fence_key() {
    // Keys with a `}` but no tag take the slow layout (a search for a short tag of the same
    // slot, some milliseconds on a debug build), so the untagged prefixes go less deep.
    for (prefix, depth) in [
        (&b"lock:"[..], 4),
        (b"exclusive-lock:", 4),
        (b"lock:{app}:", 7),
    ] {
        let mut seen: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for key in all_strings(b"{}x:", depth) {
            let lock_key = [prefix, &key[..]].concat();
            let fence = keys::fence_key(&lock_key);
            assert_eq!(keys::slot(&fence), keys::slot(&lock_key));
            if let Some(other) = seen.insert(fence.clone(), lock_key.clone()) {
                panic!(
                    "{:?} and {:?} share the fence key {:?}",
                    String::from_utf8_lossy(&other),
                    String::from_utf8_lossy(&lock_key),
                    String::from_utf8_lossy(&fence)
                );
            }
        }
    }
}

/// Whatever the prefix (even none, where every text is a lock key), no key beside a lock is
/// the lock key of anything: lock keys are UTF-8 text, sibling keys never are.
#[test]
fn sibling_keys_are_never_lock_keys() {
    for prefix in [&b""[..], b"lock:", b"lock:{app}:", b"{", b"{app}:"] {
        for key in all_strings(b"{}x:", 3)
            .into_iter()
            .filter(|k| !k.is_empty())
        {
            let lock_key = [prefix, &key[..]].concat();
            for suffix in ["fence", "owner", "waiting", "released", "line", "alive"] {
                let sibling = keys::sibling_key(&lock_key, suffix);
                assert!(
                    std::str::from_utf8(&sibling).is_err(),
                    "the {suffix} key of {:?} is text, so it could be a lock key",
                    String::from_utf8_lossy(&lock_key)
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// endpoint
// ---------------------------------------------------------------------------------------

/// Every password carries the marker `Zq`, which no other generated part contains, so any
/// `Zq` in an error or a Debug print is a leak.
const MARK: &str = "Zq";

fn passwords() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9]{0,10}".prop_map(|s| format!("{MARK}{s}")),
        "[a-z0-9%@:/#?\\[\\] ]{0,10}".prop_map(|s| format!("{MARK}{s}")),
        any::<String>().prop_map(|s| format!("{MARK}{s}")),
        Just(format!("{MARK}%41%4")),
        Just(format!("{MARK}%FF%FE")),
    ]
}

#[derive(Debug, Clone)]
struct UrlParts {
    scheme: &'static str,
    user: Option<String>,
    password: Option<String>,
    host: String,
    port: Option<String>,
    path: Option<String>,
    query: Option<String>,
    fragment: Option<String>,
}

impl UrlParts {
    fn render(&self) -> String {
        let mut url = format!("{}://", self.scheme);
        match (&self.user, &self.password) {
            (Some(u), Some(p)) => url.push_str(&format!("{u}:{p}@")),
            (None, Some(p)) => url.push_str(&format!(":{p}@")),
            (Some(u), None) => url.push_str(&format!("{u}@")),
            (None, None) => {}
        }
        url.push_str(&self.host);
        if let Some(port) = &self.port {
            url.push_str(&format!(":{port}"));
        }
        if let Some(path) = &self.path {
            url.push_str(&format!("/{path}"));
        }
        if let Some(query) = &self.query {
            url.push_str(&format!("?{query}"));
        }
        if let Some(fragment) = &self.fragment {
            url.push_str(&format!("#{fragment}"));
        }
        url
    }
}

fn url_parts() -> impl Strategy<Value = UrlParts> {
    let scheme = prop::sample::select(vec![
        "redis",
        "rediss",
        "unix",
        "redis+unix",
        "valkey",
        "valkeys",
        "http",
        "REDIS",
        "",
        "redis:",
    ]);
    let host = prop_oneof![
        prop::sample::select(vec![
            "localhost",
            "127.0.0.1",
            "[::1]",
            "[::]",
            "0.0.0.0",
            "",
            "exa mple",
            "h%41st",
            "[bad",
            "/tmp/redis.sock",
            "xn--nxasmq6b",
        ])
        .prop_map(String::from),
        "[a-y0-9.-]{0,16}",
    ];
    let port = prop_oneof![
        any::<u32>().prop_map(|p| p.to_string()),
        (0u32..70_000).prop_map(|p| p.to_string()),
        "[a-y0-9:-]{0,6}",
    ];
    let path = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (-3i64..20).prop_map(|n| n.to_string()),
        Just("99999999999999999999".to_string()),
        "[a-y0-9/%.-]{0,12}",
    ];
    (
        scheme,
        proptest::option::of("[a-y0-9%._-]{0,8}"),
        proptest::option::of(passwords()),
        host,
        proptest::option::of(port),
        proptest::option::of(path),
        proptest::option::of("[a-y0-9=&%_]{0,16}"),
        proptest::option::of(prop_oneof![Just("insecure".to_string()), "[a-y]{0,6}"]),
    )
        .prop_map(
            |(scheme, user, password, host, port, path, query, fragment)| UrlParts {
                scheme,
                user,
                password,
                host,
                port,
                path,
                query,
                fragment,
            },
        )
}

/// Standard base64, so garbage DER gets through the PEM armour to the X.509 / key parsers.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// PEM-ish bytes: garbage, truncated or corrupt armour, and well-formed armour around garbage
/// DER (some of it starting like a real SEQUENCE). Each carries the marker, so an error that
/// quotes the PEM is caught too.
fn pem_bytes() -> impl Strategy<Value = Vec<u8>> {
    let body = prop::collection::vec(any::<u8>(), 0..64);
    let label = prop::sample::select(vec![
        "CERTIFICATE",
        "PRIVATE KEY",
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ]);
    let der = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        prop::collection::vec(any::<u8>(), 0..200).prop_map(|b| {
            // SEQUENCE with a long-form length, then garbage: deeper into the DER parsers.
            let len = b.len() as u16;
            [&[0x30, 0x82, (len >> 8) as u8, len as u8][..], &b[..]].concat()
        }),
    ];
    prop_oneof![
        body.clone().prop_map(|b| [MARK.as_bytes(), &b[..]].concat()),
        body.prop_map(|b| {
            [
                &b"-----BEGIN CERTIFICATE-----\n"[..],
                MARK.as_bytes(),
                &b[..],
                b"\n-----END CERTIFICATE-----\n",
            ]
            .concat()
        }),
        (label.clone(), der.clone(), der).prop_map(|(label, first, second)| {
            format!(
                "# {MARK}\n-----BEGIN {label}-----\n{}\n-----END {label}-----\n-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
                base64(&first),
                base64(&second)
            )
            .into_bytes()
        }),
        Just(format!("-----BEGIN CERTIFICATE-----\n{MARK}").into_bytes()),
    ]
}

fn spec_fields() -> impl Strategy<Value = Spec> {
    let plain = (
        proptest::option::of("[a-y0-9.-]{0,12}"),
        proptest::option::of(any::<u16>()),
        proptest::option::of("/[a-y0-9/.]{0,12}"),
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop_oneof![any::<i64>(), -3i64..20]),
        proptest::option::of("[a-y0-9]{0,8}"),
        proptest::option::of(passwords()),
        proptest::option::of((1u64..=MAX_MS).prop_map(Duration::from_millis)),
    );
    let tls = prop_oneof![
        2 => Just((None, None, None, None, None)),
        2 => (
            proptest::option::of(pem_bytes()),
            proptest::option::of(pem_bytes()),
            proptest::option::of(pem_bytes()),
            proptest::option::of(prop_oneof![Just("localhost".to_string()), "[a-y0-9.\\[\\]-]{0,12}"]),
            proptest::option::of(any::<bool>()),
        ),
    ];
    (plain, tls).prop_map(
        |(
            (host, port, path, tls, db, username, password, connect_timeout),
            (tls_ca, tls_cert, tls_key, tls_servername, tls_reject_unauthorized),
        )| {
            Spec(EndpointSpec {
                host,
                port,
                path,
                tls,
                tls_ca,
                tls_cert,
                tls_key,
                tls_servername,
                tls_reject_unauthorized,
                db,
                username,
                password,
                connect_timeout,
                ..Default::default()
            })
        },
    )
}

/// EndpointSpec has no Debug (it holds a password); proptest needs one to report a case.
#[derive(Clone)]
struct Spec(EndpointSpec);

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.0;
        f.debug_struct("EndpointSpec")
            .field("url", &s.url)
            .field("host", &s.host)
            .field("port", &s.port)
            .field("path", &s.path)
            .field("tls", &s.tls)
            .field(
                "tls_ca",
                &s.tls_ca
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned()),
            )
            .field(
                "tls_cert",
                &s.tls_cert
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned()),
            )
            .field(
                "tls_key",
                &s.tls_key
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned()),
            )
            .field("tls_servername", &s.tls_servername)
            .field("tls_reject_unauthorized", &s.tls_reject_unauthorized)
            .field("db", &s.db)
            .field("username", &s.username)
            .field("password", &s.password)
            .finish()
    }
}

/// What every endpoint spec must satisfy, whether it parsed or not.
fn check_endpoint(spec: EndpointSpec) -> Result<(), TestCaseError> {
    let explicit = spec.clone();
    match Endpoint::from_spec(spec) {
        Err(err) => {
            prop_assert_eq!(err.code(), "EINVAL");
            let (text, debug) = (err.to_string(), format!("{err:?}"));
            prop_assert!(!text.contains(MARK), "error reveals a secret: {}", text);
            prop_assert!(!debug.contains(MARK), "error reveals a secret: {}", debug);
            match err {
                LockError::Invalid { arg, message, .. } => {
                    prop_assert!(
                        message.to_lowercase().contains(arg),
                        "{:?} does not name {}",
                        message,
                        arg
                    )
                }
                other => prop_assert!(false, "not EINVAL: {:?}", other),
            }
        }
        Ok(endpoint) => {
            let debug = format!("{endpoint:?}");
            prop_assert!(!debug.contains(MARK), "Debug reveals a secret: {}", debug);
            // Explicit fields win over the URL.
            if let Some(db) = explicit.db {
                prop_assert_eq!(endpoint.db, db);
            }
            if explicit.password.is_some() {
                prop_assert_eq!(&endpoint.password, &explicit.password);
            }
            if let Some(path) = &explicit.path {
                prop_assert!(matches!(&endpoint.address, Address::Unix(p) if p == path));
            } else if let Address::Tcp { host, port, .. } = &endpoint.address {
                if let Some(h) = &explicit.host {
                    prop_assert_eq!(host, h);
                }
                if let Some(p) = explicit.port {
                    prop_assert_eq!(*port, p);
                }
            }
            // TLS that was asked for is never dropped.
            if explicit.tls == Some(true) {
                prop_assert!(endpoint.is_tls());
            }
            prop_assert_eq!(
                endpoint.connect_timeout,
                explicit
                    .connect_timeout
                    .unwrap_or(native_redis_lock::core::api::DEFAULT_CONNECT_TIMEOUT)
            );
            // Building the connection settings never panics either (TLS, unix, any db).
            for resp3 in [true, false] {
                if let Err(err) = endpoint.connection_info(resp3) {
                    prop_assert!(!err.to_string().contains(MARK));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(3_000))]

    #[test]
    fn structured_urls_never_panic_or_leak_the_password(parts in url_parts()) {
        check_endpoint(EndpointSpec { url: Some(parts.render()), ..Default::default() })?;
    }

    #[test]
    fn arbitrary_url_strings_never_panic(url in hostile_strings(), password in passwords()) {
        // A password beside a garbage URL: the error still must not show it.
        check_endpoint(EndpointSpec {
            url: Some(url.replace(MARK, "")),
            password: Some(password),
            ..Default::default()
        })?;
    }

    #[test]
    fn explicit_fields_win_and_never_leak(
        parts in proptest::option::of(url_parts()),
        fields in spec_fields(),
    ) {
        check_endpoint(EndpointSpec { url: parts.map(|p| p.render()), ..fields.0 })?;
    }
}

/// LIBRARY GAP (reported): the `db` field rejects negative numbers, but a URL path does
/// not: `redis://host/-1` gives an endpoint with db -1, which only fails at SELECT time.
#[test]

fn a_negative_db_in_the_url_is_rejected_like_the_db_field() {
    let spec = EndpointSpec {
        url: Some("redis://127.0.0.1:6379/-1".into()),
        ..Default::default()
    };
    let err = Endpoint::from_spec(spec).expect_err("db -1 must be rejected");
    assert_eq!(err.code(), "EINVAL");
}

// ---------------------------------------------------------------------------------------
// reply decoding
// ---------------------------------------------------------------------------------------

/// A server error as the parser builds it (the type has no public constructor).
fn server_error_value(code: &str, detail: &str) -> Value {
    let wire = if detail.is_empty() {
        format!("-{code}\r\n")
    } else {
        format!("-{code} {detail}\r\n")
    };
    redis::parse_redis_value(wire.as_bytes()).unwrap_or(Value::Nil)
}

fn server_errors() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            prop::sample::select(vec![
                "ERR",
                "WRONGTYPE",
                "NOSCRIPT",
                "NOAUTH",
                "WRONGPASS",
                "NOPERM",
                "BUSY",
                "LOADING",
                "MOVED",
                "ASK",
                "CROSSSLOT",
                "READONLY",
                "OOM",
            ])
            .prop_map(String::from),
            "[A-Z]{1,10}",
        ],
        "[ -~]{0,40}",
    )
        .prop_map(|(code, detail)| server_error_value(&code, &detail))
}

fn leaf_values() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Nil),
        Just(Value::Okay),
        any::<i64>().prop_map(Value::Int),
        prop::sample::select(vec![0i64, 1, -1, -2, i64::MIN, i64::MAX]).prop_map(Value::Int),
        prop::collection::vec(any::<u8>(), 0..24).prop_map(Value::BulkString),
        any::<i64>().prop_map(|n| Value::BulkString(n.to_string().into_bytes())),
        "[0-9 +.e-]{0,22}".prop_map(|s| Value::BulkString(s.into_bytes())),
        "[ -~]{0,16}".prop_map(Value::SimpleString),
        proptest::num::f64::ANY.prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        "-?[0-9]{1,40}".prop_map(|s| Value::BigNumber(s.into_bytes())),
        (
            prop_oneof![
                Just(redis::VerbatimFormat::Text),
                Just(redis::VerbatimFormat::Markdown),
                "[a-z]{0,3}".prop_map(redis::VerbatimFormat::Unknown),
            ],
            any::<String>(),
        )
            .prop_map(|(format, text)| Value::VerbatimString { format, text }),
        server_errors(),
    ]
}

fn values() -> impl Strategy<Value = Value> {
    leaf_values().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Set),
            prop::collection::vec((inner.clone(), inner.clone()), 0..3).prop_map(Value::Map),
            (
                inner.clone(),
                prop::collection::vec((inner.clone(), inner.clone()), 0..2)
            )
                .prop_map(|(data, attributes)| Value::Attribute {
                    data: Box::new(data),
                    attributes,
                }),
            (
                prop_oneof![
                    Just(PushKind::Disconnection),
                    Just(PushKind::Message),
                    "[a-z]{0,6}".prop_map(PushKind::Other),
                ],
                prop::collection::vec(inner, 0..3)
            )
                .prop_map(|(kind, data)| Value::Push { kind, data }),
        ]
    })
}

/// Replies shaped like what the scripts answer, with the odd element swapped for garbage.
fn script_replies() -> impl Strategy<Value = Value> {
    let int_like = prop_oneof![
        any::<i64>().prop_map(Value::Int),
        any::<i64>().prop_map(|n| Value::BulkString(n.to_string().into_bytes())),
        leaf_values(),
    ];
    prop_oneof![
        prop::collection::vec(int_like.clone(), 0..4).prop_map(Value::Array),
        (int_like.clone(), int_like.clone()).prop_map(|(a, b)| Value::Array(vec![a, b])),
        (
            prop_oneof![
                Just(Value::Nil),
                "[ -~]{0,8}".prop_map(|s| Value::BulkString(s.into_bytes())),
                prop::collection::vec(any::<u8>(), 0..8).prop_map(Value::BulkString),
            ],
            int_like
        )
            .prop_map(|(a, b)| Value::Array(vec![a, b])),
        values(),
    ]
}

/// Decodes as `T` both ways the crate offers; both must agree and neither may panic.
fn decode<T: FromRedisValue + PartialEq + std::fmt::Debug>(
    v: &Value,
) -> Result<Option<T>, TestCaseError> {
    let by_ref = T::from_redis_value_ref(v);
    let owned = T::from_redis_value(v.clone());
    prop_assert_eq!(
        by_ref.is_ok(),
        owned.is_ok(),
        "ref and owned decoding disagree on {:?}",
        v
    );
    match (by_ref, owned) {
        (Ok(a), Ok(b)) => {
            prop_assert_eq!(&a, &b);
            Ok(Some(a))
        }
        _ => Ok(None),
    }
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

proptest! {
    #![proptest_config(config(3_000))]

    /// `(i64, i64)` is the acquire script's reply (`{1, fence}` / `{0, pttl}`), `i64` that of
    /// release / extend / refresh / EXISTS, `(Option<String>, i64)` ExclusiveLock.inspect's
    /// MULTI GET PTTL, `String` SCRIPT LOAD's. Whatever Redis (or a proxy) sends back, the
    /// decode is an Ok or an Err.
    #[test]
    fn replies_decode_to_ok_or_err_never_panic(v in script_replies()) {
        let pair = decode::<(i64, i64)>(&v)?;
        let int = decode::<i64>(&v)?;
        let bytes_pair = decode::<(Option<Vec<u8>>, i64)>(&v)?;
        let string_pair = decode::<(Option<String>, i64)>(&v)?;
        let string = decode::<String>(&v)?;
        decode::<Vec<i64>>(&v)?;
        decode::<Option<i64>>(&v)?;
        decode::<bool>(&v)?;
        // The watchdog's pipeline: one result per command.
        let _ = Vec::<redis::RedisResult<i64>>::from_redis_value(v.clone());

        match &v {
            Value::Int(n) => prop_assert_eq!(int, Some(*n)),
            Value::ServerError(_) | Value::Nil => {
                prop_assert!(int.is_none());
                prop_assert!(pair.is_none());
            }
            Value::Array(items) => {
                // A tuple never reads a reply of the wrong length.
                if items.len() != 2 {
                    prop_assert!(pair.is_none() && bytes_pair.is_none() && string_pair.is_none());
                }
                if let [a, b] = &items[..] {
                    if let (Some(a), Some(b)) = (as_int(a), as_int(b)) {
                        prop_assert_eq!(pair, Some((a, b)));
                    }
                    if let (Value::Nil, Some(b)) = (a, as_int(b)) {
                        prop_assert_eq!(&bytes_pair, &Some((None, b)));
                        prop_assert_eq!(&string_pair, &Some((None, b)));
                    }
                    if let (Value::BulkString(bytes), Some(b)) = (a, as_int(b)) {
                        prop_assert_eq!(&bytes_pair, &Some((Some(bytes.clone()), b)));
                        let text = String::from_utf8(bytes.clone()).ok();
                        prop_assert_eq!(string_pair.is_some(), text.is_some());
                    }
                }
            }
            Value::BulkString(bytes) => {
                prop_assert_eq!(string.is_some(), std::str::from_utf8(bytes).is_ok());
                if let Ok(text) = std::str::from_utf8(bytes) {
                    if let Ok(n) = text.parse::<i64>() {
                        prop_assert_eq!(int, Some(n));
                    }
                }
            }
            _ => {}
        }

        // What the lock engine then does with an acquire reply is total as well.
        if let Some((won, n)) = pair {
            let fence = n.max(0) as u64;
            prop_assert!(won != 1 || fence <= i64::MAX as u64);
            let holder_ttl = u64::try_from(n).ok().map(Duration::from_millis);
            prop_assert_eq!(holder_ttl.is_some(), n >= 0);
        }
    }

    /// Raw bytes off a (hostile) socket: the parser answers Ok or Err.
    #[test]
    fn wire_bytes_parse_to_ok_or_err_never_panic(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..64),
            prop::collection::vec(
                prop::sample::select(b"*$:+-_,#=%~>|!(\r\n0123456789-ab".to_vec()), 0..64),
        ]
    ) {
        if let Ok(v) = redis::parse_redis_value(&bytes) {
            decode::<(i64, i64)>(&v)?;
            decode::<i64>(&v)?;
        }
    }
}

// ---------------------------------------------------------------------------------------
// error mapping
// ---------------------------------------------------------------------------------------

const KINDS: &[ErrorKind] = &[
    ErrorKind::Parse,
    ErrorKind::AuthenticationFailed,
    ErrorKind::UnexpectedReturnType,
    ErrorKind::InvalidClientConfig,
    ErrorKind::Io,
    ErrorKind::Client,
    ErrorKind::Extension,
    ErrorKind::MasterNameNotFoundBySentinel,
    ErrorKind::NoValidReplicasFoundBySentinel,
    ErrorKind::EmptySentinelList,
    ErrorKind::ClusterConnectionNotFound,
    ErrorKind::RESP3NotSupported,
    ErrorKind::Server(ServerErrorKind::ResponseError),
    ErrorKind::Server(ServerErrorKind::ExecAbort),
    ErrorKind::Server(ServerErrorKind::BusyLoading),
    ErrorKind::Server(ServerErrorKind::NoScript),
    ErrorKind::Server(ServerErrorKind::Moved),
    ErrorKind::Server(ServerErrorKind::Ask),
    ErrorKind::Server(ServerErrorKind::TryAgain),
    ErrorKind::Server(ServerErrorKind::ClusterDown),
    ErrorKind::Server(ServerErrorKind::CrossSlot),
    ErrorKind::Server(ServerErrorKind::MasterDown),
    ErrorKind::Server(ServerErrorKind::ReadOnly),
    ErrorKind::Server(ServerErrorKind::NotBusy),
    ErrorKind::Server(ServerErrorKind::NoSub),
    ErrorKind::Server(ServerErrorKind::NoPerm),
];

const IO_KINDS: &[std::io::ErrorKind] = &[
    std::io::ErrorKind::TimedOut,
    std::io::ErrorKind::WouldBlock,
    std::io::ErrorKind::ConnectionRefused,
    std::io::ErrorKind::ConnectionReset,
    std::io::ErrorKind::ConnectionAborted,
    std::io::ErrorKind::BrokenPipe,
    std::io::ErrorKind::NotConnected,
    std::io::ErrorKind::UnexpectedEof,
    std::io::ErrorKind::NotFound,
    std::io::ErrorKind::PermissionDenied,
    std::io::ErrorKind::AddrInUse,
    std::io::ErrorKind::AddrNotAvailable,
    std::io::ErrorKind::InvalidData,
    std::io::ErrorKind::InvalidInput,
    std::io::ErrorKind::Interrupted,
    std::io::ErrorKind::OutOfMemory,
    std::io::ErrorKind::Other,
];

const DESCRIPTIONS: &[&str] = &["", "An error was signalled by the server", "é🔒\0\r\n"];

/// Details of every size around the 300-byte cut, in multi-byte text so the cut lands
/// inside a character.
fn details() -> impl Strategy<Value = String> {
    prop_oneof![
        hostile_strings(),
        (0usize..400, prop::sample::select(vec!["a", "é", "🔒", "€"]))
            .prop_map(|(n, c)| c.repeat(n)),
        (290usize..310).prop_map(|n| format!("{}{}", "a".repeat(n), "🔒".repeat(4))),
    ]
}

fn redis_errors() -> impl Strategy<Value = RedisError> {
    prop_oneof![
        (
            prop::sample::select(KINDS),
            prop::sample::select(DESCRIPTIONS),
            details()
        )
            .prop_map(|(kind, desc, detail)| RedisError::from((kind, desc, detail))),
        (
            prop::sample::select(KINDS),
            prop::sample::select(DESCRIPTIONS)
        )
            .prop_map(|(kind, desc)| RedisError::from((kind, desc))),
        (prop::sample::select(IO_KINDS), details())
            .prop_map(|(kind, msg)| RedisError::from(std::io::Error::new(kind, msg))),
        (
            prop_oneof![
                prop::sample::select(vec!["NOAUTH", "WRONGPASS", "NOPERM", "ERR", "BUSY", ""])
                    .prop_map(String::from),
                any::<String>(),
            ],
            proptest::option::of(details()),
        )
            .prop_map(|(code, detail)| redis::make_extension_error(code, detail)),
        server_errors().prop_filter_map("a server error", |v| match v {
            Value::ServerError(err) => Some(RedisError::from(err)),
            _ => None,
        }),
        details().prop_map(|d| RedisError::from(redis::ParsingError::from(d))),
    ]
}

const CODES: &[&str] = &["ECONNECTION", "ETIMEDOUT", "EAUTH", "ENOPERM", "EREDIS"];

proptest! {
    #![proptest_config(config(3_000))]

    #[test]
    fn every_redis_error_maps_to_a_stable_infrastructure_or_redis_code(err in redis_errors()) {
        let first = LockError::from(err.clone());
        let again = LockError::from(err.clone());
        let code = first.code();
        prop_assert_eq!(code, again.code(), "unstable code");
        prop_assert!(CODES.contains(&code), "{} for {:?}", code, err);
        prop_assert_eq!(first.is_infrastructure(), code != "EREDIS");
        if err.is_timeout() {
            prop_assert_eq!(code, "ETIMEDOUT");
        } else if err.is_io_error() || err.is_connection_refusal() || err.is_connection_dropped() {
            prop_assert_eq!(code, "ECONNECTION");
        } else if err.kind() == ErrorKind::Parse {
            // Whatever answered does not speak RESP: the address is not a Redis server.
            prop_assert_eq!(code, "ECONNECTION");
            prop_assert!(first.to_string().contains("Redis protocol"));
        } else if matches!(err.code(), Some("NOAUTH" | "WRONGPASS")) {
            prop_assert_eq!(code, "EAUTH");
        } else if err.code() == Some("NOPERM") {
            prop_assert_eq!(code, "ENOPERM");
        }
        // The message is bounded, whatever the server or OS said.
        let text = first.to_string();
        prop_assert!(text.len() <= 350, "{} bytes", text.len());
    }
}

#[test]
fn base64_helper_matches_rfc_4648() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
}
