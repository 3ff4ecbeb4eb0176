//! Table cells shared by the control tables.

/// `x` with two decimals, `-` for none.
pub fn two(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.2}"))
}

/// The markdown of a verdict.
pub fn verdict(error: &Option<String>, met: Option<bool>) -> String {
    match (error, met) {
        (Some(e), _) => format!("ERROR: {e}"),
        (None, Some(true)) => "yes".into(),
        (None, Some(false)) => "**no**".into(),
        (None, None) => String::new(),
    }
}
