//! `lease ui` in a real browser (ignored by default; test-all's `browser` row runs it with
//! `--include-ignored`): Debian's
//! headless Chromium driven through chromedriver (WebDriver, `fantoccini`) against a console
//! process on a real SQLite file, PostgreSQL schema and Redis namespace. The pages show what
//! the store holds (the namespace page's live leases with their tokens, following a new
//! claim without a reload); a live lease's page updates without a reload when its holder stops
//! renewing and another claim takes over; a cancel through the page ends the lease, so the
//! holder's late write is `Lost`. The executions page filters (submitted from the keyboard)
//! and pages by cursor; a selection of two is cancelled after a confirmation step, and the
//! page of a cancelled execution offers no cancel; the dead-letter page lists dead executions
//! with their last error and retries a selection of them; the cancelled execution's delivery
//! timeline shows the expired first delivery, the takeover and the cancelled second one, every
//! end label inside the picture; the activity page charts the store's counts by status and
//! follows new admissions live, and its takeovers per minute add up to the store's takeover
//! counter, following a new takeover live; no page requests anything from another origin. A
//! missing browser or driver fails every test.
//!
//! `LEASE_UI_SCREENSHOTS=DIR` saves a PNG of each page (of the SQLite run) into DIR, the
//! activity page whole (every chart), the others as a window shows them. Cargo runs the test
//! in crates/lease-cli, so a relative DIR starts there: the README's come from
//! `LEASE_UI_SCREENSHOTS=../../docs/ui`.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use lease::ExecutionClientExt as _;
use lease::postgres::{PostgresBackend, PostgresConfig};
use lease::redis::{RedisBackend, RedisConfig};
use lease::{
    Admission, AttemptLimit, AttemptScope, ClaimRequest, ErrorNote, ExecutionFilter, ExecutionId,
    ExecutionLease, ExecutionStatus, Json, LeaseBackend, LeaseError, Priority, Release, StepKey,
    StepWrite, WorkflowName,
};
use tokio::process::{Child, Command};
use tokio::time::Instant;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The longest any wait of these tests takes before it fails.
const DEADLINE: Duration = Duration::from_secs(30);
/// The first holder's lease: short, so the take-over comes soon.
const SHORT_LEASE: Duration = Duration::from_millis(1500);
/// An id with markup in it: the pages must show it as text.
const MARKUP_ID: &str = "esc<i>&\"'";

/// Chromium under chromedriver, on a fresh profile.
struct Browser {
    client: Client,
    _driver: Child,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// Starts chromedriver and a headless Chromium session; fails, naming what to install, when
/// either is missing.
async fn browser() -> Browser {
    for path in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            Path::new(path).is_file(),
            "{path} is missing: the browser tests drive Debian's headless Chromium; install it \
             with `apt-get install -y chromium chromium-driver` (`cargo xtask test-all \
             --backend browser` does)"
        );
    }
    let port = free_port();
    let driver = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn chromedriver");
    let profile = tempfile::tempdir().expect("profile dir");
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1100,1000",
        &format!("--user-data-dir={}", profile.path().display()),
    ];
    let caps = serde_json::json!({"goog:chromeOptions": {"binary": CHROMIUM, "args": args}});
    let mut builder = ClientBuilder::new(HttpConnector::new());
    builder.capabilities(caps.as_object().expect("an object").clone());
    let webdriver = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + DEADLINE;
    let client = loop {
        match builder.connect(&webdriver).await {
            Ok(client) => break client,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no Chromium session through chromedriver: {e}"),
        }
    };
    Browser {
        client,
        _driver: driver,
        _profile: profile,
    }
}

/// The text of the element `css` once `want` holds for it (polled, with a deadline).
async fn text_when(c: &Client, css: &str, want: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + DEADLINE;
    let mut last = String::new();
    loop {
        if let Ok(element) = c.find(Locator::Css(css)).await
            && let Ok(text) = element.text().await
        {
            if want(&text) {
                return text;
            }
            last = text;
        }
        assert!(
            Instant::now() < deadline,
            "{css} never matched; last text: {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Saves a screenshot of the current page as `DIR/name.png` when `LEASE_UI_SCREENSHOTS`.
async fn screenshot(c: &Client, name: &str, shots: bool) {
    let Some(dir) = std::env::var_os("LEASE_UI_SCREENSHOTS").filter(|_| shots) else {
        return;
    };
    let png = c.screenshot().await.expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let path = Path::new(&dir).join(format!("{name}.png"));
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    std::fs::write(&path, png).expect("write screenshot");
}

/// Like [`screenshot`], of the whole page: the window grows until the page fits for the
/// capture (the activity page's last charts lie below a window of the usual size), then
/// shrinks back.
async fn screenshot_whole_page(c: &Client, name: &str, shots: bool) {
    if std::env::var_os("LEASE_UI_SCREENSHOTS").is_none() || !shots {
        return;
    }
    let (width, height) = c.get_window_size().await.expect("window size");
    let width = u32::try_from(width).expect("window width");
    // The window's height includes what the browser draws around the page, so it grows by
    // what the page lacks until the viewport holds all of it.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let lacking = c
            .execute(
                "return document.documentElement.scrollHeight - window.innerHeight",
                vec![],
            )
            .await
            .expect("read the page's height");
        let lacking = lacking.as_i64().expect("a number of pixels");
        if lacking <= 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the window never held the page ({lacking} px short)"
        );
        let (_, now) = c.get_window_size().await.expect("window size");
        let taller = now.saturating_add(lacking.unsigned_abs());
        c.set_window_size(width, u32::try_from(taller).expect("window height"))
            .await
            .expect("grow the window");
    }
    screenshot(c, name, shots).await;
    c.set_window_size(width, u32::try_from(height).expect("window height"))
        .await
        .expect("restore the window");
}

fn id(text: &str) -> ExecutionId {
    ExecutionId::new(text).expect("id")
}

/// Claims until `want` is among the leases (other due executions are claimed too).
async fn claim_lease(b: &dyn LeaseBackend, want: &str, duration: Duration) -> ExecutionLease {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = b.now().await.expect("now");
        let leases = b
            .claim_due(ClaimRequest {
                now,
                limit: 10,
                duration,
            })
            .await
            .expect("claim");
        if let Some(lease) = leases.into_iter().find(|l| l.execution_id.as_str() == want) {
            return lease;
        }
        assert!(Instant::now() < deadline, "{want} never became claimable");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every browser check on a store at `url` that `backend` opens too.
async fn check_console(url: String, backend: Arc<dyn LeaseBackend>, shots: bool) {
    common::fill(&backend).await;
    backend
        .admit(&Admission::new(id(MARKUP_ID)))
        .await
        .expect("admit");
    let console = common::console(&url, &["--allow-writes", "--sample-every", "1s"], &[]).await;
    let browser = browser().await;
    let c = &browser.client;
    open_with_token(c, &console).await;
    namespace_page(c, &console.base, &*backend, shots).await;
    execution_pages(c, &console.base, &*backend, shots).await;
    live_lease_and_cancel(c, &console.base, &*backend, shots).await;
    dead_letters(c, &console.base, &*backend, shots).await;
    executions_page(c, &console.base, &*backend, shots).await;
    activity_page(c, &console.base, &*backend, shots).await;
    browser.client.close().await.expect("close the browser");
}

/// Opening the address the console printed trades its access token for a session cookie and
/// leaves an address without the token; the pages then open without it.
async fn open_with_token(c: &Client, console: &common::Console) {
    assert!(console.url.contains("?access_token="), "{}", console.url);
    c.goto(&console.url)
        .await
        .expect("open the printed address");
    let now = c.current_url().await.expect("current address");
    assert_eq!(
        now.as_str(),
        format!("{}/", console.base),
        "the token left the address"
    );
    let cookies = c.get_all_cookies().await.expect("cookies");
    let token = console
        .url
        .split("access_token=")
        .nth(1)
        .unwrap_or_default();
    assert!(
        cookies.iter().all(|k| k.value() != token),
        "no cookie holds the token: {cookies:?}"
    );
}

/// The namespace page shows the counts, the live leases, the failing execution and no
/// corrupt records; a lease claimed while it is open joins its live-lease list without a
/// reload (an operator watching the page sees new claims as they happen).
async fn namespace_page(c: &Client, base: &str, b: &dyn LeaseBackend, shots: bool) {
    c.goto(&format!("{base}/")).await.expect("open /");
    let counts = text_when(c, "#counts", |t| t.contains("admitted 3")).await;
    for row in [
        "running 1",
        "completed 1",
        "failed 1",
        "total 6",
        "corrupt 0",
        "takeovers 0",
    ] {
        assert!(counts.contains(row), "{row} in {counts:?}");
    }
    let failing = text_when(c, "#failing", |t| t.contains("flaky")).await;
    assert!(failing.contains("flaky 1 admitted"), "{failing:?}");
    let busy = b.get(&id("busy")).await.expect("get").expect("busy");
    let live = text_when(c, "#live-leases", |t| t.contains("busy")).await;
    assert!(
        live.contains(&format!("busy {} ", busy.token)),
        "the lease with its token: {live:?}"
    );
    let source = c.source().await.expect("source");
    assert!(
        source.contains("name=\"csrf\""),
        "the forms carry the token"
    );
    assert!(source.contains("Holder: not recorded"), "said once");
    c.execute("window.stayed = true", vec![])
        .await
        .expect("mark the page");
    b.admit(&Admission::new(id("live-0"))).await.expect("admit");
    let claimed = claim_lease(b, "live-0", Duration::from_secs(120)).await;
    let want = format!("live-0 {} ", claimed.token);
    let live = text_when(c, "#live-leases", |t| t.contains(&want)).await;
    assert!(
        live.find("live-0") < live.find("busy"),
        "the sooner expiry first: {live:?}"
    );
    let stayed = c.execute("return window.stayed === true", vec![]).await;
    assert_eq!(
        stayed.expect("read the mark"),
        serde_json::json!(true),
        "the list updated without a reload"
    );
    screenshot(c, "namespace", shots).await;
}

/// A completed execution's record and step tokens; an id with markup shown as text.
async fn execution_pages(c: &Client, base: &str, b: &dyn LeaseBackend, shots: bool) {
    let record = b.get(&id("done-1")).await.expect("get").expect("done-1");
    c.goto(&format!("{base}/execution?id=done-1"))
        .await
        .expect("open done-1");
    let fields = text_when(c, "#record", |t| t.contains("completed")).await;
    assert!(
        fields.contains(&format!("token {}", record.token)),
        "{fields:?}"
    );
    let steps = text_when(c, "#steps", |t| t.contains("charge")).await;
    assert!(
        steps.contains(&format!(
            "charge 1 true {} {{\"receipt\":\"r-1\"}}",
            record.token
        )),
        "each step with the token it was written under: {steps:?}"
    );
    screenshot(c, "execution", shots).await;
    c.goto(&format!("{base}/execution?id=esc%3Ci%3E%26%22%27"))
        .await
        .expect("open the markup id");
    let title = text_when(c, "h1", |t| t.contains("esc")).await;
    assert_eq!(title, format!("Execution {MARKUP_ID}"));
    let elements = c
        .execute(
            "return document.querySelectorAll('h1 i, td i').length",
            vec![],
        )
        .await
        .expect("count");
    assert_eq!(elements, serde_json::json!(0), "markup in an id is text");
}

/// A live lease's page follows a take-over without a reload; a cancel from the page ends
/// the new holder's lease and its late write is refused.
async fn live_lease_and_cancel(c: &Client, base: &str, b: &dyn LeaseBackend, shots: bool) {
    b.admit(&Admission::new(id("live-1"))).await.expect("admit");
    let first = claim_lease(b, "live-1", SHORT_LEASE).await;
    c.goto(&format!("{base}/execution?id=live-1"))
        .await
        .expect("open live-1");
    let lease = text_when(c, "#lease", |t| t.contains("live: token")).await;
    assert!(
        lease.contains(&format!("token {}", first.token)),
        "{lease:?}"
    );
    c.execute("window.stayed = true", vec![])
        .await
        .expect("mark the page");
    // The first holder renews no more; once its lease expired another claim takes over.
    let second = claim_lease(b, "live-1", Duration::from_secs(60)).await;
    assert!(second.token > first.token);
    let want = format!("live: token {}", second.token);
    text_when(c, "#lease", |t| t.contains(&want)).await;
    let stayed = c.execute("return window.stayed === true", vec![]).await;
    assert_eq!(
        stayed.expect("read the mark"),
        serde_json::json!(true),
        "updated without a reload"
    );
    screenshot(c, "live-lease", shots).await;
    c.find(Locator::Css("#cancel button"))
        .await
        .expect("the cancel form")
        .click()
        .await
        .expect("submit cancel");
    let result = text_when(c, "#result", |t| !t.is_empty()).await;
    assert_eq!(
        result,
        "cancelled live-1; its running delivery's lease ended"
    );
    screenshot(c, "cancelled", shots).await;
    let late = StepWrite {
        step_key: StepKey::new("late").expect("key"),
        step_attempt: 0,
        done: true,
        response: Json::parse("test", "1").expect("json"),
    };
    let written = b.write_step(&second, &late).await.expect("write_step");
    assert!(written.is_lost(), "the holder's late write is refused");
    c.goto(&format!("{base}/execution?id=live-1"))
        .await
        .expect("open live-1 again");
    text_when(c, "#record", |t| t.contains("cancelled")).await;
    timeline_after_takeover(c, &first, &second, shots).await;
}

/// The cancelled execution's timeline: the first delivery expired and was taken over (one
/// takeover mark), the second ended by the cancel.
async fn timeline_after_takeover(
    c: &Client,
    first: &ExecutionLease,
    second: &ExecutionLease,
    shots: bool,
) {
    let drawn = c
        .execute(
            "return Array.from(document.querySelectorAll('#timeline g.delivery'))\
             .map(g => g.getAttribute('class') + ' ' + g.getAttribute('data-token'))",
            vec![],
        )
        .await
        .expect("read the timeline");
    assert_eq!(
        drawn,
        serde_json::json!([
            format!("delivery d-expired {}", first.token),
            format!("delivery d-cancelled {}", second.token),
        ]),
        "one bar per delivery, oldest first, each by how it ended"
    );
    let takeovers = c
        .execute(
            "return document.querySelectorAll('#timeline g.takeover').length",
            vec![],
        )
        .await
        .expect("count the takeovers");
    assert_eq!(takeovers, serde_json::json!(1), "the takeover is marked");
    labels_fit(c).await;
    c.execute(
        "document.getElementById('timeline').scrollIntoView()",
        vec![],
    )
    .await
    .expect("scroll to the timeline");
    screenshot(c, "timeline", shots).await;
}

/// Every delivery's end label would fit inside the timeline even as the longest end's name
/// ("acknowledged"), measured in the page's own font: the latest end's label sits in the
/// room right of the bars, which a too narrow margin clips.
async fn labels_fit(c: &Client) {
    let overflow = c
        .execute(
            "const svg = document.getElementById('timeline');\
             const probe = document.createElementNS('http://www.w3.org/2000/svg', 'text');\
             probe.setAttribute('font-size', '11');\
             probe.textContent = 'acknowledged';\
             svg.appendChild(probe);\
             const longest = probe.getComputedTextLength();\
             probe.remove();\
             return Array.from(svg.querySelectorAll('g.delivery text:last-of-type'))\
             .map(t => t.x.baseVal[0].value + longest - svg.width.baseVal.value)\
             .filter(over => over > 0);",
            vec![],
        )
        .await
        .expect("measure the labels");
    assert_eq!(
        overflow,
        serde_json::json!([]),
        "end labels past the timeline's right edge, by px"
    );
}

/// How one status is read from the store's counts.
type ReadCount = fn(&lease::StatusCounts) -> u64;

/// The statuses the activity page draws a line for, as `StatusCounts` reads them.
const DRAWN: [(&str, ReadCount); 4] = [
    ("admitted", |s| s.admitted),
    ("running", |s| s.running),
    ("suspended", |s| s.suspended),
    ("dead", |s| s.dead),
];

/// The values the activity page's status chart shows now, in [`DRAWN`]'s order.
async fn charted(c: &Client) -> Vec<u64> {
    let mut values = Vec::new();
    for (status, _) in DRAWN {
        let css = format!("#chart-statuses polyline[data-status='{status}']");
        let value = match c.find(Locator::Css(&css)).await {
            Ok(line) => line.attr("data-value").await.ok().flatten(),
            Err(_) => None,
        };
        values.push(value.and_then(|v| v.parse().ok()).unwrap_or(u64::MAX));
    }
    values
}

/// Polls until the chart shows what `want` reads from the store at that moment.
async fn charted_when(c: &Client, b: &dyn LeaseBackend, want: impl Fn(&[u64]) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let counts = b.status_counts().await.expect("status counts");
        let stored: Vec<u64> = DRAWN.iter().map(|(_, read)| read(&counts)).collect();
        let shown = charted(c).await;
        if shown == stored && want(&shown) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the chart shows {shown:?}, the store holds {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The activity page draws the store's counts by status, and follows two new admissions
/// without a reload (the console samples every second here).
async fn activity_page(c: &Client, base: &str, b: &dyn LeaseBackend, shots: bool) {
    c.goto(&format!("{base}/activity"))
        .await
        .expect("open the activity page");
    charted_when(c, b, |_| true).await;
    // Admitted and running together: a lease that expires meanwhile moves an execution from
    // one to the other, never out of both.
    let counts = b.status_counts().await.expect("status counts");
    let before = counts.admitted + counts.running;
    c.execute("window.stayed = true", vec![])
        .await
        .expect("mark the page");
    for name in ["act-1", "act-2"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    charted_when(c, b, |shown| shown[0] + shown[1] == before + 2).await;
    let stayed = c.execute("return window.stayed === true", vec![]).await;
    assert_eq!(
        stayed.expect("read the mark"),
        serde_json::json!(true),
        "updated without a reload"
    );
    activity_takeovers(c, b).await;
    screenshot_whole_page(c, "activity", shots).await;
}

/// The takeovers the activity page's chart shows for the sampled hour (the sum of its bars).
async fn charted_takeovers(c: &Client) -> Option<u64> {
    let sum = c
        .execute(
            "return Array.from(document.querySelectorAll('#chart-takeovers rect.bar'))\
             .reduce((n, bar) => n + Number(bar.getAttribute('data-value')), 0)",
            vec![],
        )
        .await
        .ok()?;
    sum.as_u64()
}

/// Polls until the takeover chart adds up to the store's takeover counter and `want` holds
/// for it; that number. The console started on a store that had seen no takeover (`fill`'s
/// leases outlive the test), so its hour holds every takeover of the store.
async fn takeovers_charted_when(
    c: &Client,
    b: &dyn LeaseBackend,
    want: impl Fn(u64) -> bool,
) -> u64 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let stored = b.status_counts().await.expect("status counts").takeovers;
        let shown = charted_takeovers(c).await;
        if shown == Some(stored) && want(stored) {
            return stored;
        }
        assert!(
            Instant::now() < deadline,
            "the takeover chart shows {shown:?}, the store counts {stored}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The takeovers per minute add up to the store's counter (the live lease's takeover of
/// [`live_lease_and_cancel`] among them), and a new takeover shows without a reload.
async fn activity_takeovers(c: &Client, b: &dyn LeaseBackend) {
    let before = takeovers_charted_when(c, b, |n| n >= 1).await;
    // First in claim order, so the claims below need not take anything else first.
    let top = Priority::new(1000).expect("priority");
    let admission = Admission::new(id("act-takeover")).priority(top);
    b.admit(&admission).await.expect("admit");
    let first = claim_lease(b, "act-takeover", SHORT_LEASE).await;
    let second = claim_lease(b, "act-takeover", Duration::from_secs(60)).await;
    assert!(second.token > first.token);
    takeovers_charted_when(c, b, |n| n > before).await;
    let stayed = c.execute("return window.stayed === true", vec![]).await;
    assert_eq!(
        stayed.expect("read the mark"),
        serde_json::json!(true),
        "updated without a reload"
    );
}

/// The workflow of the executions the executions page pages through.
const PAGED: &str = "paged";
/// More than one page of the executions page (50 rows).
const PAGED_COUNT: usize = 53;

fn workflow(name: &str) -> WorkflowName {
    WorkflowName::new(name).expect("workflow")
}

/// The status of `name` as the backend reads it.
async fn status(b: &dyn LeaseBackend, name: &str) -> ExecutionStatus {
    b.get(&id(name))
        .await
        .expect("get")
        .expect("a record")
        .status
}

/// The ids the table `css` lists (links to execution pages), in order.
async fn listed(c: &Client, css: &str) -> Vec<String> {
    let script = format!(
        "return Array.from(document.querySelectorAll('{css} a[href^=\"/execution?\"]'))\
         .map(function(a){{return a.textContent;}})"
    );
    let ids = c.execute(&script, vec![]).await.expect("read the table");
    serde_json::from_value(ids).expect("a list of ids")
}

/// Clicks the element `css` (waiting for it to exist).
async fn click(c: &Client, css: &str) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Ok(element) = c.find(Locator::Css(css)).await {
            element.click().await.expect("click");
            return;
        }
        assert!(Instant::now() < deadline, "no {css}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the browser's address contains `part` (a submitted form has navigated).
async fn address_when(c: &Client, part: &str) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = c.current_url().await.expect("address");
        if now.as_str().contains(part) {
            return;
        }
        assert!(Instant::now() < deadline, "never at {part}: {now}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every resource the page loaded came from the console itself.
async fn only_own_requests(c: &Client) {
    let foreign = c
        .execute(
            "return performance.getEntriesByType('resource').map(function(e){return e.name;})\
             .filter(function(n){return n.indexOf(location.origin + '/') !== 0;})",
            vec![],
        )
        .await
        .expect("read the resources");
    assert_eq!(foreign, serde_json::json!([]), "requests elsewhere");
}

/// Two executions of a workflow with an attempt limit of 1, each failing its one delivery.
async fn make_dead(b: &dyn LeaseBackend, names: [&str; 2]) {
    let limit = AttemptLimit::new(1).expect("limit");
    let scope = AttemptScope::Workflow(workflow("doomed"));
    b.set_attempt_limit(&scope, Some(limit))
        .await
        .expect("attempt limit");
    for name in names {
        let admission = Admission::new(id(name)).workflow(workflow("doomed"));
        b.admit(&admission).await.expect("admit");
    }
    let deadline = Instant::now() + DEADLINE;
    let mut leases = Vec::new();
    while leases.len() < names.len() {
        let now = b.now().await.expect("now");
        let request = ClaimRequest {
            now,
            limit: 10,
            duration: Duration::from_secs(300),
        };
        let claimed = b.claim_due(request).await.expect("claim");
        leases.extend(
            claimed
                .into_iter()
                .filter(|l| names.contains(&l.execution_id.as_str())),
        );
        assert!(
            Instant::now() < deadline,
            "{names:?} never became claimable"
        );
    }
    for lease in leases {
        let name = lease.execution_id.to_string();
        let how = Release::Failed(ErrorNote::new("error", format!("{name} <b>declined</b>")));
        assert!(
            !b.release_with(&lease, &how)
                .await
                .expect("release")
                .is_lost()
        );
    }
}

/// The dead-letter page lists both dead executions with their last error (markup as text);
/// retrying both asks for confirmation, then re-admits them.
async fn dead_letters(c: &Client, base: &str, b: &dyn LeaseBackend, shots: bool) {
    let names = ["dl-1", "dl-2"];
    make_dead(b, names).await;
    c.goto(&format!("{base}/")).await.expect("open /");
    click(c, "#nav-dead").await;
    let table = text_when(c, "#dead", |t| t.contains("dl-2")).await;
    assert!(table.contains("error: dl-1 <b>declined</b>"), "{table:?}");
    assert_eq!(listed(c, "#dead").await, names);
    only_own_requests(c).await;
    screenshot(c, "dead-letters", shots).await;
    for name in names {
        click(c, &format!("#dead input[value='{name}']")).await;
    }
    click(c, "#retry-selected").await;
    let question = text_when(c, "#question", |t| !t.is_empty()).await;
    assert_eq!(question, "retry these 2 executions?");
    assert_eq!(status(b, "dl-1").await, ExecutionStatus::Dead, "not yet");
    click(c, "#confirm button").await;
    let result = text_when(c, "#result", |t| !t.is_empty()).await;
    assert_eq!(result, "re-admitted dl-1\nre-admitted dl-2");
    for name in names {
        assert_eq!(status(b, name).await, ExecutionStatus::Admitted, "{name}");
    }
    click(c, "#back").await;
    text_when(c, "p.note:last-of-type", |t| t == "no dead executions").await;
}

/// The executions page: a filter typed and submitted with Enter, paged by cursor through
/// every match once; two of three selected and cancelled after a confirmation; a cancelled
/// execution's page without a cancel. On a backend that cannot list executions, the page
/// says so, naming the backend.
async fn executions_page(c: &Client, base: &str, b: &dyn LeaseBackend, shots: bool) {
    let probe = b
        .list_executions(&ExecutionFilter::default(), None, 1)
        .await;
    if let Err(LeaseError::Unsupported { .. }) = probe {
        c.goto(&format!("{base}/executions")).await.expect("open");
        let want = format!("the {} backend does not support", b.backend_name());
        text_when(c, "p.error", |t| t.contains(&want)).await;
        return;
    }
    let mut paged = Vec::new();
    for n in 0..PAGED_COUNT {
        let name = format!("page-{n:02}");
        let admission = Admission::new(id(&name)).workflow(workflow(PAGED));
        b.admit(&admission).await.expect("admit");
        paged.push(name);
    }
    paged.reverse();
    c.goto(&format!("{base}/")).await.expect("open /");
    click(c, "#nav-executions").await;
    text_when(c, "#executions", |t| t.contains("page-")).await;
    let field = c
        .find(Locator::Css("#filter input[name=workflow]"))
        .await
        .expect("the workflow filter");
    field
        .send_keys(&format!("{PAGED}\u{E007}"))
        .await
        .expect("type and press Enter");
    address_when(c, "workflow=paged").await;
    text_when(c, "#older", |t| t.contains("older")).await;
    let mut seen = listed(c, "#executions").await;
    assert_eq!(seen.len(), 50, "{seen:?}");
    screenshot(c, "executions", shots).await;
    click(c, "#older").await;
    text_when(c, "#newest", |_| true).await;
    seen.extend(listed(c, "#executions").await);
    assert_eq!(seen, paged, "every match once, newest first");
    assert!(
        c.find(Locator::Css("#older")).await.is_err(),
        "the last page"
    );
    only_own_requests(c).await;
    cancel_two(c, base, b, shots).await;
}

/// Selects two of three and cancels them through the confirmation step.
async fn cancel_two(c: &Client, base: &str, b: &dyn LeaseBackend, shots: bool) {
    for name in ["pick-1", "pick-2", "pick-3"] {
        let admission = Admission::new(id(name)).workflow(workflow("pick"));
        b.admit(&admission).await.expect("admit");
    }
    c.goto(&format!("{base}/executions?workflow=pick"))
        .await
        .expect("open the filtered list");
    text_when(c, "#executions", |t| t.contains("pick-3")).await;
    assert_eq!(
        listed(c, "#executions").await,
        ["pick-3", "pick-2", "pick-1"]
    );
    let row = text_when(c, "#executions", |t| t.contains("pick-1")).await;
    assert!(row.contains("pick-1 admitted pick"), "{row:?}");
    assert!(
        c.find(Locator::Css("#retry-selected")).await.is_err(),
        "no retry where none is dead"
    );
    click(c, "#executions input[value='pick-1']").await;
    click(c, "#executions input[value='pick-2']").await;
    click(c, "#cancel-selected").await;
    let question = text_when(c, "#question", |t| !t.is_empty()).await;
    assert_eq!(question, "cancel these 2 executions?");
    let selected = text_when(c, "#selected", |t| !t.is_empty()).await;
    assert_eq!(selected, "pick-2\npick-1");
    screenshot(c, "confirm", shots).await;
    assert_eq!(
        status(b, "pick-1").await,
        ExecutionStatus::Admitted,
        "not yet"
    );
    click(c, "#confirm button").await;
    let result = text_when(c, "#result", |t| !t.is_empty()).await;
    assert_eq!(result, "cancelled pick-2\ncancelled pick-1");
    assert_eq!(status(b, "pick-1").await, ExecutionStatus::Cancelled);
    assert_eq!(status(b, "pick-2").await, ExecutionStatus::Cancelled);
    assert_eq!(status(b, "pick-3").await, ExecutionStatus::Admitted);
    click(c, "#back").await;
    text_when(c, "#executions", |t| t.contains("pick-1 cancelled")).await;
    let boxes = c
        .execute(
            "return document.querySelectorAll('#executions input[type=checkbox]').length",
            vec![],
        )
        .await
        .expect("count");
    assert_eq!(
        boxes,
        serde_json::json!(1),
        "only pick-3 can still be cancelled"
    );
    c.goto(&format!("{base}/execution?id=pick-1"))
        .await
        .expect("open pick-1");
    text_when(c, "#record", |t| t.contains("cancelled")).await;
    assert!(
        c.find(Locator::Css("#cancel")).await.is_err(),
        "a cancelled execution offers no cancel"
    );
}

/// Runs the checks in a task of their own, so a failure is returned and the caller cleans up.
async fn checks_on(url: String) -> Result<(), tokio::task::JoinError> {
    let backend = lease::open(&url).await.expect("open");
    tokio::spawn(check_console(url, backend, false)).await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Chromium and chromedriver: run by test-all's browser row"]
async fn sqlite_file_in_chromium() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("leases.db").display());
    let backend = lease::open(&url).await.expect("open");
    check_console(url, backend, true).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Chromium and chromedriver: run by test-all's browser row"]
async fn postgres_schema_in_chromium() {
    let base = lease_testserver::postgres_url();
    let schema = common::unique("pg");
    let checked = checks_on(common::with_namespace(&base, &schema)).await;
    let direct = PostgresBackend::connect(PostgresConfig::new(&base).schema(&schema))
        .await
        .expect("connect");
    direct.drop_schema().await.expect("drop schema");
    checked.expect("the checks");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Chromium and chromedriver: run by test-all's browser row"]
async fn redis_namespace_in_chromium() {
    let base = lease_testserver::redis_url();
    let namespace = common::unique("redis");
    let checked = checks_on(common::with_namespace(&base, &namespace)).await;
    let direct = RedisBackend::connect(RedisConfig::new(&base).namespace(&namespace))
        .await
        .expect("connect");
    direct.delete_namespace().await.expect("delete namespace");
    checked.expect("the checks");
}
