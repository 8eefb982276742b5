//! Snapshots are untrusted input: whatever the bytes, reading one gives a
//! snapshot or a clear error, never a panic; unknown kinds are counted and
//! unusable objects named.

use nodewarden_whatif::{Faults, load_path};
use nodewarden_whatif::{Snapshot, SnapshotError, read_bytes};

fn read(text: &str) -> Result<Snapshot, SnapshotError> {
    let mut snap = Snapshot::new("t");
    read_bytes(text.as_bytes(), "t", &mut snap).map(|()| snap)
}

#[test]
fn text_that_is_not_kubernetes_gets_a_clear_error() {
    let cases = [
        ("", "empty"),
        ("   \n", "empty"),
        ("hello world", "not Kubernetes"),
        ("{\"items\": [", "not JSON or YAML"),
        ("{\"kind\": \"List\", \"items\": [1, 2", "not JSON or YAML"),
        ("{\"foo\": 1}", "without kind and apiVersion"),
        ("{\"kind\": \"Node\", \"items\": []}", "is not a List"),
        ("{\"items\": 5, \"kind\": \"List\"}", "not JSON or YAML"),
        ("[1, 2, 3]", ""),
        ("42", "not Kubernetes"),
        ("- a\n- b\n", ""),
        ("key: [unclosed\n", "not JSON or YAML"),
        ("foo: bar\n", "without kind and apiVersion"),
        ("kind: List\napiVersion: v1\nitems: 7\n", "`items` is not a list"),
        ("{} trailing", "not JSON or YAML"),
    ];
    for (text, expect) in cases {
        match read(text) {
            Err(e) => assert!(e.to_string().contains(expect), "{text:?}: {e}"),
            Ok(s) => {
                // Lists of non-objects read as objects without a kind, each
                // named as a problem.
                assert!(s.nodes.is_empty() && !s.problems.is_empty(), "{text:?}: {s:?}");
            }
        }
    }
    let e = read("\u{0}\u{1}binary").expect_err("binary");
    assert!(e.to_string().starts_with("t: not"), "{e}");
    let mut snap = Snapshot::new("t");
    let e = read_bytes(&[0xff, 0xfe, 0x00, 0x41], "t", &mut snap).expect_err("not UTF-8");
    assert!(e.to_string().contains("not UTF-8"), "{e}");
}

#[test]
fn objects_missing_what_is_needed_are_named_and_left_out() {
    let snap = read(
        r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "good"}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nouid", "namespace": "ns"}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nons", "uid": "u"}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ok", "namespace": "ns", "uid": "u",
                "ownerReferences": "garbled"}, "spec": {"nodeName": "good", "tolerations": "all"}},
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "ns"},
                "spec": {"minAvailable": "lots", "selector": {}}},
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "nosel", "namespace": "ns"},
                "spec": {"minAvailable": 1}},
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "badsel", "namespace": "ns"},
                "spec": {"minAvailable": 1, "selector": {"matchExpressions": [{"key": "a", "operator": "Sometimes"}]}}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d", "namespace": "ns"}},
            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader", "namespace": "kube-system"}},
            {"metadata": {"name": "kindless"}},
            "a string",
            null
        ]}"#,
    )
    .expect("a List with bad items still reads");
    assert_eq!(snap.nodes.len(), 1);
    assert_eq!(snap.pods.len(), 1, "only the identified pod");
    // The garbled pod reads as the adapter reads it: tolerating everything.
    assert_eq!(snap.pods[0].pod.tolerations.len(), 1);
    assert!(snap.pdbs.is_empty());
    assert_eq!(snap.skipped.get("ConfigMap"), Some(&2));
    assert_eq!(snap.skipped.get("Lease (not a node's)"), Some(&1));
    let problems = snap.problems.join("\n");
    for named in [
        "Node (unnamed): no metadata.name",
        "Pod ns/nouid: no metadata.uid",
        "Pod nons: no metadata.name or metadata.namespace",
        "Pod ns/ok: unreadable ownerReferences",
        "PodDisruptionBudget ns/b: unreadable minAvailable",
        "PodDisruptionBudget ns/nosel: no spec.selector",
        "PodDisruptionBudget ns/badsel: unreadable spec.selector",
        "an object without a kind (kindless)",
    ] {
        assert!(problems.contains(named), "{named} missing from:\n{problems}");
    }
    assert!(snap.summary().contains("skipped (not used): 2 ConfigMap"), "{}", snap.summary());
}

#[test]
fn a_snapshot_without_nodes_cannot_be_played() {
    let snap = read(r#"{"apiVersion": "v1", "kind": "List", "items": []}"#).expect("empty list");
    let e = nodewarden_whatif::prepare(&snap, &Faults::default(), 1).expect_err("no node");
    assert!(e.to_string().contains("no usable Node"), "{e}");
}

#[test]
fn yaml_documents_and_directories_read_like_json() {
    let yaml = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n2\n---\n";
    let snap = read(yaml).expect("yaml");
    assert_eq!(snap.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["n1", "n2"]);
    let dir = std::env::temp_dir().join(format!("nodewarden-whatif-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("a.yaml"), yaml).expect("write");
    std::fs::write(dir.join("b.json"), r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n3"}}"#)
        .expect("write");
    std::fs::write(dir.join("notes.txt"), "ignored: not .json/.yaml").expect("write");
    let snap = load_path(&dir).expect("directory");
    assert_eq!(snap.nodes.len(), 3);
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).expect("dir");
    assert!(matches!(load_path(&empty), Err(SnapshotError::EmptyDirectory(_))));
    assert!(matches!(load_path(&dir.join("missing.json")), Err(SnapshotError::Io { .. })));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Random bytes and random mutations of a good snapshot never panic.
#[test]
fn random_and_mutated_input_never_panics() {
    let good = br#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"topology.kubernetes.io/zone":"z"}},"status":{"conditions":[{"type":"Ready","status":"True","lastHeartbeatTime":"2026-01-01T00:00:00Z"}]}},{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u","ownerReferences":[{"kind":"ReplicaSet","name":"r-1","controller":true}]},"spec":{"nodeName":"n","tolerations":[{"operator":"Exists"}]}}]}"#;
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..3000 {
        let mut bytes = good.to_vec();
        if i % 3 == 0 {
            bytes = (0..(next() % 200)).map(|_| (next() % 256) as u8).collect();
        } else {
            for _ in 0..(1 + next() % 4) {
                let at = (next() as usize) % bytes.len();
                match next() % 3 {
                    0 => bytes[at] = (next() % 128) as u8,
                    1 => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at),
                }
                if bytes.is_empty() {
                    break;
                }
            }
        }
        let mut snap = Snapshot::new("fuzz");
        if read_bytes(&bytes, "fuzz", &mut snap).is_ok() {
            // Whatever was read can be built into a cluster without panic.
            let _ = nodewarden_whatif::prepare(&snap, &Faults::default(), 1);
        }
    }
}
