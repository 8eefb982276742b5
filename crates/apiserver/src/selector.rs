//! Label and field selectors, as `labels.Parse` and `fields.ParseSelector`
//! read them.
//!
//! Invariant: a selector that parses selects as upstream's would; one that
//! does not is refused (400) with upstream's wording, never read loosely.

use crate::error::ApiError;

/// One label requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelReq {
    /// `k=v`, `k==v`, `k in (a,b)`.
    In(String, Vec<String>),
    /// `k!=v`, `k notin (a,b)`: also true when the label is absent.
    NotIn(String, Vec<String>),
    /// `k`.
    Exists(String),
    /// `!k`.
    DoesNotExist(String),
}

/// A label selector: every requirement must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelReq>);

impl LabelSelector {
    /// True when the labels, read through `get`, satisfy every
    /// requirement.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            LabelReq::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::DoesNotExist(k) => get(k).is_none(),
        })
    }

    /// A selector that selects nothing: `labels.Nothing()`, what a
    /// policy/v1 budget without a selector selects.
    pub fn nothing() -> LabelSelector {
        // No label has a value among none.
        LabelSelector(vec![LabelReq::In(String::new(), Vec::new())])
    }

    /// True when it selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An object's `metav1.LabelSelector`, as `nodewarden_objects` reads one
/// (matchLabels and the four label operators), as requirements on labels.
impl From<&nodewarden_model::LabelSelector> for LabelSelector {
    fn from(s: &nodewarden_model::LabelSelector) -> LabelSelector {
        use nodewarden_model::scheduling::SelectorOperator as Op;
        let labels = s.match_labels.iter().map(|(k, v)| LabelReq::In(k.clone(), vec![v.clone()]));
        let expressions = s.match_expressions.iter().map(|r| match r.operator {
            Op::In => LabelReq::In(r.key.clone(), r.values.clone()),
            Op::NotIn => LabelReq::NotIn(r.key.clone(), r.values.clone()),
            Op::Exists => LabelReq::Exists(r.key.clone()),
            Op::DoesNotExist => LabelReq::DoesNotExist(r.key.clone()),
            // A label selector read by `nodewarden_objects` never holds
            // Gt or Lt (node affinity's only); were it to, it selects nothing.
            Op::Gt | Op::Lt => LabelReq::In(String::new(), Vec::new()),
        });
        LabelSelector(labels.chain(expressions).collect())
    }
}

fn bad_label(s: &str, why: &str) -> ApiError {
    ApiError::BadRequest(format!("unable to parse requirement: {why} (in label selector {s:?})"))
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && k.matches('/').count() <= 1
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63 && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Parses `labelSelector`.
pub fn parse_labels(s: &str) -> Result<LabelSelector, ApiError> {
    let mut reqs = Vec::new();
    if s.trim().is_empty() {
        return Ok(LabelSelector(reqs));
    }
    for part in split_top(s) {
        let p = part.trim();
        let set = |rest: &str| -> Result<Vec<String>, ApiError> {
            let rest = rest.trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| bad_label(s, "expected a list of values in parentheses"))?;
            let vals: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
            if vals.iter().any(|v| !valid_value(v)) {
                return Err(bad_label(s, "invalid label value"));
            }
            Ok(vals)
        };
        let req = if let Some(k) = p.strip_prefix('!') {
            LabelReq::DoesNotExist(k.trim().to_string())
        } else if let Some((k, v)) = p.split_once("!=") {
            LabelReq::NotIn(k.trim().to_string(), vec![v.trim().to_string()])
        } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
            LabelReq::In(k.trim().to_string(), vec![v.trim().to_string()])
        } else if let Some((k, rest)) = p.split_once(" notin ") {
            LabelReq::NotIn(k.trim().to_string(), set(rest)?)
        } else if let Some((k, rest)) = p.split_once(" in ") {
            LabelReq::In(k.trim().to_string(), set(rest)?)
        } else {
            LabelReq::Exists(p.to_string())
        };
        let (key, values): (&str, &[String]) = match &req {
            LabelReq::In(k, vs) | LabelReq::NotIn(k, vs) => (k, vs),
            LabelReq::Exists(k) | LabelReq::DoesNotExist(k) => (k, &[]),
        };
        if !valid_key(key) || values.iter().any(|v| !valid_value(v)) {
            return Err(bad_label(s, "invalid label key or value"));
        }
        reqs.push(req);
    }
    Ok(LabelSelector(reqs))
}

/// One field requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldReq {
    /// `spec.nodeName`.
    pub field: String,
    /// The value compared with.
    pub value: String,
    /// `!=` rather than `=`.
    pub negated: bool,
}

/// A field selector: every requirement must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldReq>);

impl FieldSelector {
    /// True when every requirement holds for `get(field)` (a missing field
    /// reads as the empty string, as upstream's field sets do).
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|r| {
            let v = get(&r.field).unwrap_or_default();
            (v == r.value) != r.negated
        })
    }

    /// True when it selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Splits on an unescaped `sep`, unescaping `\\`, `\,` and `\=`.
fn split_escaped(s: &str, sep: char) -> Vec<String> {
    let (mut out, mut cur, mut esc) = (Vec::new(), String::new(), false);
    for c in s.chars() {
        if esc {
            cur.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// Parses `fieldSelector`; `supported` says which fields the resource serves.
pub fn parse_fields(s: &str, supported: impl Fn(&str) -> bool) -> Result<FieldSelector, ApiError> {
    let mut reqs = Vec::new();
    if s.trim().is_empty() {
        return Ok(FieldSelector(reqs));
    }
    for part in split_escaped(s, ',') {
        let (field, value, negated) = if let Some((f, v)) = part.split_once("!=") {
            (f, v, true)
        } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            (f, v, false)
        } else {
            return Err(ApiError::BadRequest(format!(
                "invalid field selector: {s:?}: invalid selector: '{part}'; can't understand '{part}'"
            )));
        };
        let field = field.trim();
        if !supported(field) {
            return Err(ApiError::BadRequest(format!("field label not supported: {field}")));
        }
        reqs.push(FieldReq { field: field.to_string(), value: value.to_string(), negated });
    }
    Ok(FieldSelector(reqs))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn label_selectors() {
        let l = BTreeMap::from([("app".to_string(), "web".to_string()), ("tier".to_string(), "1".to_string())]);
        for (s, want) in [
            ("app=web", true),
            ("app==web,tier=1", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("zone", false),
            ("!zone", true),
            ("app,!zone", true),
            ("", true),
        ] {
            assert_eq!(parse_labels(s).map(|x| x.matches_with(|k| l.get(k).map(String::as_str))), Ok(want), "{s}");
        }
        assert!(parse_labels("a in b").is_err());
        assert!(parse_labels("a=b c").is_err());
    }

    #[test]
    fn field_selectors() {
        let pinned =
            |f: &FieldSelector| f.0.iter().find(|r| r.field == "spec.nodeName" && !r.negated).map(|r| r.value.clone());
        let ok = |f: &str| f == "spec.nodeName" || f == "status.phase";
        let f = parse_fields("spec.nodeName=n1,status.phase!=Failed", ok).unwrap_or_default();
        assert!(f.matches(|k| Some(if k == "spec.nodeName" { "n1" } else { "Running" }.to_string())));
        assert!(!f.matches(|k| Some(if k == "spec.nodeName" { "n1" } else { "Failed" }.to_string())));
        assert_eq!(pinned(&f).as_deref(), Some("n1"));
        assert!(matches!(parse_fields("spec.foo=1", ok), Err(ApiError::BadRequest(m)) if m.contains("not supported")));
        assert!(parse_fields("nonsense", ok).is_err());
        let e = parse_fields("spec.nodeName=a\\,b", ok).unwrap_or_default();
        assert_eq!(pinned(&e).as_deref(), Some("a,b"));
    }
}
