//! Bad requests, one test each: the right Status, and nothing changed.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{OrFail, options, start};
use nodewarden_cluster::KubeletTiming;
use nodewarden_model::Span;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request; (status, headers, body as JSON or a string).
async fn call(addr: SocketAddr, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, String, Value) {
    let mut s = tokio::net::TcpStream::connect(addr).await.or_fail("connect");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.or_fail("write");
    // The server may answer (413) before reading all of a huge body.
    let _ = s.write_all(body).await;
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = headers.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = serde_json::from_str(body).unwrap_or(Value::String(body.to_string()));
    (code, headers.to_string(), body)
}

struct Fixture {
    served: nodewarden_apiserver::Served,
}

impl Fixture {
    async fn new() -> Fixture {
        let mut opts = options(1, 3);
        // Raw HTTP over a TcpStream, to send what no client library would.
        opts.server.security = nodewarden_apiserver::Security::PlainHttp;
        // Quiet kubelets: nothing changes the objects but the test.
        opts.timing = KubeletTiming {
            lease_every: Span::from_secs(7200),
            update_every: Span::from_secs(7200),
            report_every: Span::from_secs(7200),
        };
        Fixture { served: start(opts).await }
    }

    async fn get(&self, path: &str) -> Value {
        call(self.served.addr, "GET", path, "application/json", b"").await.2
    }

    /// Sends the request, checks the Status, and that `watched` did not change.
    #[allow(clippy::too_many_arguments)]
    async fn refused(
        &self,
        method: &str,
        path: &str,
        ct: &str,
        body: &[u8],
        code: u16,
        reason: &str,
        watched: &str,
    ) -> Value {
        let before = self.get(watched).await;
        let (got, _, status) = call(self.served.addr, method, path, ct, body).await;
        assert_eq!(
            (got, status["kind"].as_str(), status["reason"].as_str()),
            (code, Some("Status"), Some(reason)),
            "{status}"
        );
        assert_eq!(status["code"], code);
        assert_eq!(status["status"], "Failure");
        let after = self.get(watched).await;
        assert_eq!(before, after, "a refused request changed {watched}");
        status
    }

    fn pod_name(&self) -> &'static str {
        "/api/v1/namespaces/apps/pods/w000000-02"
    }
}

const NODE: &str = "/api/v1/nodes/node-000000";
const MERGE: &str = "application/merge-patch+json";
const JSON: &str = "application/json";

async fn run<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(Duration::from_secs(20), f).await.or_fail("timed out");
}

#[tokio::test]
async fn malformed_json_is_400() {
    let f = Fixture::new().await;
    run(async {
        f.refused("PATCH", NODE, MERGE, b"{\"spec\": ", 400, "BadRequest", NODE).await;
        f.refused("POST", "/api/v1/namespaces/apps/pods", JSON, b"not json", 400, "BadRequest", f.pod_name()).await;
        f.refused("PUT", NODE, JSON, b"", 400, "BadRequest", NODE).await;
    })
    .await;
}

#[tokio::test]
async fn wrong_kinds_and_versions_are_400() {
    let f = Fixture::new().await;
    run(async {
        let mut node = f.get(NODE).await;
        node["kind"] = json!("Pod");
        f.refused("PUT", NODE, JSON, node.to_string().as_bytes(), 400, "BadRequest", NODE).await;
        let mut node = f.get(NODE).await;
        node["apiVersion"] = json!("apps/v1");
        f.refused("PUT", NODE, JSON, node.to_string().as_bytes(), 400, "BadRequest", NODE).await;
        let evict = json!({"apiVersion": "v1", "kind": "Pod"});
        f.refused(
            "POST",
            &format!("{}/eviction", f.pod_name()),
            JSON,
            evict.to_string().as_bytes(),
            400,
            "BadRequest",
            f.pod_name(),
        )
        .await;
        // A field of the wrong type.
        f.refused("PATCH", NODE, MERGE, br#"{"spec": {"unschedulable": "yes"}}"#, 400, "BadRequest", NODE).await;
        // A merge patch that is not an object.
        f.refused("PATCH", NODE, MERGE, b"[1, 2]", 400, "BadRequest", NODE).await;
    })
    .await;
}

#[tokio::test]
async fn absurd_sizes_are_413() {
    let f = Fixture::new().await;
    run(async {
        let mut big = br#"{"metadata": {"annotations": {"a": ""#.to_vec();
        big.extend(std::iter::repeat_n(b'x', 4 * 1024 * 1024));
        big.extend(br#""}}}"#);
        let s = f.refused("PATCH", NODE, MERGE, &big, 413, "RequestEntityTooLarge", NODE).await;
        assert_eq!(s["message"], "Request entity too large: limit is 3145728");
        // Under the body limit but over the annotation limit: 422.
        let mut ann = br#"{"metadata": {"annotations": {"a": ""#.to_vec();
        ann.extend(std::iter::repeat_n(b'x', 300 * 1024));
        ann.extend(br#""}}}"#);
        f.refused("PATCH", NODE, MERGE, &ann, 422, "Invalid", NODE).await;
    })
    .await;
}

#[tokio::test]
async fn unknown_fields_are_refused_when_strict_and_dropped_with_a_warning_otherwise() {
    let f = Fixture::new().await;
    run(async {
        let s = f
            .refused(
                "PATCH",
                &format!("{NODE}?fieldValidation=Strict"),
                MERGE,
                br#"{"spec": {"bogus": 1}}"#,
                400,
                "BadRequest",
                NODE,
            )
            .await;
        assert_eq!(s["message"], "strict decoding error: unknown field \"spec.bogus\"");
        f.refused(
            "PATCH",
            &format!("{NODE}?fieldValidation=Sometimes"),
            MERGE,
            br#"{"spec": {}}"#,
            400,
            "BadRequest",
            NODE,
        )
        .await;
        let before = f.get(NODE).await;
        let (code, headers, after) = call(f.served.addr, "PATCH", NODE, MERGE, br#"{"spec": {"bogus": 1}}"#).await;
        assert_eq!(code, 200);
        assert!(
            headers.to_ascii_lowercase().contains("warning: 299 - \"unknown field \\\"spec.bogus\\\"\""),
            "{headers}"
        );
        assert_eq!(before, after, "the unknown field was dropped: nothing changed");
    })
    .await;
}

#[tokio::test]
async fn invalid_objects_are_422_with_causes() {
    let f = Fixture::new().await;
    run(async {
        let s = f.refused("PATCH", NODE, MERGE, br#"{"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}"#, 422, "Invalid", NODE).await;
        assert_eq!(s["details"]["causes"][0]["field"], "spec.taints[0].effect");
        assert_eq!(s["details"]["kind"], "Node");
        f.refused("PATCH", NODE, MERGE, br#"{"metadata": {"labels": {"bad key!": "v"}}}"#, 422, "Invalid", NODE).await;
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"}, "spec": {"containers": []}});
        let s = f.refused("POST", "/api/v1/namespaces/apps/pods", JSON, pod.to_string().as_bytes(), 422, "Invalid", f.pod_name()).await;
        assert_eq!(s["details"]["causes"].as_array().map(Vec::len), Some(2));
        // A running pod's spec may not move to another node.
        f.refused("PATCH", f.pod_name(), MERGE, br#"{"spec": {"nodeName": "elsewhere"}}"#, 422, "Invalid", f.pod_name()).await;
        // A JSON patch whose test fails is not half-applied.
        let jp = br#"[{"op": "add", "path": "/metadata/labels/x", "value": "y"}, {"op": "test", "path": "/spec/unschedulable", "value": true}]"#;
        f.refused("PATCH", NODE, "application/json-patch+json", jp, 422, "Invalid", NODE).await;
    })
    .await;
}

#[tokio::test]
async fn stale_versions_and_missing_or_wrong_preconditions_are_409() {
    let f = Fixture::new().await;
    run(async {
        f.refused(
            "PATCH",
            NODE,
            MERGE,
            br#"{"metadata": {"resourceVersion": "1"}, "spec": {"unschedulable": true}}"#,
            409,
            "Conflict",
            NODE,
        )
        .await;
        let mut node = f.get(NODE).await;
        node["metadata"]["uid"] = json!("not-the-uid");
        f.refused("PUT", NODE, JSON, node.to_string().as_bytes(), 409, "Conflict", NODE).await;
        let del = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-the-uid"}});
        f.refused("DELETE", f.pod_name(), JSON, del.to_string().as_bytes(), 409, "Conflict", f.pod_name()).await;
        let del = json!({"preconditions": {"resourceVersion": "1"}});
        f.refused("DELETE", f.pod_name(), JSON, del.to_string().as_bytes(), 409, "Conflict", f.pod_name()).await;
        let pod = f.get(f.pod_name()).await;
        f.refused(
            "POST",
            "/api/v1/namespaces/apps/pods",
            JSON,
            pod.to_string().as_bytes(),
            409,
            "AlreadyExists",
            f.pod_name(),
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn unknown_paths_verbs_and_media_types_are_404_405_415() {
    let f = Fixture::new().await;
    run(async {
        f.refused("GET", "/api/v1/services", JSON, b"", 404, "NotFound", NODE).await;
        f.refused("GET", "/apis/apps/v1/deployments", JSON, b"", 404, "NotFound", NODE).await;
        f.refused("GET", "/openapi/v3/apis/apps/v9", JSON, b"", 404, "NotFound", NODE).await;
        f.refused("GET", "/api/v1/nodes/nope", JSON, b"", 404, "NotFound", NODE).await;
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        f.refused("POST", "/api/v1/namespaces/nowhere/pods", JSON, pod.to_string().as_bytes(), 404, "NotFound", f.pod_name()).await;
        f.refused("DELETE", "/api/v1/namespaces/apps/pods", JSON, b"", 405, "MethodNotAllowed", f.pod_name()).await;
        f.refused("POST", NODE, JSON, b"{}", 405, "MethodNotAllowed", NODE).await;
        f.refused("PATCH", NODE, "application/apply-patch+yaml", b"spec: {}", 415, "UnsupportedMediaType", NODE).await;
        f.refused("PATCH", NODE, "text/plain", b"{}", 415, "UnsupportedMediaType", NODE).await;
    })
    .await;
}

#[tokio::test]
async fn bad_parameters_are_400_and_too_new_versions_504() {
    let f = Fixture::new().await;
    run(async {
        f.refused("GET", "/api/v1/pods?labelSelector=a%20in%20b", JSON, b"", 400, "BadRequest", NODE).await;
        f.refused("GET", "/api/v1/pods?fieldSelector=spec.bogus%3D1", JSON, b"", 400, "BadRequest", NODE).await;
        f.refused("GET", "/api/v1/pods?limit=ten", JSON, b"", 400, "BadRequest", NODE).await;
        f.refused("GET", "/api/v1/pods?continue=garbage", JSON, b"", 400, "BadRequest", NODE).await;
        f.refused("GET", "/api/v1/pods?resourceVersion=abc", JSON, b"", 400, "BadRequest", NODE).await;
        f.refused("GET", "/api/v1/pods?resourceVersion=999999999", JSON, b"", 504, "Timeout", NODE).await;
        f.refused("PATCH", &format!("{NODE}?dryRun=Some"), MERGE, b"{}", 400, "BadRequest", NODE).await;
        let s =
            f.refused("GET", "/api/v1/nodes?watch=true&sendInitialEvents=true", JSON, b"", 422, "Invalid", NODE).await;
        assert!(s["message"].as_str().unwrap_or_default().contains("sendInitialEvents"), "{s}");
    })
    .await;
}
