//! Bad URLs, missing stores, unreachable and silent servers, bad arguments: one error line on
//! stderr and a non-zero exit, never a panic or a hang.

mod common;

use std::time::{Duration, Instant};

use common::{lease, lease_with_env, on};

#[tokio::test]
async fn bad_urls_are_usage_errors() {
    on("mysql://h/db", &["status"])
        .await
        .assert_error(2, "unknown backend scheme");
    on("leases.db", &["status"])
        .await
        .assert_error(2, "no scheme");
    on("postgres://h/db?namespace=", &["status"])
        .await
        .assert_error(2, "empty namespace");
    lease(&["status"]).await.assert_error(2, "LEASE_URL");
}

/// No `--help` shows `LEASE_URL`'s value (only that the variable is read): the URL may
/// carry a password, and help text ends up in terminals, logs and bug reports.
#[tokio::test]
async fn help_does_not_show_the_url_from_the_environment() {
    let url = "postgres://admin:hunter2@db.example/leases";
    for args in [
        &["--help"][..],
        &["-h"],
        &["status", "--help"],
        &["failing", "--help"],
        &["show", "--help"],
        &["corrupt", "--help"],
        &["purge", "--help"],
    ] {
        let run = lease_with_env(args, Some(url)).await;
        assert_eq!(run.code, Some(0), "{args:?}: {run:?}");
        assert!(run.stdout.contains("LEASE_URL"), "{args:?}: {run:?}");
        assert!(!run.stdout.contains("hunter2"), "{args:?}: {run:?}");
        assert!(!run.stderr.contains("hunter2"), "{args:?}: {run:?}");
    }
}

/// An error about a URL does not repeat its password: errors end up in logs.
#[tokio::test]
async fn errors_do_not_repeat_the_password() {
    on("postgres://u:hunter2@h/db?namespace=", &["status"])
        .await
        .assert_error(2, "postgres://u:***@h/db");
    let run = lease_with_env(&["status"], Some("redis://:hunter2@h?namespace=")).await;
    run.assert_error(2, "redis://:***@h");
}

#[tokio::test]
async fn a_missing_sqlite_file_is_not_created() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("typo.db");
    let url = format!("sqlite:{}", path.display());
    on(&url, &["status"])
        .await
        .assert_error(1, "no SQLite database file");
    assert!(!path.exists());
}

#[tokio::test]
async fn unreachable_servers_fail_in_one_line() {
    // Port 1 on the loopback: nothing listens, the connection is refused.
    for url in [
        "postgres://postgres@127.0.0.1:1/test",
        "redis://127.0.0.1:1",
    ] {
        on(url, &["--connect-timeout", "20s", "status"])
            .await
            .assert_error(1, "");
    }
}

#[tokio::test]
async fn a_silent_server_is_bounded_by_the_connect_timeout() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    for url in [
        lease_testserver::postgres_url_on(port),
        lease_testserver::redis_url_on(port),
    ] {
        let started = Instant::now();
        let run = on(&url, &["--connect-timeout", "500ms", "status"]).await;
        run.assert_error(1, "");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{url}: {run:?}"
        );
    }
    held.abort();
}

#[tokio::test]
async fn bad_arguments_are_usage_errors() {
    let run = on("memory:", &["purge"]).await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("--older-than"), "{run:?}");
    let run = on("memory:", &["--connect-timeout", "fast", "status"]).await;
    assert_eq!(run.code, Some(2), "{run:?}");
    let run = on("memory:", &["frobnicate"]).await;
    assert_eq!(run.code, Some(2), "{run:?}");
}

#[tokio::test]
async fn help_lists_the_commands() {
    let run = lease(&["--help"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    for command in [
        "status", "failing", "show", "corrupt", "purge", "--json", "--url",
    ] {
        assert!(run.stdout.contains(command), "{command}: {run:?}");
    }
    let run = lease(&["purge", "--help"]).await;
    assert!(run.stdout.contains("--older-than"), "{run:?}");
}

#[tokio::test]
async fn an_empty_memory_store() {
    let counts = on("memory:", &["status", "--json"]).await.json();
    assert_eq!(counts["total"], 0);
    assert_eq!(counts["corrupt"], 0);
    on("memory:", &["show", "order-42"])
        .await
        .assert_error(1, "no execution \"order-42\"");
}

/// A URL typed where clap expects a subcommand or a value: clap's message quotes it, and
/// the line printed redacts its password.
#[tokio::test]
async fn usage_errors_do_not_repeat_a_misplaced_password() {
    let url = "postgres://u:hunter2@h/db";
    for args in [
        &[url, "status"][..],
        &["status", url],
        &["--timeout", url, "status"],
        &[&format!("--connect-timeout={url}"), "status"],
    ] {
        let run = lease(args).await;
        run.assert_error(2, "");
        assert!(!run.stderr.contains("hunter2"), "{args:?}: {run:?}");
    }
    let run = lease(&["postgres://u:pa#ss@h/db", "status"]).await;
    run.assert_error(2, "postgres://u:***@h/db");
    assert!(!run.stderr.contains("ss@"), "{run:?}");
}
