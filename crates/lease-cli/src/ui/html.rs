//! HTML text: escaping every value, links with encoded query values, the page frame and
//! tables. Every value a page shows goes through [`escape`] (execution ids, payloads and
//! messages are user data).

use std::fmt::Write as _;

/// `text` safe inside an element or a double-quoted attribute: `& < > " '` become entities,
/// and a carriage return (which a server-sent event may not carry) `&#13;`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as a URL query value: every byte but the unreserved ones percent-encoded.
pub fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The path of execution `id`'s page.
pub fn execution_href(id: &str) -> String {
    format!("/execution?id={}", query_value(id))
}

/// A link to execution `id`'s page, the id as its text.
pub fn execution_link(id: &str) -> String {
    format!(
        "<a href=\"{}\">{}</a>",
        escape(&execution_href(id)),
        escape(id)
    )
}

/// A whole page: `title`, the backend line, `body` (already HTML).
pub fn page(title: &str, backend: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title} - lease ui</title><style>{STYLE}</style>\
         <script src=\"/live.js\" defer></script></head>\n<body>\
         <header><a href=\"/\">lease ui</a> <span class=\"backend\">{backend}</span>\
         <nav><a id=\"nav-namespace\" href=\"/\">Namespace</a> \
         <a id=\"nav-executions\" href=\"/executions\">Executions</a> \
         <a id=\"nav-dead\" href=\"/dead\">Dead letters</a> \
         <a id=\"nav-activity\" href=\"/activity\">Activity</a></nav></header>\n\
         <h1>{title}</h1>\n{body}\n</body></html>\n",
        title = escape(title),
        backend = escape(backend),
    )
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
header{margin-bottom:1em;color:#555}header a{font-weight:bold;margin-right:1em}\
table{border-collapse:collapse;margin:.5em 0 1.5em}\
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.json{font-family:monospace;white-space:pre-wrap;max-width:50em}\
.note{color:#666}.error{color:#a00}.message{padding:.5em;background:#eef}\
form{margin:.5em 0}h2{margin-top:1.2em}nav{margin-top:.4em}nav a{margin-right:1em}\
a:focus,button:focus,input:focus,select:focus{outline:2px solid #36c;outline-offset:1px}\
.st{padding:0 .4em;border-radius:3px}.st-admitted{background:#e8eefc}\
.st-running{background:#d6f0d6}.st-suspended{background:#fff0c2}\
.st-completed{background:#e6e6e6}.st-failed{background:#f8d0d0}\
.st-cancelled{background:#eadcf3}.st-dead{background:#c22;color:#fff}\
.pages a{margin-right:1.5em}label{margin-right:1em}#result{white-space:pre-line}";

/// A status as a coloured label (class `st-STATUS`; the colour is never the only cue, the
/// name is the text).
pub fn status_cell(status: lease::ExecutionStatus) -> String {
    format!("<span class=\"st st-{0}\">{0}</span>", status.as_str())
}

/// A table with `headers` and `rows` of cells already HTML.
pub fn table(id: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("<table id=\"{}\"><tr>", escape(id));
    for h in headers {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
    out
}

/// A paragraph of (escaped) `text` with class `class`.
pub fn para(class: &str, text: &str) -> String {
    format!("<p class=\"{class}\">{}</p>\n", escape(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_values_is_escaped() {
        assert_eq!(
            escape("<script>a&b\"c'</script>\r"),
            "&lt;script&gt;a&amp;b&quot;c&#39;&lt;/script&gt;&#13;"
        );
        assert_eq!(
            execution_link("a&b <i>"),
            "<a href=\"/execution?id=a%26b%20%3Ci%3E\">a&amp;b &lt;i&gt;</a>"
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("order-42"), "order-42");
        assert_eq!(query_value("a/b?c=d é"), "a%2Fb%3Fc%3Dd%20%C3%A9");
    }
}
