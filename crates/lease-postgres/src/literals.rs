//! Typed SQL literals for the statements sent over the simple query protocol, whose values
//! cannot be bound: `acknowledge_and_claim`'s `EXECUTE`s and the fenced transaction's
//! messages.

/// One parameter of a statement sent with its values inlined, over the simple query
/// protocol (`acknowledge_and_claim`'s `EXECUTE`s, which need two statements in one round
/// trip: sqlx cannot pipeline extended-protocol statements). Rendered typed and parenthesised, so it
/// means in every position exactly what the bound parameter of the same type would.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Literal<'a> {
    /// A text value (`NULL` for `None`).
    Text(Option<&'a str>),
    /// A bigint value (`NULL` for `None`).
    BigInt(Option<i64>),
    /// A `bigint[]` value.
    BigInts(&'a [i64]),
}

impl Literal<'_> {
    /// Appends the literal to `out`.
    pub(crate) fn write(&self, out: &mut String) {
        use std::fmt::Write as _;
        match self {
            Literal::Text(None) => out.push_str("(NULL::text)"),
            // An escape string literal: backslashes and quotes are escaped whatever
            // `standard_conforming_strings` says, and in UTF-8 (the connection's encoding)
            // no byte of a multi-byte character is a quote or a backslash.
            Literal::Text(Some(text)) => {
                out.push_str("(E'");
                for c in text.chars() {
                    match c {
                        '\'' => out.push_str("''"),
                        '\\' => out.push_str("\\\\"),
                        c => out.push(c),
                    }
                }
                out.push_str("'::text)");
            }
            Literal::BigInt(None) => out.push_str("(NULL::bigint)"),
            Literal::BigInt(Some(n)) => {
                let _ = write!(out, "({n}::bigint)");
            }
            Literal::BigInts(values) => {
                out.push_str("(ARRAY[");
                for (i, n) in values.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{n}::bigint");
                }
                out.push_str("]::bigint[])");
            }
        }
    }

    /// Whether the value can be sent at all: PostgreSQL text cannot hold U+0000 (as a bound
    /// parameter the server refuses it too).
    pub(crate) fn sendable(&self) -> bool {
        !matches!(self, Literal::Text(Some(t)) if t.contains('\0'))
    }
}

/// `statement` (rendered) with every parameter `$n` outside quoted literals and identifiers
/// replaced by `params[n - 1]`. `None` when a value cannot be sent (see
/// [`Literal::sendable`]). A `$n` without a value is left as is (the server then refuses the
/// statement, which changes nothing); the unit tests cover every statement this renders.
pub(crate) fn bind_literals(statement: &str, params: &[Literal<'_>]) -> Option<String> {
    if !params.iter().all(Literal::sendable) {
        return None;
    }
    let mut out = String::with_capacity(statement.len() + 64);
    let mut chars = statement.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' | '"' => {
                // Copy the quoted run verbatim; a doubled quote stays inside it.
                out.push(c);
                for (_, q) in chars.by_ref() {
                    out.push(q);
                    if q == c {
                        break;
                    }
                }
            }
            '$' => {
                let digits: String = std::iter::from_fn(|| {
                    chars.next_if(|(_, d)| d.is_ascii_digit()).map(|(_, d)| d)
                })
                .collect();
                let param = digits
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| n.checked_sub(1))
                    .and_then(|n| params.get(n));
                match param {
                    Some(p) => p.write(&mut out),
                    None => {
                        out.push_str(&statement[i..i + 1]);
                        out.push_str(&digits);
                    }
                }
            }
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_quoted_and_typed() {
        let sql = bind_literals(
            "SELECT $1, '$2', \"$3\", $2, $10, $3, $4, $5",
            &[
                Literal::Text(Some(r"it's a \ back'slash")),
                Literal::BigInt(Some(-7)),
                Literal::BigInts(&[1, 2]),
                Literal::BigInts(&[]),
                Literal::Text(None),
            ],
        )
        .expect("sendable");
        assert_eq!(
            sql,
            "SELECT (E'it''s a \\\\ back''slash'::text), '$2', \"$3\", (-7::bigint), $10, \
             (ARRAY[1::bigint,2::bigint]::bigint[]), (ARRAY[]::bigint[]), (NULL::text)"
        );
        assert!(bind_literals("SELECT $1", &[Literal::Text(Some("a\0b"))]).is_none());
    }
}
