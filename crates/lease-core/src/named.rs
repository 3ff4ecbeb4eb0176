//! The one shape every per-name setting is stored in (concurrency limits and start rates by
//! key, attempt limits and redelivery policies by workflow): a list of (name, value) sorted
//! by name, each name at most once, so that two stores listing the same settings list them
//! in the same order.

/// Sets (`Some`) or removes (`None`) the value of `name` in `entries`, keeping them sorted by
/// name with each name once.
pub(crate) fn set_sorted<N: PartialOrd + Clone, T>(
    entries: &mut Vec<(N, T)>,
    name: &N,
    value: Option<T>,
) {
    entries.retain(|(n, _)| n != name);
    if let Some(value) = value {
        let at = entries.partition_point(|(n, _)| n < name);
        entries.insert(at, (name.clone(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::set_sorted;

    #[test]
    fn entries_stay_sorted_replaced_and_removed() {
        let mut entries = Vec::new();
        set_sorted(&mut entries, &"b", Some(2));
        set_sorted(&mut entries, &"a", Some(1));
        set_sorted(&mut entries, &"c", Some(3));
        set_sorted(&mut entries, &"b", Some(20));
        assert_eq!(entries, [("a", 1), ("b", 20), ("c", 3)]);
        set_sorted(&mut entries, &"a", None);
        set_sorted(&mut entries, &"z", None);
        assert_eq!(entries, [("b", 20), ("c", 3)]);
    }
}
