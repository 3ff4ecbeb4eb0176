//! Just enough URL parsing to probe a server named by a URL and to print it safely.

/// Host and port a URL points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

/// The TCP endpoint of `scheme://[user[:password]@]host[:port][/path][?query]`, with
/// `default_port` when the URL names none. `None` when the URL has no host (a Unix socket
/// URL, say) or is not of that shape.
pub fn endpoint(url: &str, default_port: u16) -> Option<Endpoint> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match host_port.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None | Some("") => default_port,
        Some(p) => p.parse().ok()?,
    };
    Some(Endpoint {
        host: host.to_owned(),
        port,
    })
}

/// `url` with any password replaced by `***`, for printing.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_len);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(host: &str, port: u16) -> Option<Endpoint> {
        Some(Endpoint {
            host: host.to_owned(),
            port,
        })
    }

    #[test]
    fn endpoints_of_the_usual_urls() {
        assert_eq!(
            endpoint("postgres://postgres@127.0.0.1:5432/test", 5432),
            ep("127.0.0.1", 5432)
        );
        assert_eq!(
            endpoint(
                "postgres://u:p%40ss@db.example:6543/x?sslmode=disable",
                5432
            ),
            ep("db.example", 6543)
        );
        assert_eq!(
            endpoint("postgresql://localhost/test", 5432),
            ep("localhost", 5432)
        );
        assert_eq!(
            endpoint("redis://127.0.0.1:6379", 6379),
            ep("127.0.0.1", 6379)
        );
        assert_eq!(
            endpoint("redis://127.0.0.1:6380/2", 6379),
            ep("127.0.0.1", 6380)
        );
        assert_eq!(endpoint("redis://:secret@host", 6379), ep("host", 6379));
        assert_eq!(endpoint("redis://[::1]:7000/0", 6379), ep("::1", 7000));
        assert_eq!(endpoint("redis://[::1]/0", 6379), ep("::1", 6379));
    }

    #[test]
    fn no_endpoint_without_a_host_or_with_a_bad_port() {
        assert_eq!(
            endpoint("postgres:///test?host=/var/run/postgresql", 5432),
            None
        );
        assert_eq!(endpoint("redis://host:notaport", 6379), None);
        assert_eq!(endpoint("redis://host:70000", 6379), None);
        assert_eq!(endpoint("not a url", 6379), None);
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://user:hunter2@h:5432/db"),
            "postgres://user:***@h:5432/db"
        );
        assert_eq!(redact("redis://:hunter2@h"), "redis://:***@h");
        assert_eq!(
            redact("postgres://postgres@127.0.0.1:5432/test"),
            "postgres://postgres@127.0.0.1:5432/test"
        );
        assert_eq!(redact("redis://h/0?x=a@b"), "redis://h/0?x=a@b");
    }
}
