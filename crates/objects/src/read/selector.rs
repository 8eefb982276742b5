//! Label selectors and node selector requirements, read strictly: one
//! that cannot be read is an error its caller reads conservatively.

use nodewarden_model::LabelSelector;
use nodewarden_model::scheduling::{Requirement, SelectorOperator};
use serde_json::Value;

use super::json_type;

/// A `metav1.LabelSelector` (a PodDisruptionBudget's, a what-if
/// snapshot's), or why it cannot be read. Label selectors
/// take `In`, `NotIn`, `Exists` and `DoesNotExist` only.
pub fn label_selector(v: &Value) -> Result<LabelSelector, String> {
    let Value::Object(m) = v else { return Err(format!("expected an object, found {}", json_type(v))) };
    let mut sel = LabelSelector::default();
    match m.get("matchLabels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            for (k, val) in labels {
                let Some(s) = val.as_str() else { return Err(format!("matchLabels {k:?} is a {}", json_type(val))) };
                sel.match_labels.insert(k.clone(), s.to_string());
            }
        }
        Some(x) => return Err(format!("matchLabels is a {}", json_type(x))),
    }
    sel.match_expressions = requirements(m.get("matchExpressions"), "matchExpressions", false)?;
    Ok(sel)
}

/// A list of requirements (`matchExpressions`, `matchFields`), or why it
/// cannot be read. `Gt` and `Lt` only where node affinity allows them.
pub(super) fn requirements(v: Option<&Value>, field: &str, node_affinity: bool) -> Result<Vec<Requirement>, String> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(x) => return Err(format!("{field} is a {}", json_type(x))),
    };
    list.iter()
        .map(|e| {
            let key = e
                .get("key")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{field}: an entry without a readable key"))?;
            let operator = match e.get("operator").and_then(Value::as_str) {
                Some("In") => SelectorOperator::In,
                Some("NotIn") => SelectorOperator::NotIn,
                Some("Exists") => SelectorOperator::Exists,
                Some("DoesNotExist") => SelectorOperator::DoesNotExist,
                Some("Gt") if node_affinity => SelectorOperator::Gt,
                Some("Lt") if node_affinity => SelectorOperator::Lt,
                other => return Err(format!("{field}: {key}: unknown operator {other:?}")),
            };
            let values = match e.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(vs)) => vs
                    .iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| format!("{field}: {key}: a value that is not a string"))?,
                Some(x) => return Err(format!("{field}: {key}: values is a {}", json_type(x))),
            };
            Ok(Requirement { key: key.to_string(), operator, values })
        })
        .collect()
}
