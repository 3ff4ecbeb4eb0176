//! One line on stderr per control submitted (docs/decisions/0043-console.md):
//! when, the client's address, the action, what it named and the answer's status. Values a
//! client chose are quoted with escapes, so one line stays one line.

use std::time::SystemTime;

use axum::http::StatusCode;

use super::guard::Client;

/// What a control named: its kind (`id`, `scope`, `older_than`) and the value.
pub struct Subject<'a>(pub &'static str, pub &'a str);

/// The line for `action` by `client` on `subject`, answered `status`.
pub fn line(client: &Client, action: &str, subject: &Subject<'_>, status: StatusCode) -> String {
    entry(
        client,
        action,
        &format!("{}={:?}", subject.0, subject.1),
        status,
    )
}

/// The line for `action` by `client` on the executions `ids` (`ids=["a", "b"]`, each
/// quoted with escapes), answered `status`.
pub fn ids_line(client: &Client, action: &str, ids: &[String], status: StatusCode) -> String {
    entry(client, action, &format!("ids={ids:?}"), status)
}

/// One entry; `subject` is already quoted.
fn entry(client: &Client, action: &str, subject: &str, status: StatusCode) -> String {
    format!(
        "{} lease ui: control client={} action={action} {subject} status={}",
        humantime::format_rfc3339_seconds(SystemTime::now()),
        client.0,
        status.as_u16()
    )
}

/// Writes [`ids_line`] to stderr.
pub fn log_ids(client: &Client, action: &str, ids: &[String], status: StatusCode) {
    eprintln!("{}", ids_line(client, action, ids, status));
}

/// Writes [`line`] to stderr.
pub fn log(client: &Client, action: &str, subject: &Subject<'_>, status: StatusCode) {
    eprintln!("{}", line(client, action, subject, status));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_holds_the_client_action_and_id_on_one_line() {
        let client = Client("127.0.0.1:5000".to_owned());
        let text = line(&client, "cancel", &Subject("id", "a\nb\"c"), StatusCode::OK);
        assert!(
            text.ends_with(
                " lease ui: control client=127.0.0.1:5000 action=cancel id=\"a\\nb\\\"c\" status=200"
            ),
            "{text}"
        );
        assert!(!text.contains('\n'));
        let ids = ["a".to_owned(), "b\n".to_owned()];
        let text = ids_line(&client, "retry", &ids, StatusCode::OK);
        assert!(
            text.ends_with("action=retry ids=[\"a\", \"b\\n\"] status=200"),
            "{text}"
        );
    }
}
