//! What the deploy tests share: building the kustomize overlays, reading
//! YAML streams, the RBAC rules a ServiceAccount is bound to and the
//! check of requests against them, a renderer for the Helm chart's
//! templates (no Helm binary can be installed here; see helm.rs), and the
//! stand-ins that run docs/operations.md's Install commands (install.rs).

#![allow(dead_code)]

pub mod helm;
pub mod install;
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
    kustomize_at(&root().join("deploy/kustomize").join(dir), &format!("deploy/kustomize/{dir}"))
}

/// `kubectl kustomize PATH` (any directory, a scratch overlay included), or
/// `None` (with a note on stderr naming `what`) when kubectl is not
/// installed.
pub fn kustomize_at(path: &Path, what: &str) -> Option<Vec<Value>> {
    let out = match Command::new("kubectl").arg("kustomize").arg(path).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: kubectl is not installed, so {what} was not built");
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
    Some(yaml_docs(&String::from_utf8_lossy(&out.stdout), &format!("kustomize {what}")))
}

/// A program's full path, looked up in PATH as a shell would.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(program)).find(|p| p.is_file())
}

/// A fresh scratch directory under the test target's tmp directory.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("nodewarden-deploy-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Copies a directory tree (files and directories only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("dir entry");
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("{} -> {}: {e}", src.display(), dst.display()));
        }
    }
}

/// The repository's `deploy/` (and the Dockerfile, the build context's
/// one file that matters) copied into a fresh scratch directory, so that
/// overlays of one's own can be written beside it as a user would.
pub fn checkout_copy(name: &str) -> PathBuf {
    let dir = scratch(name);
    copy_tree(&root().join("deploy"), &dir.join("deploy"));
    std::fs::copy(root().join("Dockerfile"), dir.join("Dockerfile")).expect("copy the Dockerfile");
    dir
}

/// The image the manifests name until a user names theirs: a registry
/// under `.invalid`, which never resolves, so it cannot pass for a
/// published image.
pub const PLACEHOLDER_IMAGE: &str = "registry.example.invalid/nodewarden";

/// API groups every Kubernetes release serves: objects of these need no
/// CustomResourceDefinition.
pub const BUILT_IN_GROUPS: [&str; 5] = ["", "apps", "rbac.authorization.k8s.io", "policy", "networking.k8s.io"];

/// True when the object's kind comes from a CRD (its API group is not one
/// of the built-in ones).
pub fn needs_crd(obj: &Value) -> bool {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    !BUILT_IN_GROUPS.contains(&group)
}

/// The first container's image of the one Deployment.
pub fn deployment_image(objs: &[Value]) -> String {
    one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .expect("the container has an image")
        .to_string()
}

/// The objects with the Deployment's image replaced: what `images:` (or
/// Helm's image values) should change, and nothing else.
pub fn with_image(objs: &[Value], image: &str) -> Vec<Value> {
    let mut objs = objs.to_vec();
    for o in objs.iter_mut().filter(|o| o["kind"] == "Deployment") {
        o["spec"]["template"]["spec"]["containers"][0]["image"] = Value::String(image.to_string());
    }
    objs
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
