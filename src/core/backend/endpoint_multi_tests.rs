//! Unit tests of the many-host addresses (endpoint_multi.rs, read by endpoint.rs): each URL
//! and option form of a cluster and a Sentinel set, each refusal and its message, and no
//! password shown anywhere.
use super::*;

fn url(url: &str) -> EndpointSpec {
    EndpointSpec {
        url: Some(url.into()),
        ..Default::default()
    }
}

fn parsed(spec: EndpointSpec) -> Endpoint {
    match Endpoint::parse(spec) {
        Ok(endpoint) => endpoint,
        Err(err) => panic!("refused: {err}"),
    }
}

/// The refusal of `spec`: its code, argument and message.
fn refused(spec: EndpointSpec) -> (String, Option<String>, String) {
    match Endpoint::parse(spec) {
        Ok(endpoint) => panic!("accepted: {endpoint:?}"),
        Err(err) => (err.code().to_owned(), arg_of(&err), err.to_string()),
    }
}

fn arg_of(err: &LockError) -> Option<String> {
    match err {
        LockError::Invalid { arg, .. } => Some(arg.to_string()),
        _ => None,
    }
}

fn hosts(list: &[(&str, u16)]) -> Vec<HostPort> {
    list.iter().map(|(h, p)| (h.to_string(), *p)).collect()
}

#[test]
fn a_cluster_url_names_its_seed_nodes_credentials_and_tls() {
    let e = parsed(url(
        "redis+cluster://u:p%40ss@10.0.0.1:7000,node-b:7001,[::1]:7002,c",
    ));
    assert!(
        matches!(&e.address, Address::Cluster { nodes, tls: None, .. }
        if *nodes == hosts(&[("10.0.0.1", 7000), ("node-b", 7001), ("::1", 7002), ("c", 6379)]))
    );
    assert_eq!(e.username.as_deref(), Some("u"));
    assert_eq!(e.password.as_deref(), Some("p@ss"));
    assert_eq!(e.db, 0);
    let shown = format!("{e:?}");
    assert!(shown.contains("redis+cluster://10.0.0.1:7000,node-b:7001,[::1]:7002,c:6379"));
    assert!(
        !shown.contains("p@ss") && !shown.contains("p%40ss"),
        "{shown}"
    );

    let tls = parsed(url("rediss+cluster://a:1,b:2"));
    assert!(matches!(
        &tls.address,
        Address::Cluster { tls: Some(_), .. }
    ));
    assert!(format!("{tls:?}").contains("rediss+cluster://a:1,b:2"));
}

#[test]
fn a_sentinel_url_names_its_sentinels_master_db_and_sentinel_credentials() {
    let e = parsed(url(
        "redis+sentinel://:master-secret@s1,s2:26380/mymaster/3?sentinelUsername=watch&sentinelPassword=s%3Dcret",
    ));
    match &e.address {
        Address::Sentinel {
            sentinels,
            name,
            tls,
            auth,
            nat,
        } => {
            assert_eq!(*sentinels, hosts(&[("s1", 26379), ("s2", 26380)]));
            assert!(nat.is_empty());
            assert_eq!(name, "mymaster");
            assert!(tls.is_none());
            assert_eq!(auth.username.as_deref(), Some("watch"));
            assert_eq!(auth.password.as_deref(), Some("s=cret"));
        }
        _ => panic!("not a Sentinel set: {e:?}"),
    }
    assert_eq!(e.db, 3);
    assert_eq!(e.password.as_deref(), Some("master-secret"));
    let shown = format!("{e:?}");
    assert!(
        shown.contains("redis+sentinel://s1:26379,s2:26380/mymaster"),
        "{shown}"
    );
    assert!(
        !shown.contains("secret") && !shown.contains("cret"),
        "{shown}"
    );

    let tls = parsed(url("rediss+sentinel://s1/m"));
    assert!(matches!(
        &tls.address,
        Address::Sentinel { tls: Some(_), .. }
    ));
}

#[test]
fn cluster_and_sentinels_options_read_as_their_urls_do() {
    let e = parsed(EndpointSpec {
        cluster: Some(vec![("a".into(), Some(7000)), ("b".into(), None)]),
        password: Some("pw".into()),
        tls: Some(true),
        ..Default::default()
    });
    assert!(
        matches!(&e.address, Address::Cluster { nodes, tls: Some(_), .. }
        if *nodes == hosts(&[("a", 7000), ("b", 6379)]))
    );
    assert_eq!(e.password.as_deref(), Some("pw"));

    let s = parsed(EndpointSpec {
        sentinels: Some(vec![("s1".into(), None), ("::1".into(), Some(5000))]),
        sentinel_name: Some("m".into()),
        sentinel_password: Some("spw".into()),
        db: Some(2),
        ..Default::default()
    });
    assert!(
        matches!(&s.address, Address::Sentinel { sentinels, name, auth, .. }
        if *sentinels == hosts(&[("s1", 26379), ("::1", 5000)]) && name == "m"
            && auth.password.as_deref() == Some("spw"))
    );
    assert_eq!(s.db, 2);
    assert!(!format!("{s:?}").contains("spw"));
}

#[test]
fn a_malformed_list_is_refused_naming_its_argument_and_quoting_no_secret() {
    let cases: Vec<(EndpointSpec, &str, &str)> = vec![
        (url("redis+cluster://"), "redis", "empty entry"),
        (url("redis+cluster://a:1,,b:2"), "redis", "empty entry"),
        (url("redis+cluster://u:secret@a:1,a:1"), "redis", "twice"),
        (
            url("redis+cluster://u:secret@a:1/2"),
            "redis",
            "database 0 only",
        ),
        (url("redis+cluster://a:99999"), "redis", "redis+cluster://"),
        (url("redis+cluster://a:0"), "redis", "redis+cluster://"),
        (
            url("redis+sentinel://u:secret@s1:1"),
            "redis",
            "name its master",
        ),
        (url("redis+sentinel://s1/m/-1"), "redis", "0 or more"),
        (
            url("redis+sentinel://s1/m/x/y"),
            "redis",
            "redis+sentinel://",
        ),
        (
            url("redis+sentinel://s1/m?password=secret"),
            "redis",
            "sentinelUsername",
        ),
        (
            EndpointSpec {
                cluster: Some(vec![]),
                ..Default::default()
            },
            "cluster",
            "at least one node",
        ),
        (
            EndpointSpec {
                cluster: Some(vec![("a".into(), Some(1)), ("a".into(), Some(1))]),
                ..Default::default()
            },
            "cluster",
            "twice",
        ),
        (
            EndpointSpec {
                cluster: Some(vec![("a b".into(), None)]),
                ..Default::default()
            },
            "cluster",
            "cluster[0]",
        ),
        (
            EndpointSpec {
                cluster: Some(vec![("a".into(), None)]),
                db: Some(1),
                ..Default::default()
            },
            "db",
            "database 0 only",
        ),
        (
            EndpointSpec {
                cluster: Some(vec![("a".into(), None)]),
                url: Some("redis://u:secret@a".into()),
                ..Default::default()
            },
            "url",
            "one or the other",
        ),
        (
            EndpointSpec {
                cluster: Some(vec![("a".into(), None)]),
                host: Some("b".into()),
                ..Default::default()
            },
            "redis",
            "no host, port or path",
        ),
        (
            EndpointSpec {
                cluster: Some(vec![("a".into(), None)]),
                sentinels: Some(vec![("s".into(), None)]),
                sentinel_name: Some("m".into()),
                ..Default::default()
            },
            "cluster",
            "both",
        ),
        (
            EndpointSpec {
                sentinels: Some(vec![("s".into(), None)]),
                ..Default::default()
            },
            "name",
            "name is required",
        ),
        (
            EndpointSpec {
                sentinel_name: Some("m".into()),
                sentinel_password: Some("secret".into()),
                ..Default::default()
            },
            "sentinels",
            "sentinels is required",
        ),
        (
            EndpointSpec {
                tls_servername: Some("a".into()),
                ..url("rediss+cluster://a:1,b:2")
            },
            "tls.servername",
            "many",
        ),
    ];
    for (spec, arg, words) in cases {
        let (code, named, message) = refused(spec);
        assert_eq!(code, "EINVAL", "{message}");
        assert_eq!(named.as_deref(), Some(arg), "{message}");
        assert!(message.contains(words), "{message:?} lacks {words:?}");
        assert!(!message.contains("secret"), "{message}");
    }
}

#[test]
fn a_cluster_and_a_sentinel_set_are_accepted_and_neither_is_one_address() {
    let cluster = Endpoint::from_spec(url("redis+cluster://u:secret@127.0.0.1:1")).unwrap();
    assert!(matches!(cluster.address, Address::Cluster { .. }));
    let sentinel = Endpoint::from_spec(url("redis+sentinel://:secret@127.0.0.1:1/m")).unwrap();
    assert!(matches!(sentinel.address, Address::Sentinel { .. }));
    // Each is reached through its own client, never as one address.
    for endpoint in [cluster, sentinel] {
        let err = endpoint.connection_info(true).unwrap_err();
        assert!(err.to_string().contains("not one address"), "{err}");
        assert!(!err.to_string().contains("secret"));
    }
}

#[test]
fn each_listed_node_connects_with_its_own_credentials() {
    let cluster = parsed(url("rediss+cluster://u:pw@a:7000,[::1]:7001"));
    let infos = cluster.node_connection_infos(true).unwrap();
    let shown: Vec<String> = infos.iter().map(|i| i.addr().to_string()).collect();
    assert_eq!(shown, ["a:7000", "::1:7001"]);
    assert!(infos
        .iter()
        .all(|i| matches!(i.addr(), ConnectionAddr::TcpTls { .. })));
    assert!(infos
        .iter()
        .all(|i| i.redis_settings().password() == Some("pw")
            && i.redis_settings().username() == Some("u")));

    let sentinel = parsed(url(
        "redis+sentinel://:master@s1:1,s2:2/m/4?sentinelPassword=watch",
    ));
    let infos = sentinel.node_connection_infos(false).unwrap();
    assert_eq!(infos.len(), 2);
    assert!(infos
        .iter()
        .all(|i| matches!(i.addr(), ConnectionAddr::Tcp(..))
            && i.redis_settings().password() == Some("watch")
            && i.redis_settings().db() == 0));
    assert_eq!(sentinel.db, 4);
    assert!(parsed(url("redis://a:1"))
        .node_connection_infos(true)
        .is_err());
}

#[test]
fn a_nat_map_goes_with_a_cluster_or_sentinels_only_and_is_part_of_their_identity() {
    let route = || {
        vec![(
            ("10.0.0.1".to_string(), 7000),
            ("127.0.0.1".to_string(), 7100),
        )]
    };
    let spec = |url: &str, nat_map| EndpointSpec {
        url: Some(url.into()),
        nat_map,
        ..Default::default()
    };
    for url in [
        "redis+cluster://127.0.0.1:7100",
        "redis+sentinel://:pw@s1/m",
    ] {
        let mapped = parsed(spec(url, Some(route())));
        let nat = match &mapped.address {
            Address::Cluster { nat, .. } | Address::Sentinel { nat, .. } => nat,
            _ => panic!("{url}: {mapped:?}"),
        };
        assert_eq!(*nat, route(), "{url}");
        let shown = format!("{mapped:?}");
        assert!(
            shown.contains("natMap 10.0.0.1:7000 -> 127.0.0.1:7100"),
            "{shown}"
        );
        assert!(!shown.contains("pw"), "{shown}");
        // Another map is another client: not shared with the unmapped one.
        assert!(mapped != parsed(spec(url, None)), "{url}");
        let empty = parsed(spec(url, Some(Vec::new())));
        assert!(
            matches!(empty.address, Address::Cluster { ref nat, .. } | Address::Sentinel { ref nat, .. } if nat.is_empty()),
            "{url}"
        );
    }
    let (code, arg, message) = refused(spec("redis://127.0.0.1:1", Some(route())));
    assert_eq!((code.as_str(), arg.as_deref()), ("EINVAL", Some("natMap")));
    assert!(
        message.contains("with cluster or sentinels only"),
        "{message}"
    );
}

#[test]
fn routed_sends_an_announced_address_to_its_route_and_leaves_others_alone() {
    let nat = vec![(
        ("10.0.0.1".to_string(), 6379),
        ("127.0.0.1".to_string(), 7100),
    )];
    let at = |host: &str, port| (host.to_string(), port);
    assert_eq!(
        multi::routed(&nat, &at("10.0.0.1", 6379)),
        at("127.0.0.1", 7100)
    );
    // The port is part of the address: the same host on another port has no route.
    assert_eq!(
        multi::routed(&nat, &at("10.0.0.1", 6380)),
        at("10.0.0.1", 6380)
    );
    assert_eq!(
        multi::routed(&[], &at("10.0.0.1", 6379)),
        at("10.0.0.1", 6379)
    );
}
