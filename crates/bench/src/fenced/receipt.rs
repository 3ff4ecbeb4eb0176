//! What every step of the fenced rows records as its response.

/// The response every step records (the order key, as JSON text).
pub fn of(key: &str) -> String {
    format!("\"{key}\"")
}
