//! What the adapter's end-to-end tests share: the in-process API server on
//! loopback (`nodewarden sim --serve`), a client for it, short periods, and
//! a way to store objects the API would refuse.

#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use nodewarden_apiserver::Kind;
use nodewarden_apiserver::store::key_of;
use nodewarden_apiserver::{ServeOptions, Served};
use nodewarden_model::{ControllerConfig, Span};
use serde_json::{Value, json};

// Each test binary uses its own part of this module.
#[allow(unused_imports)]
pub use nodewarden_testkit::served::{CRASHED, kube_config, serve};

/// The node-crash fleet ([`nodewarden_testkit::served::node_crash_fleet`]).
pub fn options() -> ServeOptions {
    nodewarden_testkit::served::node_crash_fleet()
}

/// The controller's periods, shortened about twenty times.
pub fn fast_config() -> ControllerConfig {
    ControllerConfig {
        node_monitor_period: Span::from_millis(200),
        node_monitor_grace_period: Span::from_secs(2),
        node_startup_grace_period: Span::from_secs(2),
        ..ControllerConfig::default()
    }
}

/// A client of `served`, configured as the controller's (no retry
/// hidden below the test).
pub async fn client(served: &Served) -> kube::Client {
    nodewarden_testkit::served::client(served, "nodewarden-kube-test", false).await
}

/// Stores `v` as given, bypassing decoding and validation, as a
/// hand-edited etcd or an older API server could have left it.
pub fn store_raw(served: &Served, kind: Kind, namespace: &str, v: Value) {
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut s = served.shared.store.lock();
    s.commit(kind, &key_of(namespace, &name), v, false);
}

/// (Ready is Unknown, carries the unreachable NoExecute taint).
pub fn unknown_and_tainted(n: &Node) -> (bool, bool) {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    let tainted = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute"));
    (ready.as_deref() == Some("Unknown"), tainted)
}

/// Creates `default/NAME` on `node`, tolerating the unreachable and
/// not-ready NoExecute taints for `seconds`.
pub async fn create_pod(c: &kube::Client, name: &str, node: &str, seconds: i64) -> Pod {
    let tol =
        |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds});
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}],
                 "tolerations": [tol("node.kubernetes.io/unreachable"), tol("node.kubernetes.io/not-ready")]},
    }))
    .expect("a Pod");
    Api::<Pod>::namespaced(c.clone(), "default").create(&PostParams::default(), &pod).await.expect("create pod")
}

/// Polls `check` every 100 ms until it holds or `limit` passes.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = std::time::Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One request that reached the API server through a [`Proxy`], with the
/// server's answer.
#[derive(Clone, Debug)]
pub struct Seen {
    /// `GET`, `PUT`, `PATCH`, `DELETE`, `POST`.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The HTTP status the server answered.
    pub status: u16,
    /// When the request reached the proxy (wall clock, as the controller's
    /// timestamps): no later than the client sent it after any answer it
    /// waited for, and no later than the server processed it.
    pub at: std::time::SystemTime,
}

/// A recording HTTP/1 proxy in front of the served API (its clients speak
/// plain HTTP to it; it speaks HTTPS with the token to the server): every
/// request the server answered is logged, so tests count what reached the server per
/// object. A request the server does not answer (an outage) is not logged,
/// and the client's connection is cut, as the server would cut it.
pub struct Proxy {
    /// Where clients connect.
    pub addr: std::net::SocketAddr,
    log: Log,
    task: tokio::task::JoinHandle<()>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

type Log = std::sync::Arc<std::sync::Mutex<Vec<Seen>>>;

/// Where the proxy sends requests: the served API's address and, over
/// HTTPS, a TLS connector trusting its CA and its bearer token.
#[derive(Clone)]
struct Upstream {
    addr: std::net::SocketAddr,
    tls: Option<(tokio_rustls::TlsConnector, String)>,
}

impl Upstream {
    fn of(served: &Served) -> Upstream {
        use tokio_rustls::rustls;
        use tokio_rustls::rustls::pki_types::CertificateDer;
        use tokio_rustls::rustls::pki_types::pem::PemObject as _;
        let tls = served.ca_pem().zip(served.token()).map(|(ca, token)| {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(CertificateDer::from_pem_slice(ca.as_bytes()).expect("the CA's PEM")).expect("the CA");
            let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
            (tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)), token.to_string())
        });
        Upstream { addr: served.addr, tls }
    }
}

/// One HTTP/1.1 exchange on `io`.
async fn exchange<S>(
    io: S,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<hyper::body::Incoming>, BoxError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
        .await
        .map_err(|e| Box::new(e) as BoxError)?;
    tokio::spawn(conn);
    sender.send_request(req).await.map_err(|e| Box::new(e) as BoxError)
}

/// Sends one request on to the server, on a connection of its own (over
/// TLS, with the token, when the server is HTTPS), and logs the answer.
async fn forward(
    upstream: Upstream,
    mut req: hyper::Request<hyper::body::Incoming>,
    log: Log,
) -> Result<hyper::Response<hyper::body::Incoming>, BoxError> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let at = std::time::SystemTime::now();
    let up = tokio::net::TcpStream::connect(upstream.addr).await.map_err(|e| Box::new(e) as BoxError)?;
    let resp = match &upstream.tls {
        Some((connector, token)) => {
            let bearer = format!("Bearer {token}").parse().map_err(|e| Box::new(e) as BoxError)?;
            req.headers_mut().insert(hyper::header::AUTHORIZATION, bearer);
            let name = tokio_rustls::rustls::pki_types::ServerName::from(upstream.addr.ip());
            exchange(connector.connect(name, up).await.map_err(|e| Box::new(e) as BoxError)?, req).await?
        }
        None => exchange(up, req).await?,
    };
    let seen = Seen { method, path, status: resp.status().as_u16(), at };
    log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(seen);
    Ok(resp)
}

impl Proxy {
    /// Proxies to `served`.
    pub async fn start(served: &Served) -> Proxy {
        let upstream = Upstream::of(served);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let shared = log.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let log = shared.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| forward(upstream.clone(), req, log.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Proxy { addr, log, task }
    }

    /// A client that goes through the proxy.
    pub fn client(&self) -> kube::Client {
        let mut config = kube::Config::new(format!("http://{}", self.addr).parse().expect("url"));
        config.read_timeout = Some(Duration::from_secs(10));
        config.connect_timeout = Some(Duration::from_secs(2));
        kube::Client::try_from(nodewarden_kube::controller_config(config)).expect("client")
    }

    /// Every request answered so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The answered requests other than reads (`GET`, watches included)
    /// to `path`.
    pub fn writes_to(&self, path: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.method != "GET" && s.path == path).collect()
    }

    /// Stops proxying.
    pub fn stop(self) {
        self.task.abort();
    }
}

/// The path of pod `default/NAME`.
pub fn pod_path(name: &str) -> String {
    format!("/api/v1/namespaces/default/pods/{name}")
}

/// What the store saw happen, recorded from its own change feed: which
/// nodes ever carried a NoExecute taint (and when it was first seen), and
/// which pods were deleted.
#[derive(Debug, Default)]
pub struct History {
    /// Node name, taint key, `timeAdded` of the NoExecute taints seen.
    pub noexecute: std::collections::BTreeSet<(String, String, String)>,
    /// Deleted pods' `namespace/name`, in order (a pod twice: deleted twice).
    pub deleted_pods: Vec<String>,
    /// The feed overflowed: what is above may be incomplete.
    pub lagged: bool,
}

/// The served store's changes of `kind` from now on, as its own watches
/// see them.
pub fn store_changes(
    served: &Served,
    kind: Kind,
) -> tokio::sync::broadcast::Receiver<std::sync::Arc<nodewarden_apiserver::store::Change>> {
    let mut s = served.shared.store.lock();
    let rv = s.rv();
    s.watch(kind, Some(rv)).expect("watch the store").rx
}

/// Records the store's changes to nodes and pods into a [`History`].
pub struct Recorder {
    history: std::sync::Arc<std::sync::Mutex<History>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Recorder {
    /// Records from now.
    pub fn start(served: &Served) -> Recorder {
        let history = std::sync::Arc::new(std::sync::Mutex::new(History::default()));
        let mut tasks = Vec::new();
        for kind in [Kind::Node, Kind::Pod] {
            let mut rx = store_changes(served, kind);
            let h = history.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    match rx.recv().await {
                        Ok(c) => {
                            let mut h = h.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                            let v = c.obj.value();
                            match kind {
                                Kind::Pod if c.kind == nodewarden_apiserver::store::EventType::Deleted => {
                                    h.deleted_pods.push(c.obj.key.clone());
                                }
                                Kind::Node => {
                                    for t in v.pointer("/spec/taints").and_then(Value::as_array).into_iter().flatten() {
                                        if t["effect"] == "NoExecute" {
                                            h.noexecute.insert((
                                                c.obj.name().to_string(),
                                                t["key"].as_str().unwrap_or_default().to_string(),
                                                t["timeAdded"].as_str().unwrap_or_default().to_string(),
                                            ));
                                        }
                                    }
                                }
                                _ => {}
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            h.lock().unwrap_or_else(std::sync::PoisonError::into_inner).lagged = true;
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    }
                }
            }));
        }
        Recorder { history, tasks }
    }

    /// What was recorded; stops recording.
    pub fn finish(self) -> History {
        for t in &self.tasks {
            t.abort();
        }
        std::mem::take(&mut *self.history.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

/// The start of a scenario file named `name`: kubelets heartbeating every
/// 200 ms with 1 s Leases, no default tolerations admitted (so a pod
/// tolerates exactly what the file says); the `nodes:` list follows.
pub fn scenario_preamble(name: &str) -> String {
    format!(
        "name: {name}\n\
         cluster:\n  \
           default-not-ready-toleration-seconds: null\n  \
           default-unreachable-toleration-seconds: null\n  \
           kubelet: {{node-lease-duration-seconds: 1, node-status-update-frequency: 200ms, \
                     node-status-report-frequency: 2s}}\n\
         nodes:\n"
    )
}

/// A client of an API server on loopback that accepts connections and
/// never answers: nothing sent through it ever finishes. The server's
/// task is returned for the test to abort.
pub async fn silent_server() -> (kube::Client, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let mut config = kube::Config::new(format!("http://{addr}").parse().expect("url"));
    config.read_timeout = Some(Duration::from_secs(600));
    let client = kube::Client::try_from(nodewarden_kube::controller_config(config)).expect("client");
    (client, server)
}

/// One request a [`canned_server`] answered: method, path (with its
/// query) and body.
#[derive(Clone, Debug)]
pub struct Asked {
    /// `GET`, `PATCH`, `DELETE`, ...
    pub method: String,
    /// The path and query.
    pub path: String,
    /// The request's body, as JSON (`Null` when empty or not JSON).
    pub body: Value,
}

/// A client of an API server on loopback that answers each request as
/// `answer` says (status and body text), and the requests it answered,
/// in order: for what the served cluster cannot send (an answer our types
/// cannot decode, a 2xx body that is not JSON). The server's task is
/// returned for the test to abort.
pub async fn canned_server(
    answer: impl Fn(&Asked) -> (u16, String) + Send + Sync + 'static,
) -> (kube::Client, std::sync::Arc<std::sync::Mutex<Vec<Asked>>>, tokio::task::JoinHandle<()>) {
    use http_body_util::BodyExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Asked>::new()));
    let answer = std::sync::Arc::new(answer);
    let log = asked.clone();
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (answer, log) = (answer.clone(), log.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (answer, log) = (answer.clone(), log.clone());
                    async move {
                        let method = req.method().to_string();
                        let path = req.uri().path_and_query().map(ToString::to_string).unwrap_or_default();
                        let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                        let asked = Asked { method, path, body };
                        let (status, text) = answer(&asked);
                        log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(asked);
                        let mut res = hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::from(text)));
                        *res.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
                        res.headers_mut().insert(
                            hyper::header::CONTENT_TYPE,
                            hyper::header::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, std::convert::Infallible>(res)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let config = kube::Config::new(format!("http://{addr}").parse().expect("url"));
    let client = kube::Client::try_from(nodewarden_kube::controller_config(config)).expect("client");
    (client, asked, server)
}

/// Node lifecycle's Ready=Unknown condition, as a status write carries it.
pub fn unknown_ready() -> nodewarden_model::NodeCondition {
    nodewarden_model::NodeCondition {
        kind: nodewarden_model::ConditionType::Ready,
        status: nodewarden_model::ConditionStatus::Unknown,
        reason: "NodeStatusUnknown".into(),
        message: "Kubelet stopped posting node status.".into(),
        last_heartbeat: nodewarden_model::Timestamp::from_millis(1_700_000_000_000),
        last_transition: nodewarden_model::Timestamp::from_millis(1_700_000_040_000),
    }
}

/// What [`drive_writer`] saw of one write.
pub struct Driven {
    /// Its `WriteFinished` outcome.
    pub outcome: nodewarden_engine::WriteOutcome,
    /// The observations the writer handed the engine with it (reads, the
    /// answer's object).
    pub observed: Vec<nodewarden_engine::Observation>,
    /// The requests the server answered, in order.
    pub asked: Vec<Asked>,
}

/// Hands `action` (id 1) to a writer behind `fence` talking to a
/// [`canned_server`] answering as `answer` does, plays the engine
/// thread's side (each judgement answered by `judge`), and returns what
/// came of it. Panics when no `WriteFinished` comes within 10 s.
pub async fn drive_writer(
    action: nodewarden_engine::ActionKind,
    fence: std::sync::Arc<nodewarden_kube::Fence>,
    judge: impl Fn(&nodewarden_engine::Action) -> Result<(), nodewarden_engine::Withdrawal> + Send + 'static,
    answer: impl Fn(&Asked) -> (u16, String) + Send + Sync + 'static,
) -> Driven {
    use nodewarden_controller::ClusterApi;
    use nodewarden_engine::{Action, ActionId, Observation};
    use nodewarden_kube::{Input, WriterOptions, spawn_writer};
    let (client, asked, server) = canned_server(answer).await;
    let (answers, inputs) = crossbeam_channel::unbounded::<Input>();
    let opts = WriterOptions { qps: 100.0, burst: 10, ..WriterOptions::default() };
    let (mut api, writer) = spawn_writer(client, answers, opts, fence);
    let _ = api.apply(nodewarden_model::Timestamp::from_millis(0), &Action { id: ActionId(1), kind: action });
    let engine = std::thread::spawn(move || {
        let mut outcome = None;
        let mut observed = Vec::new();
        while let Ok(input) = inputs.recv_timeout(Duration::from_secs(10)) {
            match input {
                Input::Judge { action, reply } => {
                    let _ = reply.send(judge(&action));
                }
                Input::Observe(Observation::WriteFinished { outcome: o, .. }) => outcome = Some(o),
                Input::Observe(o) => observed.push(o),
                _ => {}
            }
            if outcome.is_some() && inputs.is_empty() {
                // The observations follow their WriteFinished at once.
                if let Ok(Input::Observe(o)) = inputs.recv_timeout(Duration::from_millis(300)) {
                    observed.push(o);
                }
                break;
            }
        }
        (outcome, observed)
    });
    let (outcome, observed) =
        tokio::task::spawn_blocking(move || engine.join().expect("engine side")).await.expect("joined");
    writer.abort();
    server.abort();
    let asked = asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let outcome = outcome.unwrap_or_else(|| panic!("no WriteFinished; the server saw {asked:?}"));
    Driven { outcome, observed, asked }
}
