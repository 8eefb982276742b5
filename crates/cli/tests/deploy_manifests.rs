//! deploy/: every kustomize overlay builds (`kubectl kustomize`), alone
//! and with the monitoring component; without it nothing needs a CRD, so
//! `kubectl apply -k` works on a bare cluster; every object it renders is
//! a valid Kubernetes object (k8s-openapi's types, with any field the
//! types do not know refused), the Helm chart renders the same objects,
//! the image is a placeholder no one can mistake for a published one,
//! docs/operations.md's Install commands run as written up to what needs
//! a registry or a cluster, the Deployment's flags are flags `nodewarden
//! run` accepts, the resources follow the sizing formula, and the alerts
//! and the dashboard use metric names the code exports. The RBAC rules are
//! checked against real requests in deploy_rbac.rs.

mod deploy;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use deploy::{
    PLACEHOLDER_IMAGE, checkout_copy, deployment_args, deployment_image, key, kustomize, kustomize_at, needs_crd, one,
    root, with_image,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const OVERLAYS: [&str; 5] =
    ["base", "overlays/active", "overlays/shadow", "overlays/active-rescheduler", "overlays/shadow-rescheduler"];

/// Every field of `orig` must come back from the typed round trip with the
/// same value: a field the type does not know is dropped on the way (k8s-
/// openapi ignores unknown fields), a misspelt one too.
fn same_after_round_trip(orig: &Value, typed: &Value, path: &str, errors: &mut Vec<String>) {
    match (orig, typed) {
        (Value::Object(o), t) => {
            for (k, v) in o {
                if v.is_null() {
                    continue;
                }
                match t.get(k) {
                    None => errors.push(format!("{path}.{k}: unknown field (not in the Kubernetes schema)")),
                    Some(tv) => same_after_round_trip(v, tv, &format!("{path}.{k}"), errors),
                }
            }
        }
        (Value::Array(o), Value::Array(t)) if o.len() == t.len() => {
            for (i, (a, b)) in o.iter().zip(t).enumerate() {
                same_after_round_trip(a, b, &format!("{path}[{i}]"), errors);
            }
        }
        (a, b) if a == b => {}
        (a, b) => errors.push(format!("{path}: {a} became {b} (wrong type or shape)")),
    }
}

fn typed<T: DeserializeOwned + Serialize>(obj: &Value) -> Result<(), Vec<String>> {
    let t: T =
        serde_path_to_error::deserialize(obj.clone()).map_err(|e| vec![format!("{}: {}", e.path(), e.inner())])?;
    let back = serde_json::to_value(&t).expect("serialize");
    let mut errors = Vec::new();
    same_after_round_trip(obj, &back, "", &mut errors);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

fn typed_k8s<T: DeserializeOwned + Serialize + k8s_openapi::Resource>(obj: &Value) -> Result<(), Vec<String>> {
    if obj["apiVersion"] != T::API_VERSION {
        return Err(vec![format!("apiVersion {} is not {}", obj["apiVersion"], T::API_VERSION)]);
    }
    typed::<T>(obj)
}

/// The Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1),
/// the fields this project uses, strictly: not in k8s-openapi.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ServiceMonitor {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: ServiceMonitorSpec,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ServiceMonitorSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    job_label: Option<String>,
    selector: LabelSelector,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace_selector: Option<NamespaceSelector>,
    endpoints: Vec<Endpoint>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NamespaceSelector {
    #[serde(skip_serializing_if = "Option::is_none")]
    any: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    match_names: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Endpoint {
    port: String,
    path: String,
    scheme: String,
    interval: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    relabelings: Vec<Relabeling>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Relabeling {
    source_labels: Vec<String>,
    target_label: String,
    action: String,
}

fn validate(obj: &Value) -> Result<(), Vec<String>> {
    match obj["kind"].as_str().unwrap_or_default() {
        "ServiceAccount" => typed_k8s::<ServiceAccount>(obj),
        "ClusterRole" => typed_k8s::<ClusterRole>(obj),
        "ClusterRoleBinding" => typed_k8s::<ClusterRoleBinding>(obj),
        "Role" => typed_k8s::<Role>(obj),
        "RoleBinding" => typed_k8s::<RoleBinding>(obj),
        "Deployment" => typed_k8s::<Deployment>(obj),
        "PodDisruptionBudget" => typed_k8s::<PodDisruptionBudget>(obj),
        "Service" => typed_k8s::<Service>(obj),
        "NetworkPolicy" => typed_k8s::<NetworkPolicy>(obj),
        "ServiceMonitor" if obj["apiVersion"] == "monitoring.coreos.com/v1" => typed::<ServiceMonitor>(obj),
        other => Err(vec![format!("kind {other:?} ({}) is not one this project deploys", obj["apiVersion"])]),
    }
}

#[test]
fn the_validation_refuses_unknown_fields_and_wrong_types() {
    let good = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80, "targetPort": "metrics"}]}});
    assert_eq!(validate(&good), Ok(()));
    let mut misspelt = good.clone();
    misspelt["spec"]["ports"][0]["targetPorts"] = json!(81);
    assert_eq!(
        validate(&misspelt).unwrap_err(),
        [".spec.ports[0].targetPorts: unknown field (not in the Kubernetes schema)"]
    );
    let mut wrong = good.clone();
    wrong["spec"]["ports"][0]["port"] = json!("eighty");
    assert!(validate(&wrong).unwrap_err()[0].starts_with("spec.ports[0].port"), "{:?}", validate(&wrong));
    let sm = json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "m"},
        "spec": {"selector": {}, "endpoints": [{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s", "honorLabel": true}]}});
    assert!(validate(&sm).unwrap_err()[0].contains("unknown field `honorLabel`"), "{:?}", validate(&sm));
    assert!(validate(&json!({"apiVersion": "v1", "kind": "Secret"})).is_err());
}

fn assert_valid(objs: &[Value], what: &str) {
    let mut seen = BTreeSet::new();
    for o in objs {
        assert!(seen.insert(key(o)), "{what}: {} rendered twice", key(o));
        if let Err(errors) = validate(o) {
            panic!("{what}: {} is not valid:\n  {}", key(o), errors.join("\n  "));
        }
        assert_eq!(o["metadata"]["labels"]["app.kubernetes.io/name"], "nodewarden", "{what}: {}", key(o));
    }
}

/// The base and every overlay: valid objects, of built-in kinds only (a
/// kind the cluster does not know fails `kubectl apply`, after the rest
/// was applied), and the placeholder image.
#[test]
fn every_overlay_builds_and_every_object_is_a_valid_kubernetes_object() {
    for dir in OVERLAYS {
        let Some(objs) = kustomize(dir) else { return };
        assert!(objs.len() >= 9, "{dir}: only {} objects", objs.len());
        assert_valid(&objs, dir);
        let crd: Vec<String> = objs.iter().filter(|o| needs_crd(o)).map(key).collect();
        assert!(crd.is_empty(), "{dir}: kinds a bare cluster does not know: {crd:?}");
        assert_eq!(deployment_image(&objs), format!("{PLACEHOLDER_IMAGE}:0.1.0"), "{dir}");
    }
    assert!(needs_crd(&json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor"})));
    assert!(!needs_crd(&json!({"apiVersion": "v1", "kind": "Service"})));
    assert!(!needs_crd(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role"})));
}

/// An overlay of one's own (in a copy of deploy/) with `resources` and
/// `components`, built: what a user writes beside the checkout.
fn build_own_overlay(name: &str, resources: &[&str], components: &[&str]) -> Option<Vec<Value>> {
    let work = checkout_copy(name);
    let list = |xs: &[&str]| xs.iter().map(|x| format!("- ../deploy/kustomize/{x}\n")).collect::<String>();
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{}components:\n{}",
        list(resources),
        list(components)
    );
    std::fs::create_dir_all(work.join("site")).expect("site/");
    std::fs::write(work.join("site/kustomization.yaml"), text).expect("write the overlay");
    kustomize_at(&work.join("site"), &format!("an overlay of {resources:?} with {components:?}"))
}

/// components/monitoring, added to the base or any overlay, adds the
/// ServiceMonitor and changes nothing else.
#[test]
fn the_monitoring_component_adds_the_service_monitor_and_nothing_else() {
    for (i, dir) in OVERLAYS.into_iter().enumerate() {
        let Some(plain) = kustomize(dir) else { return };
        let Some(with) = build_own_overlay(&format!("monitoring-{i}"), &[dir], &["components/monitoring"]) else {
            return;
        };
        assert_valid(&with, &format!("{dir} + monitoring"));
        let (mut with, plain) = (by_key(with), by_key(plain));
        let sm =
            with.remove("ServiceMonitor/kube-system/nodewarden").unwrap_or_else(|| panic!("{dir}: no ServiceMonitor"));
        assert_eq!(with, plain, "{dir}: the component changed more than the ServiceMonitor");
        assert!(needs_crd(&sm));
        assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics");
        assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
        assert_eq!(sm["spec"]["selector"]["matchLabels"], json!({"app.kubernetes.io/name": "nodewarden"}));
        // The alerts' `job` and `mode` labels come from here.
        assert_eq!(sm["spec"]["jobLabel"], "app.kubernetes.io/name");
        assert_eq!(sm["spec"]["endpoints"][0]["relabelings"][0]["targetLabel"], "mode");
    }
}

fn tolerated(pod_spec: &Value, key: &str, effect: &str) -> bool {
    pod_spec["tolerations"].as_array().is_some_and(|ts| {
        ts.iter().any(|t| {
            t["key"] == key
                && t["operator"] == "Exists"
                && (t.get("effect").is_none() || t["effect"] == effect)
                && t.get("tolerationSeconds").is_none()
        })
    })
}

#[test]
fn the_active_deployment_is_highly_available_locked_down_and_probed() {
    let Some(objs) = kustomize("overlays/active") else { return };
    let d = one(&objs, "Deployment");
    assert_eq!(d["metadata"]["namespace"], "kube-system");
    assert_eq!(d["spec"]["replicas"], 2);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["serviceAccountName"], "nodewarden");
    let zone = &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(zone["podAffinityTerm"]["topologyKey"], "topology.kubernetes.io/zone");
    // The taints nodewarden itself puts on nodes.
    for (k, effect) in [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/network-unavailable", "NoSchedule"),
    ] {
        assert!(tolerated(pod, k, effect), "no toleration of {k}:{effect}");
    }
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["ports"][0]["containerPort"], 10257);
    let args = deployment_args(&objs);
    // Probes and Prometheus reach the pod from outside: not loopback.
    assert!(args.contains(&"--bind-address=0.0.0.0:10257".to_string()), "{args:?}");
    assert!(args.contains(&"--leader-elect=true".to_string()), "{args:?}");
    assert!(!args.contains(&"--dry-run".to_string()), "{args:?}");
    // The Lease the Role is scoped to is the one the flags name.
    let role = objs.iter().find(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == "kube-system").expect("Role");
    let named = role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .find(|r| r.get("resourceNames").is_some())
        .expect("a named rule");
    let name = named["resourceNames"][0].as_str().expect("name");
    assert!(args.contains(&format!("--leader-elect-resource-name={name}")), "{args:?}");
    assert!(args.contains(&"--leader-elect-resource-namespace=kube-system".to_string()), "{args:?}");

    assert_eq!(one(&objs, "PodDisruptionBudget")["spec"]["maxUnavailable"], 1);
    let np = one(&objs, "NetworkPolicy");
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(np["spec"]["ingress"], json!([{"ports": [{"port": "metrics", "protocol": "TCP"}]}]));
    assert_eq!(one(&objs, "Service")["spec"]["ports"][0]["targetPort"], "metrics");
    // The same selector everywhere, and it selects the pods.
    let selector = json!({"app.kubernetes.io/name": "nodewarden"});
    assert_eq!(d["spec"]["selector"]["matchLabels"], selector);
    assert_eq!(one(&objs, "Service")["spec"]["selector"], selector);
    assert_eq!(np["spec"]["podSelector"]["matchLabels"], selector);
    assert_eq!(one(&objs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], selector);
}

#[test]
fn the_shadow_overlay_is_a_single_read_only_dry_run() {
    let Some(objs) = kustomize("overlays/shadow") else { return };
    let d = one(&objs, "Deployment");
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["template"]["metadata"]["labels"]["nodewarden.io/mode"], "shadow");
    assert!(deployment_args(&objs).contains(&"--dry-run".to_string()));
    let rules = &one(&objs, "ClusterRole")["rules"];
    let verbs: BTreeSet<&str> = rules
        .as_array()
        .expect("rules")
        .iter()
        .flat_map(|r| r["verbs"].as_array().expect("verbs"))
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(verbs, BTreeSet::from(["list", "watch"]));
    assert!(!objs.iter().any(|o| o["metadata"]["name"] == "nodewarden-leader-election"));
}

fn nodewarden_run(args: &[String]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_nodewarden"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run nodewarden");
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `nodewarden run` with the Deployment's args and a kubeconfig that does
/// not exist: the flags are parsed by the real clap definition and
/// validated (controller and election settings are checked before the
/// kubeconfig is read), so the only complaint must be the kubeconfig.
#[test]
fn every_flag_in_the_deployments_is_one_nodewarden_run_accepts() {
    let missing = std::env::temp_dir().join(format!("nodewarden-deploy-{}/no-such.kubeconfig", std::process::id()));
    let with_kubeconfig = |mut args: Vec<String>| {
        args.push(format!("--kubeconfig={}", missing.display()));
        args
    };
    for dir in ["overlays/active", "overlays/shadow", "overlays/active-rescheduler", "overlays/shadow-rescheduler"] {
        let Some(objs) = kustomize(dir) else { return };
        let args = deployment_args(&objs);
        assert_eq!(args[0], "run", "{dir}: the container must run `nodewarden run`");
        let (code, stderr) = nodewarden_run(&with_kubeconfig(args.clone()));
        assert_eq!(code, Some(2), "{dir}: {stderr}");
        assert!(
            stderr.contains("--kubeconfig") && stderr.contains("no-such.kubeconfig"),
            "{dir}: {args:?} was refused: {stderr}"
        );

        // The check can fail: an unknown flag, or a bad value, is refused
        // before the kubeconfig is looked at.
        let mut bad = args.clone();
        bad.push("--node-lifecycle-controllers=off".into());
        let (code, stderr) = nodewarden_run(&with_kubeconfig(bad));
        assert_eq!(code, Some(2));
        assert!(stderr.contains("unexpected argument '--node-lifecycle-controllers"), "{stderr}");
        let bad: Vec<String> = args
            .iter()
            .map(|a| if a.starts_with("--pod-deletion-mode=") { "--pod-deletion-mode=drain".into() } else { a.clone() })
            .collect();
        let (_, stderr) = nodewarden_run(&with_kubeconfig(bad));
        assert!(stderr.contains("drain") && !stderr.contains("no-such.kubeconfig"), "{stderr}");
    }
}

fn bytes(q: &str) -> f64 {
    for (suffix, m) in [("Ki", 1024.0), ("Mi", 1024.0 * 1024.0), ("Gi", 1024.0 * 1024.0 * 1024.0)] {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<f64>().unwrap_or_else(|_| panic!("quantity {q}")) * m;
        }
    }
    q.parse().unwrap_or_else(|_| panic!("quantity {q} (use Ki, Mi or Gi)"))
}

/// docs/operations.md#sizing: 48 MiB + 5 KiB a node + 0.5 KiB a pod (the
/// whole process measured against sim --serve: about 4.1 KiB and 0.35 KiB
/// over some 40 MiB).
#[test]
fn the_memory_request_follows_the_sizing_formula_for_5k_nodes_and_150k_pods() {
    let Some(objs) = kustomize("overlays/active") else { return };
    let r = &one(&objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["resources"];
    let request = bytes(r["requests"]["memory"].as_str().expect("a memory request"));
    let limit = bytes(r["limits"]["memory"].as_str().expect("a memory limit"));
    let needed = 48.0 * 1048576.0 + 5000.0 * 5120.0 + 150_000.0 * 512.0;
    assert!(request >= needed, "request {request} < formula {needed}");
    assert!(request < needed * 1.25, "request {request} is far above the formula's {needed}: update one or the other");
    assert!(limit >= 2.0 * request, "limit {limit} is less than twice the request");
    assert!(r["requests"]["cpu"].is_string());
}

fn chart() -> std::path::PathBuf {
    root().join("deploy/helm/nodewarden")
}

fn by_key(objs: Vec<Value>) -> BTreeMap<String, Value> {
    objs.into_iter().map(|o| (key(&o), o)).collect()
}

fn assert_same_objects(helm: Vec<Value>, kustomize: Vec<Value>, what: &str) {
    let (h, k) = (by_key(helm), by_key(kustomize));
    assert_eq!(h.keys().collect::<Vec<_>>(), k.keys().collect::<Vec<_>>(), "{what}: different objects");
    for (name, obj) in &h {
        assert_eq!(
            obj,
            &k[name],
            "{what}: {name} differs\nhelm:\n{}\nkustomize:\n{}",
            serde_yaml_ng::to_string(obj).unwrap_or_default(),
            serde_yaml_ng::to_string(&k[name]).unwrap_or_default()
        );
    }
}

/// No Helm binary can be installed here (deploy/helm.rs says why): the
/// chart's templates go through a small renderer of the template subset
/// they use, and must give exactly the kustomize objects.
#[test]
fn the_helm_chart_renders_the_same_objects_as_kustomize() {
    let Some(active) = kustomize("overlays/active") else { return };
    let Some(shadow) = kustomize("overlays/shadow") else { return };
    let helm = deploy::helm::render(&chart(), "nodewarden", "kube-system", &json!({})).expect("default values");
    assert_same_objects(helm, active, "helm (defaults) vs overlays/active");
    let values = json!({"serviceMonitor": {"enabled": true}});
    let helm = deploy::helm::render(&chart(), "nodewarden", "kube-system", &values).expect("serviceMonitor");
    let Some(monitored) = build_own_overlay("helm-monitoring", &["overlays/active"], &["components/monitoring"]) else {
        return;
    };
    assert_same_objects(helm, monitored, "helm (serviceMonitor.enabled) vs overlays/active + components/monitoring");
    let helm = deploy::helm::render(&chart(), "nodewarden", "kube-system", &json!({"mode": "shadow"})).expect("shadow");
    assert_same_objects(helm, shadow, "helm (mode=shadow) vs overlays/shadow");
    for mode in ["active", "shadow"] {
        let Some(overlay) = kustomize(&format!("overlays/{mode}-rescheduler")) else { return };
        let values = json!({"mode": mode, "rescheduler": {"enabled": true}});
        let helm = deploy::helm::render(&chart(), "nodewarden", "kube-system", &values).expect("rescheduler");
        assert_same_objects(helm, overlay, &format!("helm (mode={mode}, rescheduler) vs overlays/{mode}-rescheduler"));
    }
}

/// The rescheduler overlays add the flag and list/watch on budgets, and
/// nothing else: the shadow stays read-only.
#[test]
fn the_rescheduler_overlays_add_the_flag_and_read_access_to_budgets_only() {
    for mode in ["active", "shadow"] {
        let (Some(plain), Some(with)) =
            (kustomize(&format!("overlays/{mode}")), kustomize(&format!("overlays/{mode}-rescheduler")))
        else {
            return;
        };
        let mut expected = deployment_args(&plain);
        expected.push("--enable-rescheduler".into());
        assert_eq!(deployment_args(&with), expected, "{mode}");
        let rules = |objs: &[Value]| one(objs, "ClusterRole")["rules"].as_array().expect("rules").clone();
        let mut expected = rules(&plain);
        expected
            .push(json!({"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"]}));
        assert_eq!(rules(&with), expected, "{mode}");
    }
    let err =
        deploy::helm::render(&chart(), "nw", "kube-system", &json!({"rescheduler": {"enabled": "yes"}})).unwrap_err();
    assert!(err[0].contains("rescheduler.enabled"), "{err:?}");
}

#[test]
fn the_helm_chart_values_change_what_they_say_and_bad_values_are_refused() {
    let over = json!({"controller": {"podDeletionMode": "evict"}, "extraArgs": ["--enable-taint-manager=false"],
        "serviceMonitor": {"enabled": true, "interval": "15s"}, "replicas": 3, "leaderElectionName": "nw",
        "image": {"repository": "registry.example.com/platform/nodewarden", "tag": "0.1.0-rc1"}});
    let objs = deploy::helm::render(&chart(), "nw", "kube-system", &over).expect("render");
    let args = deployment_args(&objs);
    for a in ["--pod-deletion-mode=evict", "--enable-taint-manager=false", "--leader-elect-resource-name=nw"] {
        assert!(args.contains(&a.to_string()), "{a} not in {args:?}");
    }
    assert_eq!(one(&objs, "Deployment")["spec"]["replicas"], 3);
    assert_eq!(deployment_image(&objs), "registry.example.com/platform/nodewarden:0.1.0-rc1");
    assert_eq!(one(&objs, "ServiceMonitor")["spec"]["endpoints"][0]["interval"], "15s");
    let role = objs.iter().find(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == "kube-system").expect("Role");
    assert_eq!(role["rules"][1]["resourceNames"], json!(["nw"]));
    // Flags from values reach `nodewarden run` too.
    let mut args = args;
    args.push("--kubeconfig=/nonexistent/kubeconfig".into());
    let (code, stderr) = nodewarden_run(&args);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("/nonexistent/kubeconfig"), "{stderr}");

    let err = deploy::helm::render(&chart(), "nw", "kube-system", &json!({"serviceMonitor": {"enabled": "yes"}}))
        .unwrap_err();
    assert_eq!(err, [r#"values.serviceMonitor.enabled: "yes" is not of type "boolean""#]);
    let err = deploy::helm::render(&chart(), "nw", "kube-system", &json!({"mode": "passive"})).unwrap_err();
    assert_eq!(err, [r#"values.mode: "passive" is not one of ["active","shadow"]"#]);
    let err = deploy::helm::render(&chart(), "nw", "kube-system", &json!({"controler": {}})).unwrap_err();
    assert_eq!(err, ["values: controler is not a known value"]);
    let err = deploy::helm::render(&chart(), "nw", "kube-system", &json!({"controller": {"podDeletionMode": "drain"}}))
        .unwrap_err();
    assert_eq!(err, [r#"values.controller.podDeletionMode: "drain" is not one of ["delete","evict"]"#]);
}

/// The metric names the code records: string constants and literals with
/// the prefixes of upstream's names and nodewarden's own, read from the
/// sources that record metrics.
fn exported_metrics() -> BTreeSet<String> {
    let files = [
        "crates/engine/src/metric_names.rs",
        "crates/kube/src/writer/mod.rs",
        "crates/kube/src/writer/requests.rs",
        "crates/kube/src/watch.rs",
        "crates/kube/src/leader.rs",
        "crates/kube/src/engine_thread.rs",
        "crates/controller/src/control_loop.rs",
        "crates/shadow/src/metric_names.rs",
    ];
    let mut names = BTreeSet::new();
    for f in files {
        let src = std::fs::read_to_string(root().join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        for (i, part) in src.split('"').enumerate() {
            if i % 2 == 1 && is_metric(part) && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                names.insert(part.to_string());
            }
        }
    }
    names
}

const PREFIXES: [&str; 4] = ["node_collector_", "taint_eviction_controller_", "nodewarden_", "leader_election_"];

fn is_metric(word: &str) -> bool {
    PREFIXES.iter().any(|p| word.starts_with(p))
}

/// Metric names in a PromQL expression (identifiers with our prefixes).
fn metrics_in(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| is_metric(w))
        .map(str::to_string)
        .collect()
}

fn known(name: &str, exported: &BTreeSet<String>) -> bool {
    exported.contains(name)
        || ["_bucket", "_sum", "_count"].iter().any(|s| name.strip_suffix(s).is_some_and(|b| exported.contains(b)))
}

#[test]
fn alerts_and_dashboard_use_metric_names_the_code_exports() {
    let exported = exported_metrics();
    for must in [
        "node_collector_zone_health",
        "leader_election_master_status",
        "nodewarden_safety_interlock_blocked_total",
        "nodewarden_watch_synced",
    ] {
        assert!(exported.contains(must), "{must} not found in the code: {exported:?}");
    }
    assert!(!known("nodewarden_no_such_metric", &exported), "the check must refuse a name the code does not export");

    let text = std::fs::read_to_string(root().join("deploy/alerts/nodewarden.rules.yaml")).expect("alerts");
    let rules: Value = serde_yaml_ng::from_str(&text).expect("alerts are YAML");
    let mut alerts = BTreeSet::new();
    for g in rules["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            let name = r["alert"].as_str().or(r["record"].as_str()).expect("alert or record");
            let expr = r["expr"].as_str().unwrap_or_else(|| panic!("{name}: no expr"));
            let used = metrics_in(expr);
            assert!(!used.is_empty(), "{name}: uses no nodewarden metric: {expr}");
            for m in used {
                assert!(known(&m, &exported), "alert {name}: {m} is not a metric the code exports");
            }
            if r.get("alert").is_some() {
                assert!(r["annotations"]["summary"].is_string(), "{name}: no summary");
                let runbook =
                    r["annotations"]["runbook_url"].as_str().unwrap_or_else(|| panic!("{name}: no runbook_url"));
                let anchor = runbook.rsplit_once('#').map(|(_, a)| a).unwrap_or_default();
                let ops = std::fs::read_to_string(root().join("docs/operations.md")).expect("docs/operations.md");
                assert!(ops.contains(&format!("### {name}")), "{name}: no section in docs/operations.md");
                assert_eq!(anchor, name.to_lowercase(), "{name}: runbook anchor");
                assert!(
                    ["critical", "warning"].contains(&r["labels"]["severity"].as_str().unwrap_or_default()),
                    "{name}"
                );
                alerts.insert(name.to_string());
            }
        }
    }
    for must in [
        "NodewardenZoneFullDisruption",
        "NodewardenAllZonesDown",
        "NodewardenInterlockRefusal",
        "NodewardenNoLeader",
        "NodewardenWatchesNotSynced",
        "NodewardenCriticalAddonPending",
        "NodewardenCriticalAddonNoFit",
        "NodewardenAddonEvictionsRefused",
        "NodewardenDeletionsLagging",
    ] {
        assert!(alerts.contains(must), "no alert {must}: {alerts:?}");
    }

    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/dashboards/nodewarden.json")).expect("dashboard"),
    )
    .expect("the dashboard is JSON");
    let mut used = BTreeSet::new();
    for p in dash["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().expect("a panel title");
        let targets = p["targets"].as_array().unwrap_or_else(|| panic!("panel {title}: no targets"));
        assert!(!targets.is_empty(), "panel {title}: no targets");
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("panel {title}: a target without expr"));
            for m in metrics_in(expr) {
                assert!(known(&m, &exported), "panel {title}: {m} is not a metric the code exports");
                used.insert(m);
            }
        }
    }
    for must in [
        "node_collector_zone_health",
        "node_collector_evictions_total",
        "taint_eviction_controller_pod_deletions_total",
        "nodewarden_taint_to_deletion_seconds",
        "nodewarden_write_failures_total",
        "nodewarden_safety_interlock_blocked_total",
        "leader_election_master_status",
        "nodewarden_api_requests_total",
        "nodewarden_shadow_decisions_total",
        "nodewarden_shadow_difference_seconds_bucket",
    ] {
        assert!(used.contains(must), "the dashboard shows no {must}");
    }
    // Every metric of the rescheduler has a panel: a new one must not go
    // unseen by operators.
    let rescheduler: Vec<&String> = exported.iter().filter(|m| m.starts_with("nodewarden_rescheduler_")).collect();
    assert!(rescheduler.len() >= 3, "the rescheduler's metrics were not found in the code: {exported:?}");
    for m in rescheduler {
        assert!(used.contains(m), "the dashboard shows no {m}");
    }
}

#[test]
fn the_dockerfile_builds_a_static_binary_into_a_non_root_image() {
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
    // Continuation lines (ending in a backslash) belong to the instruction
    // they continue.
    let joined = text.replace("\\\n", " ");
    let instructions: Vec<(String, String)> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            l.split_once(' ')
                .map(|(a, b)| (a.to_uppercase(), b.trim().to_string()))
                .unwrap_or((l.to_uppercase(), String::new()))
        })
        .collect();
    let known = ["FROM", "ARG", "WORKDIR", "COPY", "RUN", "ENV", "USER", "ENTRYPOINT", "CMD", "EXPOSE", "LABEL"];
    for (i, _) in &instructions {
        assert!(known.contains(&i.as_str()), "unknown or unexpected instruction {i}");
    }
    let froms: Vec<&String> = instructions.iter().filter(|(i, _)| i == "FROM").map(|(_, a)| a).collect();
    assert!(froms.len() >= 2, "not a multi-stage build");
    let last = instructions.iter().rposition(|(i, _)| i == "FROM").expect("FROM");
    let final_stage = &instructions[last..];
    let user = final_stage.iter().find(|(i, _)| i == "USER").map(|(_, a)| a.as_str()).expect("USER in the final stage");
    let uid = user.split(':').next().unwrap_or_default();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "the final stage must run as a numeric non-root user, not {user:?}"
    );
    assert!(
        final_stage.iter().any(|(i, a)| i == "COPY" && a.contains("--from=")),
        "the final stage copies from the build"
    );
    assert!(text.contains("x86_64-unknown-linux-musl"), "a static (musl) target");
    // The deployment's securityContext runs as the same user.
    if let Some(objs) = kustomize("base") {
        let sc = &one(&objs, "Deployment")["spec"]["template"]["spec"]["securityContext"];
        assert_eq!(sc["runAsUser"].to_string(), uid);
    }
}

/// The chart with its default values renders built-in kinds only and the
/// placeholder image; the ServiceMonitor's template is wrapped in its
/// flag, as is anything else of a kind a CRD defines.
#[test]
fn the_helm_chart_needs_no_crd_by_default_and_names_the_placeholder_image() {
    let objs = deploy::helm::render(&chart(), "nodewarden", "kube-system", &json!({})).expect("default values");
    let crd: Vec<String> = objs.iter().filter(|o| needs_crd(o)).map(key).collect();
    assert!(crd.is_empty(), "the chart's defaults render kinds a bare cluster does not know: {crd:?}");
    assert_eq!(deployment_image(&objs), format!("{PLACEHOLDER_IMAGE}:0.1.0"));
    let values: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(chart().join("values.yaml")).expect("values.yaml"))
            .expect("values.yaml is YAML");
    assert_eq!(values["serviceMonitor"]["enabled"], false);
    assert_eq!(values["image"]["repository"], PLACEHOLDER_IMAGE);

    for entry in std::fs::read_dir(chart().join("templates")).expect("templates/") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("template");
        let crd_kind = text.lines().any(|l| {
            l.trim_start().strip_prefix("apiVersion:").is_some_and(|v| needs_crd(&json!({"apiVersion": v.trim()})))
        });
        if !crd_kind {
            continue;
        }
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(
            (lines.first().copied(), lines.last().copied()),
            (Some("{{- if .Values.serviceMonitor.enabled }}"), Some("{{- end }}")),
            "{}: a kind a CRD defines, not wrapped in serviceMonitor.enabled",
            path.display()
        );
    }
}

#[test]
fn helm_set_reads_values_as_helm_does() {
    let mut v = json!({});
    deploy::install::helm_set(&mut v, "mode=shadow,image.tag=0.1.0");
    deploy::install::helm_set(&mut v, "image.repository=r.example/x/nodewarden");
    deploy::install::helm_set(&mut v, "rescheduler.enabled=true,replicas=3");
    assert_eq!(
        v,
        json!({"mode": "shadow", "image": {"tag": "0.1.0", "repository": "r.example/x/nodewarden"},
            "rescheduler": {"enabled": true}, "replicas": 3})
    );
}

/// The commands the stand-ins may see (deploy/install.rs); another one in
/// the docs must be taught to the test first.
fn assert_known(calls: &[deploy::install::Call]) {
    for c in calls {
        let words: Vec<&str> = c.iter().map(String::as_str).collect();
        let known = matches!(
            words.as_slice(),
            ["docker", "build", ..]
                | ["docker", "push", _]
                | ["kubectl", "kustomize", _]
                | ["kubectl", "apply", "-k", _]
                | ["kubectl", "-n", "kube-system", "rollout", "status", _]
                | ["helm", "install", ..]
        );
        assert!(known, "the Install section runs `{}`, which this test has no stand-in for", c.join(" "));
    }
}

/// `docker build -t IMAGE .` then `docker push IMAGE`: the image.
fn built_and_pushed(calls: &[deploy::install::Call]) -> String {
    let docker: Vec<&deploy::install::Call> = calls.iter().filter(|c| c[0] == "docker").collect();
    assert_eq!(docker.len(), 2, "expected a docker build and a docker push: {docker:?}");
    let build = &docker[0];
    assert_eq!(build[1], "build", "{build:?}");
    let t = build.iter().position(|a| a == "-t").unwrap_or_else(|| panic!("docker build without -t: {build:?}"));
    let image = build[t + 1].clone();
    assert_eq!(build.last().map(String::as_str), Some("."), "the build context is the checkout: {build:?}");
    assert_eq!(docker[1][1..], ["push".to_string(), image.clone()], "the pushed image is the built one");
    assert!(!image.starts_with(PLACEHOLDER_IMAGE), "the docs build the placeholder {image}");
    image
}

/// docs/operations.md's Install section, run as written (deploy/install.rs
/// says what stands in for the registry and the cluster): the image block
/// with the kustomize block, then with the Helm block, each in a fresh
/// copy of the checkout. What would be applied is the shadow overlay with
/// the pushed image, and nothing else changed.
#[test]
fn install_commands_run_as_written() {
    use deploy::install::{block, helm_call, install_blocks, run};
    let ops = std::fs::read_to_string(root().join("docs/operations.md")).expect("docs/operations.md");
    assert!(ops.contains("**No image is published.**") && ops.contains(PLACEHOLDER_IMAGE));
    let blocks = install_blocks();
    assert_eq!(blocks.len(), 3, "the Install section's ```sh blocks: {blocks:#?}");
    let image = block(&blocks, "# 1. The image");
    let with_kustomize = block(&blocks, "# 2. kustomize");
    let with_helm = block(&blocks, "# 2. Helm");
    let work = checkout_copy("install-kustomize");
    let Some(r) = run(&work, &format!("{image}{with_kustomize}")) else { return };
    let Some(shadow) = kustomize("overlays/shadow") else { return };
    assert_known(&r.calls);
    let pushed = built_and_pushed(&r.calls);
    assert_eq!(r.applied.len(), 1, "one kubectl apply -k: {:?}", r.calls);
    let applied = deploy::yaml_docs(&r.applied[0], "what kubectl apply -k would apply");
    assert!(!applied.iter().any(needs_crd), "the install applies a kind a bare cluster does not know");
    assert_same_objects(applied, with_image(&shadow, &pushed), "the docs' overlay vs overlays/shadow");
    assert!(r.stdout.contains(&format!("image: {pushed}")), "the docs' check does not show the image:\n{}", r.stdout);
    assert!(!r.stdout.contains(PLACEHOLDER_IMAGE), "{}", r.stdout);

    let work = checkout_copy("install-helm");
    let Some(r) = run(&work, &format!("{image}{with_helm}")) else { return };
    assert_known(&r.calls);
    let pushed = built_and_pushed(&r.calls);
    let helm: Vec<&deploy::install::Call> = r.calls.iter().filter(|c| c[0] == "helm").collect();
    assert_eq!(helm.len(), 1, "{:?}", r.calls);
    let (name, chart, namespace, values) = helm_call(helm[0]);
    assert_eq!((name.as_str(), namespace.as_str()), ("nodewarden", "kube-system"));
    let objs = deploy::helm::render(&work.join(&chart), &name, &namespace, &values)
        .unwrap_or_else(|e| panic!("the docs' helm values are refused: {e:?}"));
    assert_same_objects(objs, with_image(&shadow, &pushed), "the docs' helm install vs overlays/shadow");
}

/// `kustomize edit set image`, which the docs give as the alternative to
/// writing `images:` by hand, names the same image: run only where the
/// standalone kustomize binary is installed (kubectl has no `edit`).
#[test]
fn kustomize_edit_set_image_names_the_image() {
    let Some(kustomize_bin) = deploy::which("kustomize") else {
        eprintln!(
            "SKIPPED: the standalone kustomize binary is not installed, so `kustomize edit set image` was not run"
        );
        return;
    };
    let work = checkout_copy("edit-set-image");
    let site = work.join("site");
    std::fs::create_dir_all(&site).expect("site/");
    std::fs::write(
        site.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../deploy/kustomize/overlays/shadow\n",
    )
    .expect("write");
    let image = "registry.example.com/platform/nodewarden:0.1.0";
    let out = Command::new(kustomize_bin)
        .args(["edit", "set", "image", &format!("{PLACEHOLDER_IMAGE}={image}")])
        .current_dir(&site)
        .output()
        .expect("run kustomize");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (Some(objs), Some(shadow)) = (kustomize_at(&site, "site"), kustomize("overlays/shadow")) else { return };
    assert_same_objects(objs, with_image(&shadow, image), "kustomize edit set image");
}
