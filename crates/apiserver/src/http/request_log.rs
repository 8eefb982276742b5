//! An opt-in log of every request the server receives, described as the
//! API server's authorizer sees it (upstream's `RequestInfo`): a verb
//! (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
//! `deletecollection`), the API group, resource and subresource, the
//! namespace and the name; or, for paths outside `/api` and `/apis`
//! resources (discovery, `/version`), the path as a non-resource URL.
//!
//! Tests compare what a client asked for with what an RBAC role grants
//! (crates/cli/tests/deploy_rbac.rs). The log is kept whatever the answer
//! was: an authorizer decides before the request is served.
//!
//! Invariant: one record per request that passed authentication, in the
//! order the requests arrived, whatever their answer.

/// One request, as RBAC would judge it, so a test can derive the role a
/// client needs from what it actually asked.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestRecord {
    /// The RBAC verb, or the lower-case HTTP method for a non-resource URL.
    pub verb: String,
    /// The API group (`""` for core).
    pub group: String,
    /// The resource's plural name; empty for a non-resource URL.
    pub resource: String,
    /// `status`, `eviction`, ...; empty when none.
    pub subresource: String,
    /// Empty for cluster-scoped requests and lists across namespaces.
    pub namespace: String,
    /// Empty for lists, watches and creates.
    pub name: String,
    /// The path, for non-resource URLs (empty for resource requests).
    pub non_resource_path: String,
    /// The client's `User-Agent`.
    pub user_agent: String,
}

impl RequestRecord {
    /// `resource` or `resource/subresource`, as an RBAC rule names it.
    pub fn rbac_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

impl std::fmt::Display for RequestRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.resource.is_empty() {
            return write!(f, "{} {} (non-resource URL)", self.verb, self.non_resource_path);
        }
        let group = if self.group.is_empty() { "core" } else { &self.group };
        write!(f, "{} {}/{}", self.verb, group, self.rbac_resource())?;
        if !self.namespace.is_empty() {
            write!(f, " in {}", self.namespace)?;
        }
        if !self.name.is_empty() {
            write!(f, " named {}", self.name)?;
        }
        Ok(())
    }
}

/// Describes a request from its method, path and query string, with
/// upstream's rules: `/api/v1/...` is the core group, `/apis/G/V/...` the
/// group G; `namespaces/NS/...` scopes it; a GET without a name is a
/// `list`, or a `watch` with `watch=true` (or `1`); a DELETE without a
/// name is a `deletecollection`.
pub fn describe(method: &str, path: &str, query: Option<&str>, user_agent: &str) -> RequestRecord {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", g, _v, rest @ ..] if !rest.is_empty() => (*g, rest),
        _ => {
            return RequestRecord {
                verb: method.to_ascii_lowercase(),
                non_resource_path: path.to_string(),
                user_agent: user_agent.to_string(),
                ..RequestRecord::default()
            };
        }
    };
    // `namespaces/NS/RESOURCE/...` is namespaced, but `namespaces/NS` and
    // `namespaces/NS/status` are the Namespace object itself.
    let (namespace, parts): (&str, &[&str]) = match rest {
        ["namespaces", ns, resource, ..] if *resource != "status" && *resource != "finalize" => (ns, &rest[2..]),
        _ => ("", rest),
    };
    let resource = parts.first().copied().unwrap_or_default();
    let name = parts.get(1).copied().unwrap_or_default();
    let subresource = parts.get(2).copied().unwrap_or_default();
    let watching = query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = match (method, name.is_empty()) {
        ("GET" | "HEAD", true) if watching => "watch",
        ("GET" | "HEAD", true) => "list",
        ("GET" | "HEAD", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        (other, _) => &other.to_ascii_lowercase(),
    };
    RequestRecord {
        verb: verb.to_string(),
        group: group.to_string(),
        resource: resource.to_string(),
        subresource: subresource.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        non_resource_path: String::new(),
        user_agent: user_agent.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    fn d(method: &str, path: &str, query: Option<&str>) -> String {
        describe(method, path, query, "ua").to_string()
    }

    #[test]
    fn requests_are_described_as_rbac_sees_them() {
        assert_eq!(d("GET", "/api/v1/nodes", None), "list core/nodes");
        assert_eq!(d("GET", "/api/v1/nodes", Some("watch=true&resourceVersion=5")), "watch core/nodes");
        assert_eq!(d("GET", "/api/v1/nodes/n1", None), "get core/nodes named n1");
        assert_eq!(d("PUT", "/api/v1/nodes/n1/status", None), "update core/nodes/status named n1");
        assert_eq!(d("PATCH", "/api/v1/nodes/n1", None), "patch core/nodes named n1");
        assert_eq!(
            d("POST", "/api/v1/namespaces/default/pods/p/eviction", None),
            "create core/pods/eviction in default named p"
        );
        assert_eq!(d("DELETE", "/api/v1/namespaces/default/pods/p", None), "delete core/pods in default named p");
        assert_eq!(d("DELETE", "/api/v1/namespaces/default/pods", None), "deletecollection core/pods in default");
        assert_eq!(d("GET", "/api/v1/pods", Some("watch=1")), "watch core/pods");
        assert_eq!(
            d("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodewarden", None),
            "get coordination.k8s.io/leases in kube-system named nodewarden"
        );
        assert_eq!(
            d("POST", "/apis/events.k8s.io/v1/namespaces/default/events", None),
            "create events.k8s.io/events in default"
        );
        assert_eq!(d("GET", "/api/v1/namespaces/kube-system", None), "get core/namespaces named kube-system");
        assert_eq!(
            d("PUT", "/api/v1/namespaces/kube-system/status", None),
            "update core/namespaces/status named kube-system"
        );
        assert_eq!(d("GET", "/apis", None), "get /apis (non-resource URL)");
        assert_eq!(d("GET", "/version", None), "get /version (non-resource URL)");
    }
}
