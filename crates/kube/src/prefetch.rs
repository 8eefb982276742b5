//! A paged list's next page, requested while the watcher decodes this one.
//!
//! kube's watcher lists a kind page by page (`limit` and `continue`) and
//! asks for page N+1 only once page N is decoded. At 300k pods that makes
//! every page's round trip, the server's work on it, its TLS decryption
//! and its collection wait for the previous page's decode, and the decode
//! wait for them: on two cores, one is idle most of the first list.
//!
//! This layer sits under kube's client. It collects each list page as it
//! arrives, reads its `continue` token (in the list's metadata, which
//! every API server writes before `items`), and at once sends the request
//! the watcher will send next, on a task of its own. When the watcher asks
//! for that page, it is handed the one fetched ahead (or waits for it to
//! finish arriving), and the page after it is requested in turn. So the
//! next page travels while this one decodes.
//!
//! What the watcher sees does not change: the request fetched ahead is
//! exactly the one it makes next (compared by path and decoded query), a
//! continue token names a consistent snapshot, so the page is the page it
//! would have got, and an answer that is not a page (an error status, a
//! failed connection) is not followed. At most one page a path is ahead;
//! a list broken off (its next request differs, or never comes) drops the
//! page fetched for it. Only `GET`s with a `limit` and without `watch` are
//! touched: a watch's stream and every other request pass through as they
//! are.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use kube::client::{Body, DynBody};
use tower::buffer::Buffer;
use tower::{BoxError, Layer, Service, ServiceExt};

/// The service under kube's client that this layer wraps: the stack kube
/// builds from a kubeconfig (auth, base URI, TLS, HTTP).
type Inner = tower::util::BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

type Answer = Result<Response<Box<DynBody>>, BoxError>;

/// An answer on its way. Boxed where it is made: an async block holding
/// tower's buffer future unboxed fails rustc's `Send` proof (a
/// higher-ranked lifetime error on the boxed error type).
type Pending = Pin<Box<dyn Future<Output = Answer> + Send>>;

type Shared = Buffer<Request<Body>, <Inner as Service<Request<Body>>>::Future>;

/// Sends `req` through `inner`.
fn send(inner: &Shared, req: Request<Body>) -> Pending {
    Box::pin(inner.clone().oneshot(req))
}

/// A page being fetched ahead: its request's identity, and the task
/// fetching it (it ends with the whole page collected).
struct Ahead {
    key: ListKey,
    task: tokio::task::JoinHandle<Result<Page, BoxError>>,
}

/// A list page whole: its answer's head and body, and the token of the
/// page after it (`None` on the last page or on an answer not a page).
struct Page {
    head: http::response::Parts,
    body: Bytes,
    next: Option<String>,
}

/// The layer: `ClientBuilder::with_layer(&ListPrefetch)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ListPrefetch;

impl Layer<Inner> for ListPrefetch {
    type Service = Prefetching;

    fn layer(&self, inner: Inner) -> Prefetching {
        Prefetching { inner: Buffer::new(inner, 1024), ahead: Arc::default() }
    }
}

/// The service [`ListPrefetch`] builds.
#[derive(Clone)]
pub struct Prefetching {
    /// Shared with the tasks fetching ahead.
    inner: Shared,
    /// The page fetched ahead, per list path.
    ahead: Arc<Mutex<HashMap<String, Ahead>>>,
}

impl Service<Request<Body>> for Prefetching {
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = Pending;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let (Some(key), Some(template)) = (ListKey::of(&req), Template::of(&req)) else {
            return Box::pin(self.inner.call(req));
        };
        let taken = self.ahead.lock().unwrap_or_else(PoisonError::into_inner).remove(&key.path);
        let source = match taken {
            Some(ahead) if ahead.key == key => Source::Ahead(ahead.task),
            other => {
                if let Some(stale) = other {
                    stale.task.abort();
                }
                Source::Now(Box::pin(self.inner.call(req)))
            }
        };
        let this = self.clone();
        Box::pin(async move {
            let page = match source {
                Source::Ahead(task) => match task.await {
                    Ok(Ok(page)) => page,
                    // Fetching ahead failed: ask now, as the watcher would
                    // have, and let this answer be what it gets.
                    _ => fetch(send(&this.inner, template.request(None))).await?,
                },
                Source::Now(answer) => match answer.await {
                    Ok(answer) => collect(answer).await?,
                    Err(e) => return Err(e),
                },
            };
            if let Some(token) = &page.next {
                this.fetch_ahead(&key.path, &template, token);
                // The task just spawned waits in this worker's slot for the
                // next task, which other workers cannot take, and the
                // watcher goes on to decode this page without yielding:
                // let it send its request first.
                tokio::task::yield_now().await;
            }
            Ok(page.into_response())
        })
    }
}

/// Where a list page comes from.
enum Source {
    /// Fetched ahead, by this task (it ends with the page whole).
    Ahead(tokio::task::JoinHandle<Result<Page, BoxError>>),
    /// Asked for now.
    Now(Pending),
}

impl Prefetching {
    /// Sends the request for the page after `token` on a task of its own.
    fn fetch_ahead(&self, path: &str, template: &Template, token: &str) {
        let req = template.request(Some(token));
        let Some(key) = ListKey::of(&req) else { return };
        let task = tokio::spawn(fetch(send(&self.inner, req)));
        let old =
            self.ahead.lock().unwrap_or_else(PoisonError::into_inner).insert(path.to_string(), Ahead { key, task });
        if let Some(old) = old {
            old.task.abort();
        }
    }
}

/// Reads an answer on its way whole.
async fn fetch(pending: Pending) -> Result<Page, BoxError> {
    match pending.await {
        Ok(answer) => collect(answer).await,
        Err(e) => Err(e),
    }
}

/// Reads an answer's body whole, and the next page's token if it is a
/// list page.
async fn collect(answer: Response<Box<DynBody>>) -> Result<Page, BoxError> {
    let (head, body) = answer.into_parts();
    // (`?` here trips a higher-ranked lifetime error on the boxed error.)
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return Err(e),
    };
    let next = if head.status.is_success() { continue_token(&body) } else { None };
    Ok(Page { head, body, next })
}

impl Page {
    fn into_response(self) -> Response<Box<DynBody>> {
        let body: Box<DynBody> = Box::new(Full::new(self.body).map_err(|never| match never {}));
        Response::from_parts(self.head, body)
    }
}

/// The `continue` token of a list page: the string value of the first
/// `"continue"` key before `"items"`, where every API server writes the
/// list's metadata. `None` when there is none, it is empty, or it has an
/// escape (a token is URL-safe text; one that is not is left alone).
fn continue_token(body: &[u8]) -> Option<String> {
    let head = &body[..body.len().min(64 * 1024)];
    let items = find(head, b"\"items\"").unwrap_or(head.len());
    let head = &head[..items];
    const KEY: &[u8] = b"\"continue\":\"";
    let start = find(head, KEY)? + KEY.len();
    let len = find(&head[start..], b"\"")?;
    let token = std::str::from_utf8(&head[start..start + len]).ok()?;
    (!token.is_empty() && !token.contains('\\')).then(|| token.to_string())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What makes two list requests the same: the path and the decoded query
/// pairs, in order of name (kube and this layer may spell them apart).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ListKey {
    path: String,
    query: Vec<(String, String)>,
}

impl ListKey {
    /// The key of a paged list request; `None` for any other request.
    fn of(req: &Request<Body>) -> Option<ListKey> {
        if req.method() != Method::GET {
            return None;
        }
        let mut query: Vec<(String, String)> = form_urlencoded::parse(req.uri().query()?.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let paged = query.iter().any(|(k, v)| k == "limit" && v != "0");
        let watch = query.iter().any(|(k, v)| k == "watch" && v != "false" && v != "0");
        if !paged || watch {
            return None;
        }
        query.sort();
        Some(ListKey { path: req.uri().path().to_string(), query })
    }
}

/// A list request, to send again with another `continue` token.
#[derive(Clone)]
struct Template {
    head: http::request::Parts,
}

impl Template {
    /// `None` when the request cannot be repeated (a body that cannot be
    /// copied: a list has none).
    fn of(req: &Request<Body>) -> Option<Template> {
        req.body().try_clone()?;
        let mut head = Request::new(()).into_parts().0;
        head.method = req.method().clone();
        head.uri = req.uri().clone();
        head.version = req.version();
        head.headers = req.headers().clone();
        Some(Template { head })
    }

    /// This request with `continue` set to `token` (or as it was).
    fn request(&self, token: Option<&str>) -> Request<Body> {
        let mut head = self.head.clone();
        if let Some(token) = token {
            let mut query = form_urlencoded::Serializer::new(String::new());
            // A continued list names no resourceVersion (the token holds
            // it; the API server refuses both), as kube's own requests.
            for (k, v) in form_urlencoded::parse(head.uri.query().unwrap_or_default().as_bytes()) {
                if !matches!(&*k, "continue" | "resourceVersion" | "resourceVersionMatch") {
                    query.append_pair(&k, &v);
                }
            }
            query.append_pair("continue", token);
            let mut parts = head.uri.clone().into_parts();
            let path_and_query = format!("{}?{}", head.uri.path(), query.finish());
            parts.path_and_query = path_and_query.parse().ok();
            if let Ok(uri) = Uri::from_parts(parts) {
                head.uri = uri;
            }
        }
        Request::from_parts(head, Body::empty())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Every request the fake API server got, in order.
    type Log = Arc<Mutex<Vec<String>>>;

    /// A fake API server listing three pages of pods (tokens `t1`, `t2`),
    /// answering 410 to token `gone` and an empty body to anything else.
    fn server(log: Log) -> Inner {
        tower::util::BoxService::new(tower::service_fn(move |req: Request<Body>| {
            let log = log.clone();
            async move {
                let uri = req.uri().to_string();
                log.lock().unwrap().push(uri.clone());
                let token = form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
                    .find(|(k, _)| k == "continue")
                    .map(|(_, v)| v.into_owned());
                let (status, body) = match token.as_deref() {
                    None if uri.contains("watch=true") => (200, r#"{"type":"ADDED"}"#.to_string()),
                    None => (200, page("t1", 1)),
                    Some("t1") => (200, page("t2", 2)),
                    Some("t2") => (200, page("", 3)),
                    Some("gone") => (410, r#"{"kind":"Status","code":410}"#.to_string()),
                    Some(_) => (200, String::new()),
                };
                let body: Box<DynBody> = Box::new(Full::new(Bytes::from(body)).map_err(|never| match never {}));
                Ok::<_, BoxError>(Response::builder().status(status).body(body).expect("a response"))
            }
        }))
    }

    fn page(next: &str, n: u32) -> String {
        format!(
            r#"{{"kind":"PodList","metadata":{{"continue":"{next}","resourceVersion":"9"}},"items":[{{"n":{n},"continue":"no"}}]}}"#
        )
    }

    fn get(uri: &str) -> Request<Body> {
        Request::get(uri).body(Body::empty()).expect("a request")
    }

    async fn text(svc: &mut Prefetching, uri: &str) -> (u16, String) {
        let answer = svc.ready().await.expect("ready").call(get(uri)).await.expect("an answer");
        let status = answer.status().as_u16();
        let body = answer.into_body().collect().await.expect("a body").to_bytes();
        (status, String::from_utf8(body.to_vec()).expect("text"))
    }

    /// Waits until the fake server has got `n` requests.
    async fn requests(log: &Log, n: usize) -> Vec<String> {
        for _ in 0..200 {
            let seen = log.lock().unwrap().clone();
            if seen.len() >= n {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        log.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn the_next_page_is_requested_before_it_is_asked_for_and_handed_over_as_sent() {
        let log = Log::default();
        let mut svc = ListPrefetch.layer(server(log.clone()));
        assert_eq!(text(&mut svc, "/api/v1/pods?limit=500").await, (200, page("t1", 1)));
        // Page 2 goes out without anyone asking for it.
        let seen = requests(&log, 2).await;
        assert_eq!(seen, ["/api/v1/pods?limit=500", "/api/v1/pods?limit=500&continue=t1"]);
        // Asked for as kube spells it, it is the page fetched ahead: the
        // server is not asked again, and page 3 goes out in turn.
        assert_eq!(text(&mut svc, "/api/v1/pods?&limit=500&continue=t1").await, (200, page("t2", 2)));
        let seen = requests(&log, 3).await;
        assert_eq!(seen[2], "/api/v1/pods?limit=500&continue=t2");
        assert_eq!(text(&mut svc, "/api/v1/pods?limit=500&continue=t2").await, (200, page("", 3)));
        // The last page has no token: nothing more is fetched.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(log.lock().unwrap().len(), 3, "{:?}", log.lock().unwrap());
    }

    #[tokio::test]
    async fn a_list_started_over_drops_the_page_fetched_ahead_and_other_requests_pass_through() {
        let log = Log::default();
        let mut svc = ListPrefetch.layer(server(log.clone()));
        text(&mut svc, "/api/v1/pods?limit=500&resourceVersion=5&resourceVersionMatch=NotOlderThan").await;
        let seen = requests(&log, 2).await;
        // The continued request names no resourceVersion, as kube's own.
        assert_eq!(seen[1], "/api/v1/pods?limit=500&continue=t1");
        // Another limit: not the request fetched ahead, so it is sent.
        assert_eq!(text(&mut svc, "/api/v1/pods?limit=100&continue=t1").await, (200, page("t2", 2)));
        assert_eq!(requests(&log, 3).await[2], "/api/v1/pods?limit=100&continue=t1");
        // A watch, an unpaged list and a write pass through untouched.
        let before = requests(&log, 4).await.len();
        text(&mut svc, "/api/v1/pods?watch=true&limit=500").await;
        text(&mut svc, "/api/v1/pods").await;
        let answer = svc
            .ready()
            .await
            .expect("ready")
            .call(Request::post("/api/v1/pods?limit=1").body(Body::empty()).expect("a request"))
            .await;
        assert!(answer.is_ok());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let seen = log.lock().unwrap().clone();
        assert_eq!(seen.len(), before + 3, "nothing fetched ahead of those: {seen:?}");
        // An error answer is handed over and not followed.
        assert_eq!(text(&mut svc, "/api/v1/pods?limit=500&continue=gone").await.0, 410);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(log.lock().unwrap().len(), before + 4);
    }

    #[test]
    fn a_token_is_read_only_from_the_lists_metadata() {
        assert_eq!(continue_token(page("abc=", 1).as_bytes()).as_deref(), Some("abc="));
        assert_eq!(continue_token(page("", 1).as_bytes()), None);
        assert_eq!(continue_token(br#"{"items":[{"continue":"x"}],"metadata":{}}"#), None);
        assert_eq!(continue_token(br#"{"metadata":{"continue":"a\"b"}}"#), None);
        assert_eq!(continue_token(b"not json"), None);
    }
}
