//! `lease caps`: what the backend declares it can do, as a table and `--json`; and the
//! commands that need a capability the store lacks, refused before they call anything,
//! naming the backend (a Redis namespace split into partitions has no concurrency keys).

mod common;

use lease::Capabilities;
use lease::redis::{RedisBackend, RedisConfig};

/// The in-memory backend declares everything: each capability a row, `yes`; the JSON form
/// is the declaration itself.
#[tokio::test]
async fn caps_prints_the_declaration() {
    let json = common::on("memory:", &["caps", "--json"]).await.json();
    let every = Capabilities::all("memory");
    assert_eq!(json["backend"], "memory", "{json}");
    let fields = json.as_object().expect("an object");
    assert_eq!(fields.len(), every.list().len() + 1, "{json}");
    for (name, _) in every.list() {
        assert_eq!(json[name], true, "{name}: {json}");
    }
    let text = common::on("memory:", &["caps"]).await;
    assert_eq!(text.code, Some(0), "{text:?}");
    let words = text.words();
    assert_eq!(words[0], ["backend:", "memory"]);
    assert!(words.contains(&vec!["cancel", "yes"]), "{text:?}");
}

/// A split Redis namespace declares no concurrency keys, rates or ordering, and `limits`
/// refuses to change them up front, naming the backend; what it has still runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_needing_what_the_store_lacks_is_refused_up_front() {
    let base = lease_testserver::redis_url();
    let namespace = common::unique("caps_split");
    let url = format!("{}&partitions=3", common::with_namespace(&base, &namespace));
    let migrated = common::on(&url, &["migrate"]).await;
    let caps = common::on(&url, &["caps", "--json"]).await;
    let set = common::on(&url, &["limits", "--key", "k", "--set", "2"]).await;
    let ordered = common::on(&url, &["limits", "--default", "--ordered"]).await;
    let listed = common::on(&url, &["limits", "--json"]).await;
    let config = RedisConfig::new(&base).namespace(&namespace).partitions(3);
    let direct = RedisBackend::connect(config).await.expect("connect");
    direct.delete_namespace().await.expect("delete namespace");

    assert_eq!(migrated.code, Some(0), "{migrated:?}");
    let caps = caps.json();
    assert_eq!(caps["backend"], "redis", "{caps}");
    for (name, has) in [
        ("concurrency_limits", false),
        ("rate_limits", false),
        ("ordered_keys", false),
        ("cancel", true),
        ("priorities", true),
    ] {
        assert_eq!(caps[name], has, "{name}: {caps}");
    }
    set.assert_error(1, "the redis backend does not support concurrency limits");
    ordered.assert_error(1, "the redis backend does not support ordered keys");
    assert_eq!(listed.code, Some(0), "listing needs nothing: {listed:?}");
}
