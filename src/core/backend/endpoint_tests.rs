//! Unit tests of `endpoint.rs`, kept apart so the library file holds no test-only unwraps.
use super::*;

/// A throwaway self-signed certificate (public material only; its key was not kept).
const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBtjCCAVugAwIBAgIUS0LV/9yXjUiCU9a+Y+SVSyXYMgwwCgYIKoZIzj0EAwIw
ITEfMB0GA1UEAwwWbmF0aXZlLXJlZGlzLWxvY2sgdGVzdDAgFw0yNjExMjExMDE0
MzRaGA8yMTI2MTAyODEwMTQzNFowITEfMB0GA1UEAwwWbmF0aXZlLXJlZGlzLWxv
Y2sgdGVzdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABMx2gMWWMYejmWCMqQm8
Bhrh7TkBP0+kM/Mrp37J5++b1XveluWt8G6M+hLn1djvAUx78BdxfMdW5paWBbIo
WVWjbzBtMB0GA1UdDgQWBBSfzRfPNNp03sBJYaI2BnUwg2wo2zAfBgNVHSMEGDAW
gBSfzRfPNNp03sBJYaI2BnUwg2wo2zAPBgNVHRMBAf8EBTADAQH/MBoGA1UdEQQT
MBGHBH8AAAGCCWxvY2FsaG9zdDAKBggqhkjOPQQDAgNJADBGAiEAvnQotUeAyY2d
RE/TyIjNsrt/jvjVdtrqOjQtWCUoRY4CIQCMpy0DXJGsARMPZoKzJOkUrxCLcNgb
cSsMfu6PSBV/4w==
-----END CERTIFICATE-----
";

fn spec_url(url: &str) -> EndpointSpec {
    EndpointSpec {
        url: Some(url.into()),
        ..Default::default()
    }
}

fn tls_of(e: &Endpoint) -> Option<&Tls> {
    e.tls()
}

#[test]
fn memory_urls_name_an_embedded_keyspace_and_take_nothing_of_a_network() {
    let e = Endpoint::from_spec(spec_url("memory://")).unwrap();
    assert!(matches!(&e.address, Address::Memory(name) if name.is_empty()));
    let named = Endpoint::from_spec(spec_url("memory://jobs")).unwrap();
    assert!(matches!(&named.address, Address::Memory(name) if name == "jobs"));
    assert!(named != e);
    for spec in [
        EndpointSpec {
            port: Some(6380),
            ..spec_url("memory://")
        },
        EndpointSpec {
            password: Some("secret".into()),
            ..spec_url("memory://")
        },
        EndpointSpec {
            tls: Some(true),
            ..spec_url("memory://")
        },
        spec_url("memory://a/b"),
        spec_url("memory://user@x"),
        spec_url("memory://user:secret@x"),
    ] {
        let err = Endpoint::from_spec(spec).unwrap_err();
        assert_eq!(err.code(), "EINVAL");
        assert!(!err.to_string().contains("secret"));
    }
}

#[test]
fn a_memory_name_is_only_ascii_letters_digits_dashes_underscores_and_dots() {
    for (name, shown) in [
        ("a b", "'a b'"),
        ("\u{fc}", "'\\u{fc}'"),
        ("%2F", "'%2F'"),
        ("\0", "'\\u{0}'"),
        ("a\tb", "'a\\tb'"),
        ("it's", "'it\\'s'"),
    ] {
        let err = Endpoint::from_spec(spec_url(&format!("memory://{name}"))).unwrap_err();
        assert_eq!(err.code(), "EINVAL", "{name:?}");
        let message = err.to_string();
        assert!(message.contains(shown), "{name:?}: {message}");
        assert!(
            message.bytes().all(|b| (0x20..0x7f).contains(&b)),
            "{message}"
        );
    }
    let long = "x".repeat(100) + " ";
    let message = Endpoint::from_spec(spec_url(&format!("memory://{long}")))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(&format!("'{}'...", "x".repeat(64))),
        "{message}"
    );
    for name in ["", "jobs", "A-z_0.9"] {
        let e = Endpoint::from_spec(spec_url(&format!("memory://{name}"))).unwrap();
        assert!(matches!(&e.address, Address::Memory(n) if n == name));
    }
}

#[test]
fn parses_urls_with_credentials_and_db() {
    let e = Endpoint::from_spec(spec_url("rediss://bob:s%40cret@cache.local:6380/4")).unwrap();
    assert!(
        matches!(&e.address, Address::Tcp { host, port: 6380, tls: Some(_) } if host == "cache.local")
    );
    assert_eq!(e.db, 4);
    assert_eq!(e.username.as_deref(), Some("bob"));
    assert_eq!(e.password.as_deref(), Some("s@cret"));
}

#[test]
fn explicit_fields_override_the_url() {
    let e = Endpoint::from_spec(EndpointSpec {
        db: Some(2),
        port: Some(7000),
        ..spec_url("redis://localhost/1")
    })
    .unwrap();
    assert_eq!(e.db, 2);
    assert!(matches!(e.address, Address::Tcp { port: 7000, .. }));
}

#[test]
fn a_bad_url_error_never_echoes_the_password() {
    let err = Endpoint::from_spec(spec_url("http://u:hunter2@x")).unwrap_err();
    assert_eq!(err.code(), "EINVAL");
    assert!(!err.to_string().contains("hunter2"));
}

#[test]
fn debug_output_hides_the_password() {
    let e = Endpoint::from_spec(spec_url("redis://:hunter2@localhost")).unwrap();
    assert!(!format!("{e:?}").contains("hunter2"));
}

#[test]
fn tls_comes_from_the_url_the_flag_or_any_tls_detail() {
    let plain = Endpoint::from_spec(spec_url("redis://localhost")).unwrap();
    assert!(!plain.is_tls());
    assert!(Endpoint::from_spec(spec_url("rediss://localhost"))
        .unwrap()
        .is_tls());
    let flagged = Endpoint::from_spec(EndpointSpec {
        tls: Some(true),
        ..spec_url("redis://localhost")
    })
    .unwrap();
    assert!(flagged.is_tls());
    let with_ca = Endpoint::from_spec(EndpointSpec {
        tls_ca: Some(CERT.into()),
        port: Some(6380),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        tls_of(&with_ca).unwrap().ca.as_deref(),
        Some(CERT.as_bytes())
    );
    let host_over_rediss = Endpoint::from_spec(EndpointSpec {
        host: Some("other".into()),
        ..spec_url("rediss://localhost")
    })
    .unwrap();
    assert!(
        host_over_rediss.is_tls(),
        "a host override keeps the URL's TLS"
    );
}

#[test]
fn tls_asked_for_is_never_turned_off() {
    for spec in [
        EndpointSpec {
            tls: Some(false),
            ..spec_url("rediss://localhost")
        },
        EndpointSpec {
            tls: Some(false),
            tls_ca: Some(CERT.into()),
            ..Default::default()
        },
        EndpointSpec {
            tls: Some(true),
            path: Some("/tmp/redis.sock".into()),
            ..Default::default()
        },
        EndpointSpec {
            path: Some("/tmp/redis.sock".into()),
            ..spec_url("rediss://localhost")
        },
    ] {
        let err = Endpoint::from_spec(spec).unwrap_err();
        assert_eq!(err.code(), "EINVAL", "{err}");
    }
}

#[test]
fn bad_tls_material_is_einval_without_quoting_it() {
    let cases = [
        (
            EndpointSpec {
                tls_ca: Some(b"not a certificate SECRETISH".to_vec()),
                ..Default::default()
            },
            "tls.ca",
        ),
        (
            EndpointSpec {
                tls_cert: Some(CERT.into()),
                ..Default::default()
            },
            "tls.key",
        ),
        (
            EndpointSpec {
                tls_key: Some(b"SECRETISH".to_vec()),
                ..Default::default()
            },
            "tls.cert",
        ),
        (
            EndpointSpec {
                tls_cert: Some(CERT.into()),
                tls_key: Some(
                    b"-----BEGIN PRIVATE KEY-----\nSECRETISH\n-----END PRIVATE KEY-----\n".to_vec(),
                ),
                ..Default::default()
            },
            "tls.key",
        ),
    ];
    for (spec, arg) in cases {
        match Endpoint::from_spec(spec).unwrap_err() {
            LockError::Invalid {
                arg: got, message, ..
            } => {
                assert_eq!(got, arg, "{message}");
                assert!(!message.contains("SECRETISH"), "{message}");
            }
            other => panic!("expected EINVAL, got {other:?}"),
        }
    }
}

#[test]
fn servername_must_be_the_host() {
    let with = |name: &str| {
        Endpoint::from_spec(EndpointSpec {
            tls_servername: Some(name.into()),
            ..spec_url("rediss://Cache.Local:6380")
        })
    };
    assert!(with("cache.local").is_ok());
    let err = with("other.example").unwrap_err();
    assert_eq!(err.code(), "EINVAL");
}

#[test]
fn reject_unauthorized_false_is_insecure_and_overrides_the_url() {
    let insecure = Endpoint::from_spec(EndpointSpec {
        tls_reject_unauthorized: Some(false),
        ..spec_url("rediss://localhost")
    })
    .unwrap();
    assert!(tls_of(&insecure).unwrap().insecure);
    let url_insecure = Endpoint::from_spec(spec_url("rediss://localhost/#insecure")).unwrap();
    assert!(tls_of(&url_insecure).unwrap().insecure);
    let verified = Endpoint::from_spec(EndpointSpec {
        tls_reject_unauthorized: Some(true),
        ..spec_url("rediss://localhost/#insecure")
    })
    .unwrap();
    assert!(!tls_of(&verified).unwrap().insecure);
    assert_ne!(
        insecure, verified,
        "different verification must not share a connection"
    );
}

#[test]
fn tls_settings_are_part_of_the_identity_and_never_printed() {
    let a = Endpoint::from_spec(EndpointSpec {
        tls_ca: Some(CERT.into()),
        ..spec_url("rediss://:hunter2@localhost")
    })
    .unwrap();
    let b = Endpoint::from_spec(spec_url("rediss://:hunter2@localhost")).unwrap();
    assert_ne!(a, b);
    assert_eq!(a.clone(), a);
    let printed = format!("{a:?}");
    assert!(printed.contains("rediss://localhost:6379"), "{printed}");
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(!printed.contains("MIIB"), "{printed}");
    assert!(a.client(true).is_ok());
    assert!(b.client(true).is_ok());
}
