//! [`redact_url`]: a backend URL fit for messages, logs and `Debug` output (issue 25 item 2:
//! nothing prints a password).

/// What a redacted password reads as.
pub const REDACTED: &str = "***";

/// `url` with the password of every `user:password@` replaced by [`REDACTED`], and the
/// value of any `password=` query parameter (libpq's) too. Everything else is kept, so a
/// message still names the host, database and options. A Redis Cluster URL's single
/// authority (`redis+cluster://user:pw@a:1,b:2`) is one userinfo like any other.
///
/// A URL without `scheme://` is returned unchanged but for a `password=` parameter.
pub fn redact_url(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut out = redact_userinfo(head);
    if let Some(query) = query {
        out.push('?');
        out.push_str(&redact_password_param(query));
    }
    out
}

/// `scheme://user:password@rest` with the password redacted (the part before any `?`).
fn redact_userinfo(head: &str) -> String {
    let Some((scheme, rest)) = head.split_once("://") else {
        return head.to_owned();
    };
    let authority_len = rest.find(['/', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_len);
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:{REDACTED}@{hosts}{tail}"),
            None => head.to_owned(),
        },
        None => head.to_owned(),
    }
}

/// A query string with the value of each `password=` pair redacted.
fn redact_password_param(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}={REDACTED}"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_and_the_rest_is_kept() {
        let cases = [
            (
                "postgres://user:hunter2@h:5432/db?sslmode=require",
                "postgres://user:***@h:5432/db?sslmode=require",
            ),
            ("redis://:hunter2@h", "redis://:***@h"),
            ("rediss://u:p%40ss@h:6380/2", "rediss://u:***@h:6380/2"),
            (
                "redis+cluster://u:hunter2@a:7000,b:7001?partitions=4",
                "redis+cluster://u:***@a:7000,b:7001?partitions=4",
            ),
            ("postgres://u:a@b@h/db", "postgres://u:***@h/db"),
            (
                "postgres:///db?host=/run&password=hunter2&user=u",
                "postgres:///db?host=/run&password=***&user=u",
            ),
        ];
        for (url, expected) in cases {
            assert_eq!(redact_url(url), expected, "{url}");
        }
    }

    #[test]
    fn urls_without_a_password_are_unchanged() {
        for url in [
            "postgres://postgres@127.0.0.1:5432/test",
            "redis://h/0?x=a@b",
            "sqlite:/tmp/x.db",
            "memory:",
            "not a url",
        ] {
            assert_eq!(redact_url(url), url);
        }
    }
}
