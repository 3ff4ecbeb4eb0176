//! [`redact_url`]: a backend URL fit for messages, logs and `Debug` output (nothing prints a
//! password).

/// What a redacted password reads as.
pub const REDACTED: &str = "***";

/// `url` with the password of its `user:password@` replaced by [`REDACTED`], and the value of
/// any `password=` query parameter (libpq's) too. Everything else is kept, so a message still
/// names the host, database and options. A Redis Cluster URL's single authority
/// (`redis+cluster://user:pw@a:1,b:2`) is one userinfo like any other.
///
/// The userinfo runs from `://` to the *last* `@`, whatever lies between: a password typed
/// with an unescaped `#`, `/`, `?` or `@` is still redacted whole. When a query or fragment
/// holds an `@` too, more than the password is hidden, never less.
///
/// A URL without `scheme://` is returned unchanged but for a `password=` parameter.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return redact_query(url);
    };
    match rest.rsplit_once('@') {
        Some((userinfo, after)) if userinfo.contains(':') => {
            let user = userinfo.split_once(':').map_or("", |(user, _)| user);
            // A user name with a delimiter in it is no user name: the whole userinfo goes.
            let user = match user.contains(['/', '?', '#']) {
                true => REDACTED.to_owned(),
                false => format!("{user}:{REDACTED}"),
            };
            format!("{scheme}://{user}@{}", redact_query(after))
        }
        _ => format!("{scheme}://{}", redact_query(rest)),
    }
}

/// `text` with the value of each `password=` pair of the query after its first `?` redacted.
fn redact_query(text: &str) -> String {
    match text.split_once('?') {
        Some((head, query)) => format!("{head}?{}", redact_password_param(query)),
        None => text.to_owned(),
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
            (
                "postgres://u:pw@h/db?password=hunter2",
                "postgres://u:***@h/db?password=***",
            ),
        ];
        for (url, expected) in cases {
            assert_eq!(redact_url(url), expected, "{url}");
        }
    }

    /// A password typed without percent-escaping its delimiters: the URL parsers read a
    /// path, query or fragment in it, and the redaction must not.
    #[test]
    fn passwords_with_unescaped_delimiters_are_redacted_whole() {
        let cases = [
            ("redis://u:pa#zz@h:6379", "redis://u:***@h:6379"),
            ("redis://:pa#zz@h:6379/0", "redis://:***@h:6379/0"),
            ("postgres://u:pa/zz@h/db", "postgres://u:***@h/db"),
            (
                "postgres://u:pa?zz=1@h/db?sslmode=require",
                "postgres://u:***@h/db?sslmode=require",
            ),
            ("postgres://u:p/a?z#z@h/db", "postgres://u:***@h/db"),
            (
                "redis+cluster://u:p#zz@a:1,b:2",
                "redis+cluster://u:***@a:1,b:2",
            ),
        ];
        for (url, expected) in cases {
            let redacted = redact_url(url);
            assert_eq!(redacted, expected, "{url}");
            assert!(!redacted.contains("zz"), "{url}: {redacted}");
        }
    }

    #[test]
    fn urls_without_a_password_are_unchanged() {
        for url in [
            "postgres://postgres@127.0.0.1:5432/test",
            "redis://h/0?x=a@b",
            "rediss://h:6380/#insecure",
            "sqlite:/tmp/x.db",
            "memory:",
            "not a url",
        ] {
            assert_eq!(redact_url(url), url);
        }
    }
}
