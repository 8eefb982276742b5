//! The resources served, and the discovery documents that describe them.
//!
//! Invariant: this table is the one list of what is served: routing,
//! discovery, OpenAPI and the store all read it, so they cannot disagree.

use serde_json::{Value, json};

/// A stored kind: the key to one table of the store, and the name tests
/// use to look into it. `events.k8s.io/v1` Events are a view of
/// [`Kind::Event`], as upstream stores both versions as one resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// core/v1 Namespace.
    Namespace,
    /// core/v1 Node.
    Node,
    /// core/v1 Pod.
    Pod,
    /// core/v1 Event (and events.k8s.io/v1 Event).
    Event,
    /// coordination.k8s.io/v1 Lease.
    Lease,
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// policy/v1 PodDisruptionBudget.
    PodDisruptionBudget,
}

impl Kind {
    /// Every stored kind, in storage order.
    pub const ALL: [Kind; 7] =
        [Kind::Namespace, Kind::Node, Kind::Pod, Kind::Event, Kind::Lease, Kind::DaemonSet, Kind::PodDisruptionBudget];

    /// Index into per-kind tables.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The storage (and default) resource of this kind.
    pub fn resource(self) -> &'static Resource {
        match self {
            Kind::Namespace => &RESOURCES[0],
            Kind::Node => &RESOURCES[1],
            Kind::Pod => &RESOURCES[2],
            Kind::Event => &RESOURCES[3],
            Kind::Lease => &RESOURCES[5],
            Kind::DaemonSet => &RESOURCES[6],
            Kind::PodDisruptionBudget => &RESOURCES[7],
        }
    }
}

/// One served resource at one group version.
#[derive(Debug)]
pub struct Resource {
    /// What is stored.
    pub kind: Kind,
    /// API group, empty for core.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// `pods`.
    pub plural: &'static str,
    /// `pod`.
    pub singular: &'static str,
    /// `Pod`.
    pub kind_name: &'static str,
    /// Lives in a namespace.
    pub namespaced: bool,
    /// `po`.
    pub short_names: &'static [&'static str],
    /// Subresources served (`status`, `eviction`, `binding`).
    pub subresources: &'static [&'static str],
    /// Field selectors served besides `metadata.name` and `metadata.namespace`.
    pub fields: &'static [&'static str],
    /// A view with its own shape over another version's storage
    /// (events.k8s.io/v1 over core/v1 Events).
    pub converted: bool,
}

const VERBS: [&str; 8] = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// Every resource served.
pub static RESOURCES: [Resource; 8] = [
    Resource {
        kind: Kind::Namespace,
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind_name: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        subresources: &["status"],
        fields: &["status.phase"],
        converted: false,
    },
    Resource {
        kind: Kind::Node,
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind_name: "Node",
        namespaced: false,
        short_names: &["no"],
        subresources: &["status"],
        fields: &["spec.unschedulable"],
        converted: false,
    },
    Resource {
        kind: Kind::Pod,
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind_name: "Pod",
        namespaced: true,
        short_names: &["po"],
        subresources: &["status", "eviction", "binding"],
        fields: &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        converted: false,
    },
    Resource {
        kind: Kind::Event,
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind_name: "Event",
        namespaced: true,
        short_names: &["ev"],
        subresources: &[],
        fields: &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        converted: false,
    },
    Resource {
        kind: Kind::Event,
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind_name: "Event",
        namespaced: true,
        short_names: &["ev"],
        subresources: &[],
        fields: &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
        converted: true,
    },
    Resource {
        kind: Kind::Lease,
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind_name: "Lease",
        namespaced: true,
        short_names: &[],
        subresources: &[],
        fields: &[],
        converted: false,
    },
    Resource {
        kind: Kind::DaemonSet,
        group: "apps",
        version: "v1",
        plural: "daemonsets",
        singular: "daemonset",
        kind_name: "DaemonSet",
        namespaced: true,
        short_names: &["ds"],
        subresources: &["status"],
        fields: &[],
        converted: false,
    },
    Resource {
        kind: Kind::PodDisruptionBudget,
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind_name: "PodDisruptionBudget",
        namespaced: true,
        short_names: &["pdb"],
        subresources: &["status"],
        fields: &[],
        converted: false,
    },
];

impl Resource {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `pods` or `leases.coordination.k8s.io`, as error messages name it.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.to_string() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// The `*List` kind.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind_name)
    }

    /// True when a field selector on `field` is served.
    pub fn selectable(&self, field: &str) -> bool {
        field == "metadata.name" || (self.namespaced && field == "metadata.namespace") || self.fields.contains(&field)
    }

    /// The resource at this group, version and plural.
    pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
        RESOURCES.iter().find(|r| r.group == group && r.version == version && r.plural == plural)
    }
}

/// Groups other than core, with their versions.
pub fn groups() -> Vec<&'static str> {
    let mut g: Vec<&str> = RESOURCES.iter().map(|r| r.group).filter(|g| !g.is_empty()).collect();
    g.dedup();
    g
}

/// `/api/v1` or `/apis/{group}/{version}`: the `APIResourceList`.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in RESOURCES.iter().filter(|r| r.group == group && r.version == version) {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind_name,
            "verbs": VERBS,
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        resources.push(entry);
        for sub in r.subresources {
            let (kind, group_v, verbs): (&str, Option<(&str, &str)>, &[&str]) = match *sub {
                "eviction" => ("Eviction", Some(("policy", "v1")), &["create"]),
                "binding" => ("Binding", None, &["create"]),
                _ => (r.kind_name, None, &["get", "patch", "update"]),
            };
            let mut e = json!({
                "name": format!("{}/{}", r.plural, sub),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if let Some((g, v)) = group_v {
                e["group"] = json!(g);
                e["version"] = json!(v);
            }
            resources.push(e);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

fn group_json(group: &str) -> Value {
    let versions: Vec<Value> = {
        let mut v: Vec<&str> = RESOURCES.iter().filter(|r| r.group == group).map(|r| r.version).collect();
        v.dedup();
        v.into_iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect()
    };
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis`: the `APIGroupList`.
pub fn group_list() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups().into_iter().map(group_json).collect::<Vec<_>>()})
}

/// `/apis/{group}`: the `APIGroup`, if served.
pub fn group(group: &str) -> Option<Value> {
    groups().contains(&group).then(|| {
        let mut g = group_json(group);
        g["kind"] = json!("APIGroup");
        g["apiVersion"] = json!("v1");
        g
    })
}

/// `/api`: the `APIVersions`.
pub fn core_versions(server: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_every_resource_and_subresource() {
        let core = resource_list("", "v1").unwrap_or_default();
        let names: Vec<&str> =
            core["resources"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect();
        assert_eq!(
            names,
            [
                "namespaces",
                "namespaces/status",
                "nodes",
                "nodes/status",
                "pods",
                "pods/status",
                "pods/eviction",
                "pods/binding",
                "events"
            ]
        );
        assert!(resource_list("coordination.k8s.io", "v1").is_some());
        assert!(resource_list("batch", "v1").is_none());
        assert_eq!(groups(), ["events.k8s.io", "coordination.k8s.io", "apps", "policy"]);
        for k in Kind::ALL {
            assert_eq!(k.resource().kind, k);
            assert!(!k.resource().converted);
        }
        assert_eq!(
            Resource::find("coordination.k8s.io", "v1", "leases").map(Resource::qualified).as_deref(),
            Some("leases.coordination.k8s.io")
        );
    }
}
