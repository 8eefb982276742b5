//! What the deploy tests share: building the kustomize overlays, reading
//! YAML streams, the RBAC rules a ServiceAccount is bound to and the
//! check of requests against them, and a renderer for the Helm chart's
//! templates (no Helm binary can be installed here; see helm.rs).

#![allow(dead_code)]

pub mod helm;
pub mod rbac;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every document of a YAML stream, as JSON values (empty documents
/// dropped).
pub fn yaml_docs(text: &str, what: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{what}: not YAML: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// `kubectl kustomize deploy/kustomize/<dir>`, or `None` (with a note on
/// stderr) when kubectl is not installed.
pub fn kustomize(dir: &str) -> Option<Vec<Value>> {
    let path = root().join("deploy/kustomize").join(dir);
    let out = match Command::new("kubectl").arg("kustomize").arg(&path).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: kubectl is not installed, so deploy/kustomize/{dir} was not built");
            return None;
        }
        Err(e) => panic!("cannot run kubectl: {e}"),
    };
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(yaml_docs(&String::from_utf8_lossy(&out.stdout), &format!("kustomize {dir}")))
}

/// `kind/namespace/name` of an object.
pub fn key(obj: &Value) -> String {
    format!(
        "{}/{}/{}",
        obj["kind"].as_str().unwrap_or("?"),
        obj["metadata"]["namespace"].as_str().unwrap_or(""),
        obj["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The one object of this kind.
pub fn one<'a>(objs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objs.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected one {kind}, found {}", found.len());
    found[0]
}

/// The first container's args of the one Deployment.
pub fn deployment_args(objs: &[Value]) -> Vec<String> {
    let d = one(objs, "Deployment");
    d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("the container has args")
        .iter()
        .map(|a| a.as_str().expect("args are strings").to_string())
        .collect()
}
