//! The listening side of the served API: accepting connections (TLS and
//! the bearer token by default), then, for each request, authentication,
//! the request log, injected API faults, routing, and the write log.
//!
//! Invariant: a request without the token is answered 401 before it is
//! logged or meets a fault; every request that is not cut off (an injected
//! abort) gets an answer, a refusal being a `Status`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use tokio::net::TcpListener;
use tracing::{debug, warn};

use super::request_log;
use super::response::{self, Abort, ResBody};
use super::route;
use super::state::{HttpState, WriteRecord};
use super::tls::Credentials;
use crate::error::ApiError;
use crate::faults::Verdict;

/// How long a client may take over the TLS handshake before its
/// connection is dropped, so a stalled client holds no task for long
/// (client-go gives up on its side after 10 s too).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves until the listener fails or the task is dropped: over TLS,
/// requiring the bearer token, when `credentials` are given; plain HTTP
/// without authentication otherwise.
pub async fn serve(listener: TcpListener, shared: Arc<HttpState>, credentials: Option<Arc<Credentials>>) {
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
        if shared.cluster.faults.outage() {
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
async fn serve_connection<S>(stream: S, sh: Arc<HttpState>, credentials: Option<Arc<Credentials>>, peer: SocketAddr)
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

/// Answers one request: authentication, the request log, injected faults,
/// then routing; the write is journalled and logged afterwards.
async fn handle(
    sh: Arc<HttpState>,
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
        return Ok(response::error_response(&ApiError::Unauthorized));
    }
    let agent = req.headers().get(hyper::header::USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_string);
    if sh.config.record_requests {
        let record = request_log::describe(
            req.method().as_str(),
            req.uri().path(),
            req.uri().query(),
            agent.as_deref().unwrap_or_default(),
        );
        sh.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(record);
    }
    let (delay, fail) =
        match sh.cluster.faults.verdict_for(Some(agent.as_deref().unwrap_or_default()), Some(req.uri().path())) {
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
        return Ok(response::error_response(&e));
    }
    let r = route::route(&sh, req).await;
    let resp = match r {
        Ok(r) => r,
        Err(e) => {
            debug!(%method, %path, code = e.code(), error = %e, "request refused");
            response::error_response(&e)
        }
    };
    record_write(&sh, &method, path, agent, &resp);
    Ok(resp)
}

/// Notes a request to a node or pod in the request journal, a write in
/// the journal (a node or pod's) and the write log (an
/// accepted one, when [`ServerConfig::record_writes`](super::ServerConfig::record_writes) is on).
fn record_write(sh: &HttpState, method: &Method, path: String, agent: Option<String>, resp: &Response<ResBody>) {
    let is_write = !matches!(*method, Method::GET | Method::HEAD);
    let accepted_write = resp.status().is_success() && is_write;
    if let Some(j) = sh.request_journal.get()
        && crate::journal::written_object(&path).is_some()
    {
        j.request(method.as_str(), &path, agent.as_deref().unwrap_or_default(), resp.status().as_u16());
    }
    if is_write
        && let Some(j) = sh.cluster.store.journal()
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
}
