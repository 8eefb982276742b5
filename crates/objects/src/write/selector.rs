//! Label selectors and node selector requirements as the API writes them.

use nodewarden_model::LabelSelector;
use nodewarden_model::scheduling::{Requirement, SelectorOperator};
use serde_json::{Map, Value, json};

/// A `metav1.LabelSelector`, its empty parts left out as the API leaves
/// them out.
pub fn label_selector_json(s: &LabelSelector) -> Value {
    let mut selector = Map::new();
    if !s.match_labels.is_empty() {
        selector.insert("matchLabels".into(), json!(s.match_labels));
    }
    if !s.match_expressions.is_empty() {
        selector.insert("matchExpressions".into(), s.match_expressions.iter().map(requirement_json).collect());
    }
    Value::Object(selector)
}

/// A label requirement as the API writes it.
pub(super) fn requirement_json(r: &Requirement) -> Value {
    let op = match r.operator {
        SelectorOperator::In => "In",
        SelectorOperator::NotIn => "NotIn",
        SelectorOperator::Exists => "Exists",
        SelectorOperator::DoesNotExist => "DoesNotExist",
        SelectorOperator::Gt => "Gt",
        SelectorOperator::Lt => "Lt",
    };
    let mut v = json!({"key": r.key, "operator": op});
    if !r.values.is_empty() {
        v["values"] = json!(r.values);
    }
    v
}
