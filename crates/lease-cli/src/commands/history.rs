//! An execution's delivery history ([`lease::ExecutionClient::deliveries`]) as `show` and
//! the console's execution page present it: one row per delivery (token, claimed, ended,
//! how, error) with takeovers marked. A takeover is a claim that follows an entry that
//! ended `expired`: that later claim took the execution over from the lost holder.

use lease::{DeliveryEntry, DeliveryHistory, ExecutionId, LeaseBackend};
use serde_json::{Value, json};

use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{instant, to_json};
use crate::table::Table;

use super::limits::optional;

/// The history of `id`; `None` when the backend keeps none (`Unsupported`).
pub async fn fetch(
    backend: &dyn LeaseBackend,
    id: &ExecutionId,
    limits: &Limits,
) -> Result<Option<DeliveryHistory>, Failure> {
    limits
        .call("deliveries", optional(backend.deliveries(id)))
        .await
}

/// True when the delivery at `index` took the execution over: the one before it expired.
pub fn is_takeover(deliveries: &[DeliveryEntry], index: usize) -> bool {
    index
        .checked_sub(1)
        .and_then(|i| deliveries.get(i))
        .is_some_and(|e| e.end == Some(lease::DeliveryEnd::Expired))
}

/// The words of one entry: token, claimed, ended, how, error, takeover.
pub fn row(deliveries: &[DeliveryEntry], index: usize) -> [String; 6] {
    let e = &deliveries[index];
    let how = e.end.map_or("live", |end| end.as_str()).to_owned();
    let error = e
        .error
        .as_ref()
        .map_or("-".to_owned(), |n| format!("{}: {}", n.kind(), n.message()));
    let takeover = if is_takeover(deliveries, index) {
        format!("takeover of {}", deliveries[index - 1].token)
    } else {
        "-".to_owned()
    };
    [
        e.token.to_string(),
        instant(Some(e.claimed_at)),
        instant(e.ended_at),
        how,
        error,
        takeover,
    ]
}

/// The history as a table, with the count of dropped earlier deliveries; a line when the
/// backend keeps none or there was no delivery yet.
pub fn text(backend: &str, history: Option<&DeliveryHistory>) -> String {
    let Some(h) = history else {
        return format!("the {backend} backend keeps no delivery history\n");
    };
    if h.deliveries.is_empty() {
        return "no deliveries yet\n".to_owned();
    }
    let mut t = Table::new(&["TOKEN", "CLAIMED", "ENDED", "HOW", "ERROR", "TAKEOVER"]);
    for i in 0..h.deliveries.len() {
        t.row(row(&h.deliveries, i).to_vec());
    }
    let mut out = t.render();
    if h.earlier > 0 {
        out.push_str(&format!("{} earlier deliveries not kept\n", h.earlier));
    }
    out
}

/// The history as JSON (each entry with `takeover`), or `null` when the backend keeps none.
pub fn json(history: Option<&DeliveryHistory>) -> Value {
    let Some(h) = history else {
        return Value::Null;
    };
    let entries: Vec<Value> = (0..h.deliveries.len())
        .map(|i| {
            let mut entry = to_json(&h.deliveries[i]);
            if let Value::Object(map) = &mut entry {
                map.insert("takeover".into(), json!(is_takeover(&h.deliveries, i)));
            }
            entry
        })
        .collect();
    json!({ "deliveries": entries, "earlier": h.earlier })
}

#[cfg(test)]
mod tests {
    use lease::{DeliveryEnd, FencingToken, Timestamp};

    use super::*;

    fn taken_over() -> DeliveryHistory {
        let mut h = DeliveryHistory::default();
        h.claim(FencingToken::new(1), Timestamp::from_millis(1_000), None);
        h.claim(
            FencingToken::new(2),
            Timestamp::from_millis(9_000),
            Some(Timestamp::from_millis(6_000)),
        );
        h
    }

    #[test]
    fn a_claim_after_an_expiry_is_marked_as_its_takeover() {
        let h = taken_over();
        assert_eq!(row(&h.deliveries, 0)[3], "expired");
        assert_eq!(row(&h.deliveries, 0)[5], "-");
        assert_eq!(row(&h.deliveries, 1)[3], "live");
        assert_eq!(row(&h.deliveries, 1)[5], "takeover of #1");
        let j = json(Some(&h));
        assert_eq!(j["deliveries"][1]["takeover"], true);
        assert_eq!(j["deliveries"][0]["takeover"], false);
        assert_eq!(j["deliveries"][0]["end"], DeliveryEnd::Expired.as_str());
    }

    #[test]
    fn no_history_is_a_line_not_a_failure() {
        assert_eq!(text("x", None), "the x backend keeps no delivery history\n");
        assert_eq!(json(None), Value::Null);
        assert_eq!(
            text("x", Some(&DeliveryHistory::default())),
            "no deliveries yet\n"
        );
    }
}
