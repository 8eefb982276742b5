//! The HTTP server: routing Kubernetes API paths to the store.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response};
use nodewarden_model::Timestamp;
use nodewarden_sim::AdmissionDefaults;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc};
use tracing::{debug, warn};

use crate::clock::TimeBase;
use crate::error::{ApiError, Cause};
use crate::faults::{ApiFaults, Verdict};
use crate::http::{self, Abort, ChannelBody, ResBody, Wanted};
use crate::objects::{self, FieldValidation};
use crate::resource::{self, Kind, Resource};
use crate::selector::{self, FieldSelector, LabelSelector};
use crate::store::{Change, Continue, EventType, Obj, Store, key_of, parse_rv};
use crate::table::{self, IncludeObject};
use crate::tls::{Credentials, Security};
use crate::{events, openapi, openapi_v2, pdb, protobuf};

/// Upstream's request body limit (3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// How the server behaves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// A watch without `timeoutSeconds` ends after a random time between
    /// this and twice this (upstream's `--min-request-timeout`, 1800 s).
    pub min_request_timeout: Duration,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_every: Duration,
    /// Largest request body.
    pub max_body: usize,
    /// Keep a [`WriteRecord`] of every accepted write (off by default: the
    /// log grows with every write; tests that check who wrote when turn it
    /// on).
    pub record_writes: bool,
    /// Keep a [`RequestRecord`](crate::RequestRecord) of every request,
    /// whatever its answer (off by default; tests that check a client's
    /// RBAC needs turn it on).
    pub record_requests: bool,
    /// Serve `events.k8s.io/v1` (on by default). Off, its paths answer 404
    /// as on a server without that group, so clients fall back to core/v1
    /// Events.
    pub events_v1: bool,
    /// HTTPS with a bearer token (the default), or plain HTTP without
    /// authentication ([`Security`]).
    pub security: Security,
}

/// One write the server accepted: when, by which client, what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    /// When the answer was ready (the write had taken effect).
    pub at: std::time::Instant,
    /// The client's `User-Agent` (kube-rs clients send none unless told).
    pub user_agent: String,
    /// POST, PUT, PATCH or DELETE.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The answer's status code (2xx).
    pub code: u16,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            min_request_timeout: Duration::from_secs(1800),
            bookmark_every: Duration::from_secs(60),
            max_body: MAX_BODY,
            record_writes: false,
            record_requests: false,
            events_v1: true,
            security: Security::Https,
        }
    }
}

/// What every request handler shares.
pub struct Shared {
    /// The objects.
    pub store: Store,
    /// The wall-clock anchor of the simulator's time.
    pub time: TimeBase,
    /// Faults in force.
    pub faults: ApiFaults,
    /// Settings.
    pub config: ServerConfig,
    /// The DefaultTolerationSeconds admission plugin's settings.
    pub admission: AdmissionDefaults,
    /// Where the server listens (for `/api`).
    pub addr: std::sync::OnceLock<SocketAddr>,
    /// Accepted writes, when [`ServerConfig::record_writes`] is on.
    pub writes: std::sync::Mutex<Vec<WriteRecord>>,
    /// Every request, when [`ServerConfig::record_requests`] is on.
    pub requests: std::sync::Mutex<Vec<crate::RequestRecord>>,
    /// Deletions and evictions the API still refuses, by pod key: a
    /// scenario file's `refuse-deletions: N`, as an admission webhook (or,
    /// for an eviction, a budget) would refuse them.
    pub refusals: std::sync::Mutex<HashMap<String, u32>>,
    /// Pods terminating through a grace period a deletion asked for, by
    /// key, with when it ends; `None` when the cluster removes every
    /// deleted pod at once (see [`Shared::graceful_deletion`]).
    pub graceful: std::sync::Mutex<Option<std::collections::BTreeMap<String, Timestamp>>>,
}

impl Shared {
    /// When a deleted pod stays terminating: in a cluster about scheduling
    /// (a scenario with `cluster.scheduler: true`, the critical-addon
    /// cluster), a bound pod whose node is Ready is held by its kubelet
    /// through its grace period (the deletion's `gracePeriodSeconds`, else
    /// the pod's own), so the rescheduler's addon waits for the room; the
    /// deletion ends when the grace does. Everything else goes at once, as
    /// in replay: node lifecycle deletes pods of nodes that are not Ready,
    /// whose kubelet cannot hold them. `Some((grace, end))` when it stays.
    pub fn graceful_deletion(
        &self,
        s: &crate::store::Inner,
        pod: &Value,
        grace: Option<i64>,
    ) -> Option<(i64, Timestamp)> {
        self.graceful.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref()?;
        let grace = grace
            .or_else(|| pod.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64))
            .filter(|g| *g > 0)?;
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty())?;
        let terminating = pod.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
        let node_ready =
            s.get(Kind::Node, node).is_some_and(|n| n.field(crate::store::NODE_READY).as_deref() == Some("True"));
        (node_ready && !terminating).then(|| (grace, self.time.now() + nodewarden_model::Span::from_secs(grace)))
    }

    /// Whether the pod is terminating through a grace period a deletion
    /// asked for.
    pub fn terminating_gracefully(&self, key: &str) -> bool {
        self.graceful
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(|g| g.contains_key(key))
    }

    /// Marks `pod` terminating until `until` and stores it.
    pub fn start_graceful(
        &self,
        s: &mut crate::store::Inner,
        key: &str,
        mut pod: Value,
        grace: i64,
        until: Timestamp,
    ) -> Arc<Obj> {
        crate::pdb::mark_graceful(&mut pod, Some(grace), &self.time.time(self.time.now()));
        if let Some(g) = self.graceful.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
            g.insert(key.to_string(), until);
        }
        s.commit(Kind::Pod, key, pod, false)
    }

    /// Ends the graceful deletions due by `now`.
    pub fn end_graceful(&self, now: Timestamp) {
        let due: Vec<String> = {
            let mut g = self.graceful.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(g) = g.as_mut() else { return };
            let due: Vec<String> = g.iter().filter(|(_, t)| **t <= now).map(|(k, _)| k.clone()).collect();
            for k in &due {
                g.remove(k);
            }
            due
        };
        if due.is_empty() {
            return;
        }
        let mut s = self.store.lock();
        for key in due {
            if let Some(p) = s.get(Kind::Pod, &key)
                && p.value().pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null())
            {
                s.commit(Kind::Pod, &key, p.value(), true);
            }
        }
    }

    /// Takes one of the pod's remaining refusals: true when this deletion
    /// (or eviction) is to be refused.
    pub fn refuses_deletion(&self, key: &str) -> bool {
        let mut r = self.refusals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match r.get_mut(key) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }
}

/// How long a client may take over the TLS handshake before its
/// connection is dropped, so a stalled client holds no task for long
/// (client-go gives up on its side after 10 s too).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves until the listener fails or the task is dropped: over TLS,
/// requiring the bearer token, when `credentials` are given; plain HTTP
/// without authentication otherwise.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, credentials: Option<Arc<Credentials>>) {
    if let Ok(a) = listener.local_addr() {
        let _ = shared.addr.set(a);
    }
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if shared.faults.outage() {
            drop(stream);
            continue;
        }
        // Responses go out in several writes; without this, Nagle's
        // algorithm and the client's delayed ACK add 40 ms to each one on
        // a kept-alive connection (kubectl's paged lists).
        if let Err(e) = stream.set_nodelay(true) {
            debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let sh = shared.clone();
        let credentials = credentials.clone();
        // The handshake runs in the connection's own task, so a slow or
        // broken client never holds up the next accept.
        tokio::spawn(async move {
            match credentials {
                None => serve_connection(stream, sh, None, peer).await,
                Some(c) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, c.acceptor().accept(stream)).await {
                    Ok(Ok(tls)) => serve_connection(tls, sh, Some(c), peer).await,
                    Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => debug!(%peer, "TLS handshake timed out"),
                },
            }
        });
    }
}

/// Serves HTTP/1.1 on one accepted (and, over HTTPS, handshaken)
/// connection until it ends.
async fn serve_connection<S>(stream: S, sh: Arc<Shared>, credentials: Option<Arc<Credentials>>, peer: SocketAddr)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| handle(sh.clone(), credentials.clone(), req));
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    if let Err(e) = conn.await {
        debug!(%peer, error = %e, "connection ended");
    }
}

async fn handle(
    sh: Arc<Shared>,
    credentials: Option<Arc<Credentials>>,
    req: Request<Incoming>,
) -> Result<Response<ResBody>, Abort> {
    // Authentication first, as kube-apiserver's filter chain does: a
    // request without the token is neither recorded (the request log is
    // what an authorizer would see) nor subject to injected faults.
    if let Some(c) = &credentials
        && !c.authorized(req.headers().get(hyper::header::AUTHORIZATION))
    {
        debug!(method = %req.method(), path = req.uri().path(), "unauthenticated request refused");
        return Ok(http::error_response(&ApiError::Unauthorized));
    }
    let agent = req.headers().get(hyper::header::USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_string);
    if sh.config.record_requests {
        let record = crate::request_log::describe(
            req.method().as_str(),
            req.uri().path(),
            req.uri().query(),
            agent.as_deref().unwrap_or_default(),
        );
        sh.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(record);
    }
    let (delay, fail) = match sh.faults.verdict_for(Some(agent.as_deref().unwrap_or_default()), Some(req.uri().path()))
    {
        Verdict::Abort => return Err(Abort),
        Verdict::Fail(e, d) => (d, Some(e)),
        Verdict::Proceed(d) => (d, None),
    };
    if !delay.is_zero() {
        tokio::time::sleep(nodewarden_model::wall::real(delay)).await;
    }
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if let Some(e) = fail {
        debug!(%method, %path, code = e.code(), "injected failure");
        return Ok(http::error_response(&e));
    }
    let r = route(&sh, req).await;
    let resp = match r {
        Ok(r) => r,
        Err(e) => {
            debug!(%method, %path, code = e.code(), error = %e, "request refused");
            http::error_response(&e)
        }
    };
    let is_write = !matches!(method, Method::GET | Method::HEAD);
    let accepted_write = resp.status().is_success() && is_write;
    if is_write
        && let Some(j) = sh.store.journal()
        && crate::journal::written_object(&path).is_some()
    {
        j.write(method.as_str(), &path, agent.as_deref().unwrap_or_default(), resp.status().as_u16());
    }
    if sh.config.record_writes && accepted_write {
        let record = WriteRecord {
            at: std::time::Instant::now(),
            user_agent: agent.unwrap_or_default(),
            method: method.to_string(),
            path,
            code: resp.status().as_u16(),
        };
        sh.writes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(record);
    }
    Ok(resp)
}

/// A request as the handlers see it.
struct Req {
    method: Method,
    query: HashMap<String, String>,
    wanted: Wanted,
    content_type: String,
    body: Bytes,
}

impl Req {
    fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        if self.body.is_empty() {
            return Err(ApiError::BadRequest("the request body is empty".into()));
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            ApiError::BadRequest(format!(
                "the object provided is unrecognized: couldn't get version/kind; json parse error: {e}"
            ))
        })
    }

    fn dry_run(&self) -> Result<bool, ApiError> {
        match self.q("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => {
                Err(ApiError::BadRequest(format!("Invalid dryRun value {other:?}: only \"All\" is supported")))
            }
        }
    }
}

async fn route(sh: &Arc<Shared>, req: Request<Incoming>) -> Result<Response<ResBody>, ApiError> {
    let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
    // The OpenAPI documents are served by kube-openapi's handlers upstream,
    // with their own media types and negotiation (client-go asks for the v2
    // document in protobuf only), not the resource endpoints'.
    if req.uri().path().starts_with("/openapi/") {
        return openapi_request(&req, accept);
    }
    let wanted = http::negotiate(accept)?;
    let query = http::parse_query(req.uri().query());
    let path = req.uri().path().trim_end_matches('/').to_string();
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(';').next().unwrap_or_default().trim().to_string())
        .unwrap_or_default();
    let declared =
        req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|s| s.parse::<usize>().ok());
    let max = sh.config.max_body;
    if declared.is_some_and(|n| n > max) {
        return Err(ApiError::TooLarge(max));
    }
    let method = req.method().clone();
    let body = match Limited::new(req.into_body(), max).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(ApiError::TooLarge(max)),
    };
    let r = Req { method, query, wanted, content_type, body };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let get_only = |v: Value| -> Result<Response<ResBody>, ApiError> {
        if r.method == Method::GET { Ok(http::value_response(200, &v)) } else { Err(ApiError::MethodNotAllowed) }
    };
    match segs.as_slice() {
        ["version"] => get_only(json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0-nodewarden-sim",
            "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64",
        })),
        ["healthz" | "livez" | "readyz"] => {
            let mut resp = http::json_response(200, "ok");
            resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
            Ok(resp)
        }
        ["api"] => get_only(resource::core_versions(&sh.addr.get().map_or_else(String::new, ToString::to_string))),
        ["apis"] => get_only(resource::group_list()),
        ["api", "v1"] => get_only(resource::resource_list("", "v1").unwrap_or_default()),
        ["apis", g] => get_only(resource::group(g).ok_or(ApiError::NoRoute)?),
        ["apis", g, v] => get_only(resource::resource_list(g, v).ok_or(ApiError::NoRoute)?),
        ["api", "v1", rest @ ..] => resource_request(sh, &r, "", "v1", rest).await,
        ["apis", "events.k8s.io", ..] if !sh.config.events_v1 => Err(ApiError::NoRoute),
        ["apis", g, v, rest @ ..] => resource_request(sh, &r, g, v, rest).await,
        _ => Err(ApiError::NoRoute),
    }
}

/// `GET /openapi/v2`, `/openapi/v3` and the v3 group-version documents.
fn openapi_request(req: &Request<Incoming>, accept: Option<&str>) -> Result<Response<ResBody>, ApiError> {
    let path = req.uri().path().trim_end_matches('/');
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let v3 = |doc: Option<Value>| doc.map(|d| openapi::v3_response(accept, &d)).ok_or(ApiError::NoRoute);
    let known = matches!(
        segs.as_slice(),
        ["openapi", "v2" | "v3"] | ["openapi", "v3", "api", _] | ["openapi", "v3", "apis", _, _]
    );
    if known && req.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    Ok(match segs.as_slice() {
        ["openapi", "v2"] => {
            let if_none_match = req.headers().get(hyper::header::IF_NONE_MATCH).and_then(|v| v.to_str().ok());
            openapi_v2::response(accept, if_none_match).map_err(|e| {
                warn!(error = %e, "the OpenAPI v2 document could not be produced");
                ApiError::Unavailable(e.to_string())
            })?
        }
        ["openapi", "v3"] => v3(Some(openapi::index()))?,
        ["openapi", "v3", "api", v] => v3(openapi::group_version("", v))?,
        ["openapi", "v3", "apis", g, v] => v3(openapi::group_version(g, v))?,
        _ => return Err(ApiError::NoRoute),
    })
}

async fn resource_request(
    sh: &Arc<Shared>,
    r: &Req,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Response<ResBody>, ApiError> {
    let find = |plural: &str| Resource::find(group, version, plural).ok_or(ApiError::NoRoute);
    let (res, ns, name, sub): (&Resource, Option<&str>, Option<&str>, Option<&str>) = match rest {
        ["namespaces", ns, plural, tail @ ..] if group.is_empty() || *plural != "status" => {
            let res = find(plural)?;
            if !res.namespaced {
                return Err(ApiError::NoRoute);
            }
            match tail {
                [] => (res, Some(*ns), None, None),
                [name] => (res, Some(*ns), Some(*name), None),
                [name, sub] => (res, Some(*ns), Some(*name), Some(*sub)),
                _ => return Err(ApiError::NoRoute),
            }
        }
        [plural] => (find(plural)?, None, None, None),
        [plural, name] => {
            let res = find(plural)?;
            if res.namespaced {
                return Err(ApiError::NoRoute);
            }
            (res, None, Some(*name), None)
        }
        [plural, name, sub] => {
            let res = find(plural)?;
            if res.namespaced {
                return Err(ApiError::NoRoute);
            }
            (res, None, Some(*name), Some(*sub))
        }
        _ => return Err(ApiError::NoRoute),
    };
    if let Some(s) = sub
        && !res.subresources.contains(&s)
    {
        return Err(ApiError::NoRoute);
    }
    let ns_str = ns.unwrap_or_default();
    // Whole objects come as JSON, but for the one protobuf body kubectl
    // sends here (a Namespace, from `kubectl create namespace`).
    let protobuf_namespace =
        r.method == Method::POST && res.kind == Kind::Namespace && r.content_type == protobuf::MEDIA_TYPE;
    if (r.method == Method::POST || r.method == Method::PUT)
        && !r.content_type.is_empty()
        && r.content_type != "application/json"
        && !protobuf_namespace
    {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format ({:?}) - accepted media types include: application/json",
            r.content_type
        )));
    }
    match (&r.method, name, sub) {
        (&Method::GET, None, None) => {
            if matches!(r.q("watch"), Some("true" | "1")) {
                watch(sh, r, res, ns).await
            } else {
                list(sh, r, res, ns)
            }
        }
        (&Method::GET, Some(n), None | Some("status")) => get(sh, r, res, ns_str, n),
        (&Method::POST, None, None) => create(sh, r, res, ns_str),
        (&Method::POST, Some(n), Some("eviction")) => pdb::evict(sh, r.json_body()?, r.dry_run()?, ns_str, n),
        (&Method::POST, Some(n), Some("binding")) => crate::binding::bind(sh, r.json_body()?, r.dry_run()?, ns_str, n),
        (&Method::PUT, Some(n), None | Some("status")) => {
            let fv = FieldValidation::parse(r.q("fieldValidation"))?;
            let body = r.json_body()?;
            write(sh, r, res, ns_str, n, sub, Op::Replace(body), fv)
        }
        (&Method::PATCH, Some(n), None | Some("status")) => {
            let fv = FieldValidation::parse(r.q("fieldValidation"))?;
            let kind = match r.content_type.as_str() {
                "application/merge-patch+json" => PatchKind::Merge,
                "application/json-patch+json" => PatchKind::Json,
                "application/strategic-merge-patch+json" => PatchKind::Strategic,
                "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                    return Err(ApiError::UnsupportedMediaType(
                        "server-side apply is not implemented by nodewarden sim --serve; use a JSON merge, JSON or strategic merge patch".into(),
                    ));
                }
                other => {
                    return Err(ApiError::UnsupportedMediaType(format!(
                        "the body of the request was in an unknown format ({other:?}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
                    )));
                }
            };
            let patch = r.json_body()?;
            write(sh, r, res, ns_str, n, sub, Op::Patch(kind, patch), fv)
        }
        (&Method::DELETE, Some(n), None) => delete(sh, r, res, ns_str, n),
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// The object as this resource (view) serves it.
fn view(res: &Resource, obj: &Obj) -> Bytes {
    if res.converted {
        Bytes::from(serde_json::to_vec(&events::to_v1(&obj.value())).unwrap_or_default())
    } else {
        obj.json()
    }
}

/// Appends the object as this resource serves it to `out` (a list's body).
fn put_view(res: &Resource, obj: &Obj, out: &mut BytesMut) {
    if res.converted { out.put_slice(&view(res, obj)) } else { obj.put_json(out) }
}

fn view_value(res: &Resource, obj: &Obj) -> Value {
    if res.converted { events::to_v1(&obj.value()) } else { obj.value() }
}

fn not_found(res: &Resource, name: &str) -> ApiError {
    ApiError::NotFound { resource: res.qualified(), name: name.to_string() }
}

fn table_of(
    sh: &Shared,
    res: &Resource,
    r: &Req,
    api_version: &str,
    objs: &[Value],
    meta: Value,
) -> Result<Value, ApiError> {
    let include = match r.q("includeObject") {
        None | Some("Metadata") => IncludeObject::Metadata,
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        Some(o) => {
            return Err(ApiError::BadRequest(format!("includeObject {o:?} is not one of None, Metadata, Object")));
        }
    };
    let now = sh.time.now();
    let kind = res.kind;
    let rows: Vec<Value> = objs
        .iter()
        .map(|v| {
            let core = if res.converted { events::to_core(v) } else { v.clone() };
            let mut row = table::row(kind, &core, include, &sh.time, now);
            if include == IncludeObject::Object {
                row["object"] = v.clone();
            }
            row
        })
        .collect();
    let cols = if r.q("noHeaders").is_some() { Vec::new() } else { table::columns(kind) };
    Ok(json!({"kind": "Table", "apiVersion": api_version, "metadata": meta, "columnDefinitions": cols, "rows": rows}))
}

fn get(sh: &Shared, r: &Req, res: &Resource, ns: &str, name: &str) -> Result<Response<ResBody>, ApiError> {
    let obj = sh.store.lock().get(res.kind, &key_of(ns, name)).ok_or_else(|| not_found(res, name))?;
    match r.wanted {
        Wanted::Table(av) => Ok(http::value_response(
            200,
            &table_of(sh, res, r, av, &[view_value(res, &obj)], json!({"resourceVersion": obj.rv.to_string()}))?,
        )),
        Wanted::Object => Ok(http::json_response(200, view(res, &obj))),
    }
}

/// The filters of a list or watch.
struct Filter {
    prefix: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn from(r: &Req, res: &Resource, ns: Option<&str>) -> Result<Filter, ApiError> {
        let labels = selector::parse_labels(r.q("labelSelector").unwrap_or_default())?;
        let mut fields = selector::parse_fields(r.q("fieldSelector").unwrap_or_default(), |f| res.selectable(f))?;
        if res.converted {
            for f in &mut fields.0 {
                f.field = events::core_field(&f.field);
            }
        }
        Ok(Filter { prefix: ns.map(|n| format!("{n}/")), labels, fields })
    }

    fn matches(&self, o: &Obj) -> bool {
        self.prefix.as_ref().is_none_or(|p| o.key.starts_with(p.as_str()))
            && self.labels.matches_with(|k| o.labels.get(k))
            && self.fields.matches(|f| o.field(f))
    }
}

fn list(sh: &Shared, r: &Req, res: &Resource, ns: Option<&str>) -> Result<Response<ResBody>, ApiError> {
    let filter = Filter::from(r, res, ns)?;
    let limit = match r.q("limit") {
        None => None,
        Some(l) => match l.parse::<i64>() {
            Ok(n) if n > 0 => Some(n as usize),
            Ok(_) => None,
            Err(_) => return Err(ApiError::BadRequest(format!("invalid limit {l:?}"))),
        },
    };
    let rv_param = r.q("resourceVersion");
    let rv_match = r.q("resourceVersionMatch");
    let (snap, start, left) = {
        let mut s = sh.store.lock();
        match r.q("continue") {
            Some(token) => {
                if rv_param.is_some_and(|v| v != "0") || rv_match.is_some() {
                    return Err(ApiError::BadRequest(
                        "specifying resource version is not allowed when using continue".into(),
                    ));
                }
                let c = Continue::decode(token)?;
                match s.kept_snapshot(res.kind, c.rv) {
                    Some(snap) => (snap, c.start, c.left),
                    None => {
                        let fresh = Continue { rv: s.rv(), start: c.start, left: None }.encode();
                        let mut e = ApiError::Gone(crate::store::CONTINUE_EXPIRED.to_string()).status();
                        e["metadata"] = json!({"continue": fresh});
                        return Ok(http::value_response(410, &e));
                    }
                }
            }
            None => {
                let current = s.rv();
                if let Some(v) = rv_param.filter(|v| *v != "0") {
                    let n = parse_rv(v)?;
                    match rv_match {
                        Some("Exact") if n != current => {
                            let kept = s.kept_snapshot(res.kind, n).ok_or_else(|| {
                                ApiError::Gone("The resourceVersion for the provided list is too old.".into())
                            })?;
                            (kept, String::new(), None)
                        }
                        _ if n > current => {
                            return Err(ApiError::Timeout(format!(
                                "Too large resource version: {n}, current: {current}"
                            )));
                        }
                        _ => (s.snapshot(res.kind), String::new(), None),
                    }
                } else {
                    match rv_match {
                        None | Some("NotOlderThan") | Some("Exact") => {}
                        Some(other) => {
                            return Err(ApiError::BadRequest(format!("invalid resourceVersionMatch {other:?}")));
                        }
                    }
                    (s.snapshot(res.kind), String::new(), None)
                }
            }
        }
    };
    let mut items: Vec<&Arc<Obj>> = Vec::new();
    let mut next: Option<String> = None;
    let start_key = start;
    let mut it = snap.iter_from(&start_key, filter.prefix.as_deref()).filter(|o| filter.matches(o));
    for o in it.by_ref() {
        if limit.is_some_and(|l| items.len() >= l) {
            next = Some(format!("{}\u{0}", items.last().map_or("", |x| x.key.as_str())));
            break;
        }
        items.push(o);
    }
    let mut meta = json!({"resourceVersion": snap.rv.to_string()});
    if let Some(start) = next {
        // Upstream reports the rest only when no selector filters it. The
        // first page counts it (the whole kind at once when no namespace
        // narrows it); later pages subtract from what their token carries.
        let remaining = if filter.labels.is_empty() && filter.fields.is_empty() {
            Some(match (left, &filter.prefix) {
                (Some(left), _) => usize::try_from(left).unwrap_or(usize::MAX).saturating_sub(items.len()),
                (None, None) if start_key.is_empty() => snap.len().saturating_sub(items.len()),
                (None, _) => 1 + it.count(),
            })
        } else {
            None
        };
        sh.store.lock().keep_snapshot(res.kind, &snap);
        meta["continue"] = json!(Continue { rv: snap.rv, start, left: remaining.map(|n| n as u64) }.encode());
        if let Some(n) = remaining {
            meta["remainingItemCount"] = json!(n);
        }
    }
    match r.wanted {
        Wanted::Table(av) => {
            let objs: Vec<Value> = items.iter().map(|o| view_value(res, o)).collect();
            Ok(http::value_response(200, &table_of(sh, res, r, av, &objs, meta)?))
        }
        Wanted::Object => {
            let mut out = BytesMut::with_capacity(64 + items.iter().map(|o| o.json_len() + 1).sum::<usize>());
            let head = json!({"kind": res.list_kind(), "apiVersion": res.api_version(), "metadata": meta});
            let head = serde_json::to_string(&head).unwrap_or_default();
            out.put_slice(head.strip_suffix('}').unwrap_or(&head).as_bytes());
            out.put_slice(b",\"items\":[");
            for (i, o) in items.iter().enumerate() {
                if i > 0 {
                    out.put_u8(b',');
                }
                put_view(res, o, &mut out);
            }
            out.put_slice(b"]}");
            Ok(http::json_response(200, out.freeze()))
        }
    }
}

/// Encodes one watch event line.
fn event_line(
    res: &Resource,
    sh: &Shared,
    r_table: Option<(&'static str, IncludeObject)>,
    kind: &str,
    obj: &Obj,
) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(b"{\"type\":\"");
    out.put_slice(kind.as_bytes());
    out.put_slice(b"\",\"object\":");
    match r_table {
        Some((av, include)) => {
            let v = view_value(res, obj);
            let core = if res.converted { events::to_core(&v) } else { v.clone() };
            let mut row = table::row(res.kind, &core, include, &sh.time, sh.time.now());
            if include == IncludeObject::Object {
                row["object"] = v;
            }
            let t = json!({"kind": "Table", "apiVersion": av, "metadata": {"resourceVersion": obj.rv.to_string()}, "columnDefinitions": table::columns(res.kind), "rows": [row]});
            out.put_slice(&serde_json::to_vec(&t).unwrap_or_default());
        }
        None => out.put_slice(&view(res, obj)),
    }
    out.put_slice(b"}\n");
    out.freeze()
}

fn bookmark_line(res: &Resource, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let v = json!({"type": "BOOKMARK", "object": {"kind": res.kind_name, "apiVersion": res.api_version(), "metadata": meta}});
    let mut b = serde_json::to_vec(&v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

async fn watch(
    sh: &Arc<Shared>,
    r: &Req,
    res: &'static Resource,
    ns: Option<&str>,
) -> Result<Response<ResBody>, ApiError> {
    let filter = Filter::from(r, res, ns)?;
    let bookmarks = matches!(r.q("allowWatchBookmarks"), Some("true" | "1"));
    let send_initial = match r.q("sendInitialEvents") {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(o) => return Err(ApiError::BadRequest(format!("invalid sendInitialEvents {o:?}"))),
    };
    if send_initial.is_some() && (r.q("resourceVersionMatch") != Some("NotOlderThan") || !bookmarks) {
        return Err(ApiError::Invalid {
            kind: "ListOptions".into(),
            group: "meta.k8s.io".into(),
            name: String::new(),
            causes: vec![Cause::new(
                "FieldValueForbidden",
                "sendInitialEvents",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan and allowWatchBookmarks to true",
            )],
        });
    }
    let timeout = match r.q("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse::<u64>().map_err(|_| ApiError::BadRequest(format!("invalid timeoutSeconds {t:?}")))?,
        ),
        None => {
            let min = sh.config.min_request_timeout;
            min + min.mul_f64((crate::clock::unix_now_nanos() % 1000) as f64 / 1000.0)
        }
    };
    let table = match r.wanted {
        Wanted::Table(av) => Some((
            av,
            match r.q("includeObject") {
                Some("None") => IncludeObject::None,
                Some("Object") => IncludeObject::Object,
                _ => IncludeObject::Metadata,
            },
        )),
        Wanted::Object => None,
    };
    let from = match (r.q("resourceVersion"), send_initial) {
        (_, Some(true)) | (None | Some("0"), None) => None,
        (Some(v), _) => {
            let n = parse_rv(v)?;
            let current = sh.store.lock().rv();
            if n > current {
                return Err(ApiError::Timeout(format!("Too large resource version: {n}, current: {current}")));
            }
            Some(n)
        }
        (None, Some(false)) => Some(sh.store.lock().rv()),
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, Abort>>(256);
    let start = sh.store.lock().watch(res.kind, from);
    let start = match start {
        Ok(s) => s,
        // Upstream answers 200 and one ERROR event for a too-old resourceVersion.
        Err(e) => {
            let line = json!({"type": "ERROR", "object": e.status()});
            let mut b = serde_json::to_vec(&line).unwrap_or_default();
            b.push(b'\n');
            return Ok(http::json_response(200, b));
        }
    };
    let sh = sh.clone();
    let mut drops = sh.faults.drops();
    drops.mark_unchanged();
    tokio::spawn(async move {
        let send = |b: Bytes| tx.send(Ok(b));
        let mut last_rv = start.rv;
        if let Some(snap) = &start.initial {
            for o in snap.iter_from("", filter.prefix.as_deref()).filter(|o| filter.matches(o)) {
                if send(event_line(res, &sh, table, "ADDED", o)).await.is_err() {
                    return;
                }
            }
            if send_initial == Some(true) && send(bookmark_line(res, snap.rv, true)).await.is_err() {
                return;
            }
        }
        let mut rx = start.rx;
        let deliver = |c: &Change| -> Option<(&'static str, Arc<Obj>)> {
            let now = filter.matches(&c.obj);
            let before = c.prev.as_ref().is_some_and(|p| filter.matches(p));
            match c.kind {
                EventType::Deleted => before.then_some(("DELETED", c.obj.clone())),
                EventType::Added => now.then_some(("ADDED", c.obj.clone())),
                EventType::Modified => match (before, now) {
                    (true, true) => Some(("MODIFIED", c.obj.clone())),
                    (false, true) => Some(("ADDED", c.obj.clone())),
                    (true, false) => Some(("DELETED", c.obj.clone())),
                    (false, false) => None,
                },
            }
        };
        for c in &start.backlog {
            last_rv = c.rv;
            if let Some((k, o)) = deliver(c)
                && send(event_line(res, &sh, table, k, &o)).await.is_err()
            {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(sh.config.bookmark_every);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                changed = drops.changed() => {
                    if changed.is_err() || sh.faults.outage() {
                        let _ = tx.send(Err(Abort)).await;
                        return;
                    }
                    break;
                }
                _ = tick.tick(), if bookmarks => {
                    // A frozen server sends nothing, bookmarks included.
                    if sh.faults.frozen() {
                        continue;
                    }
                    // Drain under the lock so the bookmark's resourceVersion
                    // covers every change this watcher was sent.
                    let (pending, rv) = {
                        let s = sh.store.lock();
                        let mut p = Vec::new();
                        loop {
                            match rx.try_recv() {
                                Ok(c) => p.push(c),
                                Err(broadcast::error::TryRecvError::Empty) => break,
                                Err(_) => return,
                            }
                        }
                        (p, s.rv())
                    };
                    for c in pending {
                        if let Some((k, o)) = deliver(&c)
                            && send(event_line(res, &sh, table, k, &o)).await.is_err()
                        {
                            return;
                        }
                    }
                    last_rv = last_rv.max(rv);
                    if send(bookmark_line(res, last_rv, false)).await.is_err() {
                        return;
                    }
                }
                msg = rx.recv() => match msg {
                    Ok(c) => {
                        last_rv = c.rv;
                        if let Some((k, o)) = deliver(&c)
                            && send(event_line(res, &sh, table, k, &o)).await.is_err()
                        {
                            return;
                        }
                    }
                    // Too slow (or the channel was reset): end the watch;
                    // the client resumes from its last resourceVersion.
                    Err(_) => break,
                },
            }
        }
    });
    let mut resp = Response::new(http_body_util::BodyExt::boxed(ChannelBody { rx }));
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

fn namespace_exists(s: &crate::store::Inner, ns: &str) -> bool {
    ns.is_empty() || s.get(Kind::Namespace, ns).is_some()
}

fn create(sh: &Shared, r: &Req, res: &Resource, ns: &str) -> Result<Response<ResBody>, ApiError> {
    let fv = FieldValidation::parse(r.q("fieldValidation"))?;
    let dry = r.dry_run()?;
    let body = if r.content_type == protobuf::MEDIA_TYPE { protobuf::namespace(&r.body)? } else { r.json_body()? };
    let (mut v, unknown) = objects::decode(res, &body)?;
    let warnings = objects::check_unknown(fv, &unknown)?;
    if res.converted {
        v = events::to_core(&v);
    }
    let body_ns = v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string();
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request".into(),
        ));
    }
    let mut s = sh.store.lock();
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let name = if name.is_empty() {
        match v.pointer("/metadata/generateName").and_then(Value::as_str).filter(|g| !g.is_empty()) {
            Some(prefix) => {
                let uid_n = s.rv() + 1;
                let n = objects::generate_name(prefix, uid_n);
                v["metadata"]["name"] = json!(n);
                n
            }
            None => String::new(),
        }
    } else {
        name
    };
    objects::validate(res, &v)?;
    if res.namespaced && !namespace_exists(&s, ns) {
        return Err(ApiError::NotFound { resource: "namespaces".into(), name: ns.to_string() });
    }
    let key = key_of(ns, &name);
    if s.get(res.kind, &key).is_some() {
        return Err(ApiError::AlreadyExists { resource: res.qualified(), name });
    }
    let uid = s.next_uid();
    let now = sh.time.now();
    objects::init_metadata(&mut v, if res.namespaced { ns } else { "" }, uid, sh.time.time(now), res.kind);
    crate::world::on_create(sh, &s, res.kind, &mut v, now);
    let obj = if dry {
        Arc::new(Obj::unstored(key.clone(), String::new(), s.rv(), res.kind, crate::store::exact_json(&v)))
    } else {
        s.commit(res.kind, &key, v, false)
    };
    drop(s);
    let mut resp = http::json_response(201, view(res, &obj));
    http::add_warnings(&mut resp, &warnings);
    Ok(resp)
}

/// How a patch body is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatchKind {
    Merge,
    Json,
    Strategic,
}

enum Op {
    Replace(Value),
    Patch(PatchKind, Value),
}

fn conflict(res: &Resource, name: &str, message: String) -> ApiError {
    ApiError::Conflict { resource: res.qualified(), name: name.to_string(), message }
}

#[allow(clippy::too_many_arguments)]
fn write(
    sh: &Shared,
    r: &Req,
    res: &Resource,
    ns: &str,
    name: &str,
    sub: Option<&str>,
    op: Op,
    fv: FieldValidation,
) -> Result<Response<ResBody>, ApiError> {
    let dry = r.dry_run()?;
    let key = key_of(ns, name);
    let mut s = sh.store.lock();
    let cur = s.get(res.kind, &key).ok_or_else(|| not_found(res, name))?;
    let cur_v = view_value(res, &cur);
    let mut new = match op {
        Op::Replace(body) => {
            let body_name = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            if body_name != name {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({name})"
                )));
            }
            body
        }
        Op::Patch(kind, patch) => {
            let mut v = cur_v.clone();
            match kind {
                PatchKind::Merge => {
                    if !patch.is_object() {
                        return Err(ApiError::BadRequest("a JSON merge patch must be a JSON object".into()));
                    }
                    crate::patch::merge_patch(&mut v, &patch);
                }
                PatchKind::Json => crate::patch::json_patch(&mut v, &patch)?,
                PatchKind::Strategic => crate::patch::strategic_merge_patch(&mut v, &patch)?,
            }
            if v.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
                return Err(ApiError::BadRequest("metadata.name cannot be changed by a patch".into()));
            }
            v
        }
    };
    let body_ns = new.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request".into(),
        ));
    }
    let wanted_rv = match new.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(rv) => Some(parse_rv(rv).map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {rv:?}")))?),
        None => None,
    };
    if wanted_rv.is_some_and(|rv| rv != cur.rv) {
        return Err(conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again".into(),
        ));
    }
    if let Some(uid) = new.pointer("/metadata/uid").and_then(Value::as_str).filter(|s| !s.is_empty())
        && uid != cur.uid
    {
        return Err(conflict(
            res,
            name,
            format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", cur.uid),
        ));
    }
    let (decoded, unknown) = objects::decode(res, &new)?;
    let warnings = objects::check_unknown(fv, &unknown)?;
    new = decoded;
    let (cur_core, mut new) =
        if res.converted { (events::to_core(&cur_v), events::to_core(&new)) } else { (cur_v, new) };
    objects::keep_server_metadata(&cur_core, &mut new);
    let has_status = res.subresources.contains(&"status");
    if sub == Some("status") {
        objects::keep_field(&cur_core, &mut new, "spec");
        objects::keep_field(&cur_core, &mut new, "metadata");
    } else if has_status {
        objects::keep_field(&cur_core, &mut new, "status");
        if res.kind == Kind::Pod {
            objects::check_pod_spec_update(&cur_core, &new).map_err(|c| ApiError::Invalid {
                kind: res.kind_name.into(),
                group: res.group.into(),
                name: name.into(),
                causes: vec![c],
            })?;
        }
    }
    objects::validate(res, &new)?;
    objects::bump_generation(res.kind, &cur_core, &mut new);
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), json!(cur.rv.to_string()));
    }
    // A write that changes nothing is not stored: same resourceVersion, no
    // watch event, as upstream.
    let obj = if new == cur_core || dry {
        if dry {
            Arc::new(Obj::unstored(key, cur.uid.clone(), cur.rv, res.kind, crate::store::exact_json(&new)))
        } else {
            cur
        }
    } else {
        // As upstream's `ShouldDeleteDuringUpdate`: an update that leaves a
        // terminating object without finalizers ends it only when its
        // grace period is unset or zero (as one whose last finalizer goes
        // after a delete has). A pod still within its grace period stays
        // (its kubelet deletes it), whatever status is written to it.
        let removing = res.kind == Kind::Pod || res.kind == Kind::Namespace;
        let old = cur.value();
        let was_terminating = old.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
        let no_grace_left =
            old.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).is_none_or(|g| g == 0);
        let finalized = removing
            && was_terminating
            && new.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(Vec::is_empty)
            && no_grace_left;
        s.commit(res.kind, &key, new, finalized)
    };
    drop(s);
    let mut resp = http::json_response(200, view(res, &obj));
    http::add_warnings(&mut resp, &warnings);
    Ok(resp)
}

fn delete(sh: &Shared, r: &Req, res: &Resource, ns: &str, name: &str) -> Result<Response<ResBody>, ApiError> {
    let dry = r.dry_run()?;
    let opts: Value = if r.body.is_empty() { json!({}) } else { r.json_body()? };
    if !opts.is_object() {
        return Err(ApiError::BadRequest("DeleteOptions must be a JSON object".into()));
    }
    if let Some(k) = opts.get("kind").and_then(Value::as_str)
        && k != "DeleteOptions"
    {
        return Err(ApiError::BadRequest(format!("{k} is not a DeleteOptions")));
    }
    if let Some(p) = opts.get("propagationPolicy").and_then(Value::as_str)
        && !matches!(p, "Orphan" | "Background" | "Foreground")
    {
        return Err(ApiError::BadRequest(format!(
            "propagationPolicy {p:?} is not one of Orphan, Background, Foreground"
        )));
    }
    let grace = crate::pdb::grace_period(&opts)?;
    let key = key_of(ns, name);
    let mut s = sh.store.lock();
    let cur = s.get(res.kind, &key).ok_or_else(|| not_found(res, name))?;
    if let Some(uid) = opts.pointer("/preconditions/uid").and_then(Value::as_str)
        && uid != cur.uid
    {
        return Err(conflict(
            res,
            name,
            format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", cur.uid),
        ));
    }
    if let Some(rv) = opts.pointer("/preconditions/resourceVersion").and_then(Value::as_str)
        && parse_rv(rv).ok() != Some(cur.rv)
    {
        return Err(conflict(
            res,
            name,
            format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                cur.rv
            ),
        ));
    }
    let mut v = cur.value();
    let finalizers = v.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
    if dry {
        return Ok(http::json_response(200, view(res, &cur)));
    }
    if res.kind == Kind::Pod && sh.terminating_gracefully(&key) {
        // Deleted already and within its grace: upstream leaves it as it
        // is and answers with it.
        return Ok(http::json_response(200, view(res, &cur)));
    }
    if res.kind == Kind::Pod && sh.refuses_deletion(&key) {
        return Err(ApiError::BadRequest(format!(
            "admission webhook \"refuse-deletions.sim.nodewarden.io\" denied the request: the scenario refuses this deletion of pod {name}"
        )));
    }
    let obj = if finalizers {
        if v.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()) {
            cur
        } else {
            v["metadata"]["deletionTimestamp"] = json!(sh.time.time(sh.time.now()));
            v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            s.commit(res.kind, &key, v, false)
        }
    } else {
        if res.kind == Kind::Namespace {
            // The namespace controller's work, done at once: everything in
            // it goes first.
            let prefix = format!("{name}/");
            for kind in Kind::ALL.into_iter().filter(|k| k.resource().namespaced) {
                let keys: Vec<(String, Value)> =
                    s.snapshot(kind).iter_from("", Some(&prefix)).map(|o| (o.key.clone(), o.value())).collect();
                for (k, ov) in keys {
                    s.commit(kind, &k, ov, true);
                }
            }
        }
        if res.kind == Kind::Pod {
            if let Some((grace, until)) = sh.graceful_deletion(&s, &v, grace) {
                let obj = sh.start_graceful(&mut s, &key, v, grace, until);
                drop(s);
                return Ok(http::json_response(200, view(res, &obj)));
            }
            crate::pdb::mark_graceful(&mut v, grace, &sh.time.time(sh.time.now()));
        }
        s.commit(res.kind, &key, v, true)
    };
    drop(s);
    Ok(http::json_response(200, view(res, &obj)))
}
