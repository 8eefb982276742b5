//! RBAC as the API server's authorizer applies it, for the rules a
//! ServiceAccount is bound to in a rendered manifest set, and the
//! two-way check of what a client asked for against them.

use std::collections::BTreeSet;

use nodewarden_apiserver::RequestRecord;
use serde_json::Value;

/// One rule, where it came from, and (for a Role) its namespace.
#[derive(Clone, Debug)]
pub struct Rule {
    /// `ClusterRole/NAME` or `Role/NS/NAME`.
    pub origin: String,
    /// `None`: every namespace (a ClusterRole bound cluster-wide).
    pub namespace: Option<String>,
    pub groups: Vec<String>,
    pub resources: Vec<String>,
    pub verbs: Vec<String>,
    pub names: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

fn subject_is(binding: &Value, sa_ns: &str, sa: &str) -> bool {
    binding["subjects"].as_array().is_some_and(|subs| {
        subs.iter().any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == sa_ns)
    })
}

fn find<'a>(objs: &'a [Value], kind: &str, ns: Option<&str>, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| {
            o["kind"] == kind && o["metadata"]["name"] == name && ns.is_none_or(|n| o["metadata"]["namespace"] == n)
        })
        .unwrap_or_else(|| panic!("a binding refers to {kind} {name:?} (namespace {ns:?}), which is not rendered"))
}

fn rules_of(role: &Value, origin: String, namespace: Option<String>) -> Vec<Rule> {
    role["rules"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    assert!(r.get("nonResourceURLs").is_none(), "{origin}: nonResourceURLs are not expected");
                    Rule {
                        origin: origin.clone(),
                        namespace: namespace.clone(),
                        groups: strings(&r["apiGroups"]),
                        resources: strings(&r["resources"]),
                        verbs: strings(&r["verbs"]),
                        names: strings(&r["resourceNames"]),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every rule the ServiceAccount `sa_ns/sa` gets through the rendered
/// bindings.
pub fn rules_for(objs: &[Value], sa_ns: &str, sa: &str) -> Vec<Rule> {
    let mut out = Vec::new();
    for b in objs.iter().filter(|o| subject_is(o, sa_ns, sa)) {
        let role_kind = b["roleRef"]["kind"].as_str().expect("roleRef.kind");
        let role_name = b["roleRef"]["name"].as_str().expect("roleRef.name");
        match (b["kind"].as_str(), role_kind) {
            (Some("ClusterRoleBinding"), "ClusterRole") => {
                let r = find(objs, "ClusterRole", None, role_name);
                out.extend(rules_of(r, format!("ClusterRole/{role_name}"), None));
            }
            (Some("RoleBinding"), kind @ ("Role" | "ClusterRole")) => {
                let ns = b["metadata"]["namespace"].as_str().expect("a RoleBinding's namespace");
                let r = find(objs, kind, (kind == "Role").then_some(ns), role_name);
                out.extend(rules_of(r, format!("{kind}/{ns}/{role_name}"), Some(ns.to_string())));
            }
            other => panic!("unexpected binding {other:?} to {role_kind}"),
        }
    }
    out
}

fn has(list: &[String], x: &str) -> bool {
    list.iter().any(|v| v == "*" || v == x)
}

impl Rule {
    /// Whether this rule lets the request through. A rule with
    /// resourceNames never matches a request without a name (list, watch,
    /// create), as upstream's.
    pub fn allows(&self, r: &RequestRecord) -> bool {
        !r.resource.is_empty()
            && has(&self.verbs, &r.verb)
            && has(&self.groups, &r.group)
            && has(&self.resources, &r.rbac_resource())
            && (self.names.is_empty() || (!r.name.is_empty() && self.names.contains(&r.name)))
            && self.namespace.as_ref().is_none_or(|ns| *ns == r.namespace)
    }
}

/// Discovery paths every authenticated client may read
/// (`system:discovery`).
fn discovery(r: &RequestRecord) -> bool {
    r.verb == "get"
        && ["/api", "/apis", "/version"]
            .iter()
            .any(|p| r.non_resource_path == *p || r.non_resource_path.starts_with(&format!("{p}/")))
}

/// The two-way check. Errors: each request no rule allows ("uses ...
/// which the role does not grant"), and each (rule, verb, group,
/// resource) no request used ("grants ... which nodewarden never used").
pub fn check(rules: &[Rule], requests: &[RequestRecord]) -> Result<(), Vec<String>> {
    let mut errors = BTreeSet::new();
    for r in requests {
        if r.resource.is_empty() {
            if !discovery(r) {
                errors.insert(format!("uses {r}, which no role grants"));
            }
            continue;
        }
        if !rules.iter().any(|rule| rule.allows(r)) {
            errors.insert(format!("uses {r}, which the role does not grant"));
        }
    }
    for rule in rules {
        for verb in &rule.verbs {
            for group in &rule.groups {
                for resource in &rule.resources {
                    let used = requests.iter().any(|r| {
                        r.verb == *verb && r.group == *group && r.rbac_resource() == *resource && rule.allows(r)
                    });
                    if !used {
                        let g = if group.is_empty() { "core" } else { group };
                        errors.insert(format!(
                            "{} grants {verb} {g}/{resource}, which nodewarden never used",
                            rule.origin
                        ));
                    }
                }
            }
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(errors.into_iter().collect()) }
}
