//! `lease ui` over plain HTTP (no browser): who may read and write, on a SQLite file. A
//! foreign `Host` or `Origin`, a form without the server's token, a request without the
//! access token and a control of a read-only console are refused and change nothing.

mod common;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One answer: status, head (lower-cased) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Sends one HTTP/1.1 request to the console at `base` and reads the whole answer.
async fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let authority = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect to the console");
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    tokio::time::timeout(common::RUN_LIMIT, stream.read_to_end(&mut raw))
        .await
        .expect("an answer in time")
        .expect("read the answer");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    Answer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

/// The CSRF token in a page's forms.
fn csrf(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    page[at..at + 64].to_owned()
}

async fn store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("leases.db").display());
    let backend = lease::open(&url).await.expect("open");
    common::fill(&backend).await;
    (dir, url)
}

async fn status_of(url: &str, id: &str) -> serde_json::Value {
    common::on(url, &["show", id, "--json"]).await.json()["record"]["status"].clone()
}

/// Admits `id` with an attempt limit of 1 for the namespace and fails its one delivery.
async fn make_dead(url: &str, id: &str) {
    use lease::{
        Admission, AttemptLimit, AttemptScope, ClaimRequest, ErrorNote, ExecutionClientExt,
        ExecutionId, Release,
    };
    let b = lease::open(url).await.expect("open");
    let limit = AttemptLimit::new(1).expect("limit");
    b.set_attempt_limit(&AttemptScope::Default, Some(limit))
        .await
        .expect("set limit");
    let id = ExecutionId::new(id).expect("id");
    b.admit(&Admission::new(id.clone())).await.expect("admit");
    let request = ClaimRequest {
        now: lease::Timestamp::MAX,
        limit: 100,
        duration: std::time::Duration::from_secs(300),
    };
    let leases = b.claim_due(request).await.expect("claim");
    let lease = leases
        .iter()
        .find(|l| l.execution_id == id)
        .expect("claimed");
    let how = Release::Failed(ErrorNote::new("error", "x"));
    assert!(
        !b.release_with(lease, &how)
            .await
            .expect("release")
            .is_lost()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_console_shows_pages_and_has_no_controls() {
    let (_dir, url) = store().await;
    let console = common::console(&url, &[], &[]).await;
    assert!(console.line.contains("(read-only)"), "{}", console.line);
    let home = http(&console.base, "GET", "/", &[], "").await;
    assert_eq!(home.status, 200, "{home:?}");
    assert!(
        home.head
            .contains("content-security-policy: default-src 'none'"),
        "{home:?}"
    );
    assert!(home.body.contains("read-only"), "{home:?}");
    assert!(!home.body.contains("name=\"csrf\""), "no forms: {home:?}");
    let page = http(&console.base, "GET", "/execution?id=done-1", &[], "").await;
    assert!(page.body.contains("<td>completed</td>"), "{page:?}");
    let missing = http(&console.base, "GET", "/execution?id=nope", &[], "").await;
    assert_eq!(missing.status, 404, "{missing:?}");
    let cancel = http(
        &console.base,
        "POST",
        "/cancel",
        &[],
        "id=busy&reason=x&csrf=x",
    )
    .await;
    assert_eq!(cancel.status, 404, "no control routes: {cancel:?}");
    let rebound = http(
        &console.base,
        "GET",
        "/",
        &[("Host", "evil.example:8425")],
        "",
    )
    .await;
    assert_eq!(
        rebound.status, 403,
        "a rebound name is refused: {rebound:?}"
    );
    assert_eq!(status_of(&url, "busy").await, "running");
}

#[tokio::test(flavor = "multi_thread")]
async fn forms_need_the_token_and_this_origin() {
    let (_dir, url) = store().await;
    let console = common::console(&url, &["--allow-writes"], &[]).await;
    let home = http(&console.base, "GET", "/", &[], "").await;
    let token = csrf(&home.body);
    let forged = http(
        &console.base,
        "POST",
        "/cancel",
        &[],
        "id=busy&reason=x&csrf=0",
    )
    .await;
    assert_eq!(forged.status, 403, "{forged:?}");
    let body = format!("id=busy&reason=x&csrf={token}");
    let foreign = [("Origin", "http://evil.example")];
    let cross = http(&console.base, "POST", "/cancel", &foreign, &body).await;
    assert_eq!(cross.status, 403, "{cross:?}");
    assert_eq!(
        status_of(&url, "busy").await,
        "running",
        "nothing was cancelled"
    );
    let own_origin = console.base.clone();
    let own = [("Origin", own_origin.as_str())];
    let done = http(&console.base, "POST", "/cancel", &own, &body).await;
    assert_eq!(done.status, 200, "{done:?}");
    assert!(done.body.contains("cancelled busy"), "{done:?}");
    assert_eq!(status_of(&url, "busy").await, "cancelled");
    let again = http(
        &console.base,
        "POST",
        "/cancel",
        &own,
        &body.replace("busy", "done-1"),
    )
    .await;
    assert_eq!(again.status, 409, "a completed execution: {again:?}");
    let retry = format!("id=flaky&input=&csrf={token}");
    let refused = http(&console.base, "POST", "/retry", &own, &retry).await;
    assert_eq!(refused.status, 502, "flaky is not dead: {refused:?}");
    assert!(refused.body.contains("not dead"), "{refused:?}");
    assert_eq!(
        status_of(&url, "flaky").await,
        "admitted",
        "nothing changed"
    );
    make_dead(&url, "doomed").await;
    let retry = format!("id=doomed&input=%7B%22x%22%3A1%7D&csrf={token}");
    let retried = http(&console.base, "POST", "/retry", &own, &retry).await;
    assert_eq!(retried.status, 200, "{retried:?}");
    assert!(retried.body.contains("re-admitted doomed"), "{retried:?}");
    let shown = common::on(&url, &["show", "doomed", "--json"]).await.json();
    assert_eq!(shown["record"]["status"], "admitted");
    assert_eq!(shown["record"]["input"]["x"], 1);
    let dry = format!("older_than=30d&csrf={token}");
    let purge = http(&console.base, "POST", "/purge-dry-run", &own, &dry).await;
    assert!(purge.body.contains("dry run: nothing purged"), "{purge:?}");
    let pause = http(
        &console.base,
        "POST",
        "/pause",
        &own,
        &format!("workflow=&csrf={token}"),
    )
    .await;
    assert_eq!(pause.status, 200, "{pause:?}");
    let home = http(&console.base, "GET", "/", &[], "").await;
    assert!(home.body.contains("<td>namespace</td>"), "paused: {home:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_address_needs_the_access_token() {
    let (_dir, url) = store().await;
    let refused = common::on(&url, &["ui", "--listen", "127.0.0.2:0"]).await;
    refused.assert_error(2, "--access-token");
    let secret = "a-secret-of-24-characters";
    let env = [("LEASE_UI_TOKEN", secret)];
    let console = common::console(&url, &["--listen", "127.0.0.2:0"], &env).await;
    assert!(!console.line.contains(secret), "{}", console.line);
    let bare = http(&console.base, "GET", "/", &[], "").await;
    assert_eq!(bare.status, 401, "{bare:?}");
    let bearer = format!("Bearer {secret}");
    let with = http(&console.base, "GET", "/", &[("Authorization", &bearer)], "").await;
    assert_eq!(with.status, 200, "{with:?}");
    let wrong = http(&console.base, "GET", "/?access_token=nope", &[], "").await;
    assert_eq!(wrong.status, 401, "{wrong:?}");
    let handed = http(
        &console.base,
        "GET",
        &format!("/?access_token={secret}"),
        &[],
        "",
    )
    .await;
    assert_eq!(handed.status, 303, "{handed:?}");
    assert!(
        handed.head.contains("httponly; samesite=strict"),
        "{handed:?}"
    );
    let cookie = format!("lease_ui_token={secret}");
    let later = http(&console.base, "GET", "/", &[("Cookie", &cookie)], "").await;
    assert_eq!(later.status, 200, "{later:?}");
}
