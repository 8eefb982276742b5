//! How the writer reads the API server's answers, against a canned server
//! (what the served cluster cannot send).
//!
//! It reads what the API server returns as leniently as the watches do. The served cluster decodes every object with our own
//! types, so it cannot send what they cannot hold; a canned server does:
//! a node whose condition time does not parse, carrying a taint of a
//! newer API, and a 2xx whose body is not JSON. Read with k8s-openapi's
//! types, the first made the node's taint patch impossible (its read
//! failed to decode, every attempt) and the second turned an accepted
//! deletion into a failed one, retried.

mod common;

use common::Asked;
use nodewarden_engine::explain::{Explanation, Verdict};
use nodewarden_engine::{ActionKind, Observation, Withdrawal, WriteOutcome, WriteSlot};
use nodewarden_kube::Fence;
use nodewarden_model::{DeletionMode, Taint, TaintEffect, Timestamp};
use serde_json::{Value, json};

/// A taint another controller wrote through a newer API: a field our
/// types do not know, and a `timeAdded` they cannot parse.
fn foreign() -> Value {
    json!({"key": "example.com/drain", "effect": "NoSchedule", "timeAdded": "yesterday",
           "future": {"reason": "from a newer API"}})
}

/// Node `n1` as the canned server holds it, with `taints`.
fn node(taints: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": "n1", "uid": "n1-uid", "resourceVersion": "5"},
           "spec": {"taints": taints},
           "status": {"conditions": [{"type": "Ready", "status": "Unknown", "lastHeartbeatTime": "yesterday"}]}})
}

/// [`common::drive_writer`] with an open fence and every judgement
/// "still true".
async fn write(
    action: ActionKind,
    answer: impl Fn(&Asked) -> (u16, String) + Send + Sync + 'static,
) -> (WriteOutcome, Vec<Observation>, Vec<Asked>) {
    let driven = common::drive_writer(action, Fence::unfenced(), |_| Ok(()), answer).await;
    (driven.outcome, driven.observed, driven.asked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taint_patch_is_computed_from_a_node_our_types_cannot_decode() {
    let unreachable = Taint {
        time_added: Some(Timestamp::from_millis(1_700_000_000_000)),
        ..Taint::new("node.kubernetes.io/unreachable", TaintEffect::NoExecute)
    };
    let action = ActionKind::PatchNodeTaints {
        node: "n1".into(),
        add: vec![unreachable],
        remove: vec![],
        slot: WriteSlot::NoExecuteTaints,
    };
    let (outcome, observed, asked) = write(action, |a| match a.method.as_str() {
        "GET" => (200, node(&json!([foreign()])).to_string()),
        // The patched node: the taints the patch put in.
        "PATCH" => (200, node(&a.body[1]["value"]).to_string()),
        _ => (404, json!({"kind": "Status", "code": 404}).to_string()),
    })
    .await;
    assert_eq!(outcome, WriteOutcome::Done, "requests: {asked:?}");
    let patches: Vec<&Asked> = asked.iter().filter(|a| a.method == "PATCH").collect();
    assert_eq!(patches.len(), 1, "one patch: {asked:?}");
    let ops = &patches[0].body;
    assert_eq!(
        ops[0],
        json!({"op": "test", "path": "/spec/taints", "value": [foreign()]}),
        "guarded by the taints as read"
    );
    assert_eq!(ops[1]["op"], "replace");
    let taints = ops[1]["value"].as_array().expect("the new taints");
    assert_eq!(taints[0], foreign(), "the foreign taint kept exactly as written");
    assert_eq!(taints[1]["key"], "node.kubernetes.io/unreachable");
    assert_eq!(taints[1]["effect"], "NoExecute");
    assert_eq!(taints[1]["timeAdded"], "2023-11-14T22:13:20Z");
    assert!(
        observed.iter().any(|o| matches!(o, Observation::NodeUpserted(n) if n.name == "n1")),
        "the answer is read back as the node: {observed:?}"
    );
}

/// The taint manager's deletion of `default/p1`.
fn deletion() -> ActionKind {
    ActionKind::DeletePod {
        pod: "default/p1".into(),
        uid: "p1-uid".into(),
        mode: DeletionMode::Delete,
        why: Box::new(Explanation {
            pod: "default/p1".into(),
            node: "n1".into(),
            node_facts: None,
            taints: vec![],
            tainting: None,
            verdict: Verdict::NotTolerated {
                taint: Taint::new("node.kubernetes.io/unreachable", TaintEffect::NoExecute),
            },
            scheduled_at: Timestamp::from_millis(0),
            due_at: Timestamp::from_millis(0),
            deleted_at: Timestamp::from_millis(0),
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_accepted_with_an_unreadable_answer_is_done_not_retried() {
    let (outcome, observed, asked) = write(deletion(), |a| match a.method.as_str() {
        "DELETE" => (200, "deleted".into()),
        _ => (404, json!({"kind": "Status", "code": 404}).to_string()),
    })
    .await;
    assert_eq!(outcome, WriteOutcome::Done, "requests: {asked:?}");
    assert_eq!(asked.iter().filter(|a| a.method == "DELETE").count(), 1, "sent once: {asked:?}");
    assert!(
        observed.iter().any(|o| matches!(o, Observation::PodDeleted { key } if key == "default/p1")),
        "{observed:?}"
    );
}

/// A deletion answered 404: the pod was already gone. Nothing was deleted
/// by us, so it is reported withdrawn (the engine counts a deletion only
/// when one is accepted), with the pod's absence, and not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_of_a_pod_already_gone_is_withdrawn_not_counted() {
    let gone = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                      "message": "pods \"p1\" not found", "details": {"name": "p1", "kind": "pods"}});
    let (outcome, observed, asked) = write(deletion(), move |_| (404, gone.to_string())).await;
    assert_eq!(outcome, WriteOutcome::Withdrawn(Withdrawal::AlreadyGone), "requests: {asked:?}");
    assert_eq!(asked.iter().filter(|a| a.method == "DELETE").count(), 1, "sent once: {asked:?}");
    assert!(
        observed.iter().any(|o| matches!(o, Observation::PodDeleted { key } if key == "default/p1")),
        "{observed:?}"
    );
}

/// A status write decided without the node's resourceVersion (0: the
/// engine took an answer of ours without the node) is not sent without a
/// precondition: the node is read, the engine shown it before the write
/// is judged, and the write guarded by the version read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_write_without_a_known_version_is_guarded_by_a_read() {
    let unknown = common::unknown_ready();
    let action = ActionKind::UpdateNodeConditions { node: "n1".into(), conditions: vec![unknown], version: 0 };
    let (outcome, observed, asked) = write(action, |a| match a.method.as_str() {
        "GET" => (200, node(&json!([])).to_string()),
        "PATCH" => (200, node(&json!([])).to_string()),
        _ => (404, json!({"kind": "Status", "code": 404}).to_string()),
    })
    .await;
    assert_eq!(outcome, WriteOutcome::Done, "requests: {asked:?}");
    let methods: Vec<&str> = asked.iter().map(|a| a.method.as_str()).collect();
    assert_eq!(methods, ["GET", "PATCH"], "read first: {asked:?}");
    assert_eq!(asked[1].body["metadata"]["resourceVersion"], "5", "guarded by the version read");
    let read = observed.iter().filter(|o| matches!(o, Observation::NodeUpserted(n) if n.name == "n1")).count();
    assert!(read >= 2, "the read and the answer both reach the engine: {observed:?}");
}
