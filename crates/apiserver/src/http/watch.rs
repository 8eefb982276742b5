//! Watches: a stream of JSON lines (or Table rows) with the changes after
//! a resourceVersion, bookmarks when asked for, ended by its timeout, a
//! dropped-watch fault, or the client falling behind.
//!
//! Invariant: a watcher gets every change after its resourceVersion that
//! its filters select, exactly once and in order (a change that makes an
//! object leave or enter the filter arrives as DELETED or ADDED), or a
//! 410 ERROR event; a bookmark's resourceVersion never covers a change the
//! watcher was not sent.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use hyper::Response;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use serde_json::json;
use tokio::sync::{broadcast, mpsc};

use super::events;
use super::reads::{Filter, view, view_value};
use super::request::Req;
use super::response::{self, Abort, ChannelBody, ResBody, Wanted};
use super::state::HttpState;
use super::table::{self, IncludeObject};
use crate::error::{ApiError, Cause};
use crate::resource::Resource;
use crate::store::{Change, EventType, Obj, WatchStart, parse_rv};

/// Encodes one watch event line.
fn event_line(
    res: &Resource,
    sh: &HttpState,
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
            let time = &sh.cluster.time;
            let mut row = table::row(res.kind, &core, include, time, time.now());
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

/// Encodes one BOOKMARK line; `initial_end` marks the end of the initial
/// events (`sendInitialEvents`).
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

/// What a watch request asks for, read and checked before it starts.
struct Params {
    /// `allowWatchBookmarks`.
    bookmarks: bool,
    /// `sendInitialEvents`.
    send_initial: Option<bool>,
    /// When the watch ends.
    timeout: Duration,
    /// Table rows rather than objects: the Table's apiVersion and what
    /// each row includes.
    table: Option<(&'static str, IncludeObject)>,
}

impl Params {
    /// The request's watch parameters, refused as upstream refuses them.
    fn read(sh: &HttpState, r: &Req) -> Result<Params, ApiError> {
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
                min + min.mul_f64((nodewarden_model::wall::unix_now_nanos() % 1000) as f64 / 1000.0)
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
        Ok(Params { bookmarks, send_initial, timeout, table })
    }
}

/// `GET` of a collection with `watch=true`: the answer's body is fed by a
/// task of its own until the watch ends.
pub(super) async fn watch(
    sh: &Arc<HttpState>,
    r: &Req,
    res: &'static Resource,
    ns: Option<&str>,
) -> Result<Response<ResBody>, ApiError> {
    let filter = Filter::from(r, res, ns)?;
    let params = Params::read(sh, r)?;
    let store = &sh.cluster.store;
    let from = match (r.q("resourceVersion"), params.send_initial) {
        (_, Some(true)) | (None | Some("0"), None) => None,
        (Some(v), _) => {
            let n = parse_rv(v)?;
            let current = store.lock().rv();
            if n > current {
                return Err(ApiError::Timeout(format!("Too large resource version: {n}, current: {current}")));
            }
            Some(n)
        }
        (None, Some(false)) => Some(store.lock().rv()),
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, Abort>>(256);
    let start = store.lock().watch(res.kind, from);
    let start = match start {
        Ok(s) => s,
        // Upstream answers 200 and one ERROR event for a too-old resourceVersion.
        Err(e) => {
            let line = json!({"type": "ERROR", "object": e.status()});
            let mut b = serde_json::to_vec(&line).unwrap_or_default();
            b.push(b'\n');
            return Ok(response::json_response(200, b));
        }
    };
    // Only a drop from now on ends this watch.
    let mut drops = sh.cluster.faults.drops();
    drops.mark_unchanged();
    let stream = Stream { sh: sh.clone(), res, filter, params, tx };
    tokio::spawn(stream.run(start, drops));
    let mut resp = Response::new(http_body_util::BodyExt::boxed(ChannelBody { rx }));
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

/// A running watch: what it sends, and where.
struct Stream {
    sh: Arc<HttpState>,
    res: &'static Resource,
    filter: Filter,
    params: Params,
    tx: mpsc::Sender<Result<Bytes, Abort>>,
}

impl Stream {
    /// Sends a line; false when the client has gone.
    async fn send(&self, b: Bytes) -> bool {
        self.tx.send(Ok(b)).await.is_ok()
    }

    /// The event a change is to this watcher, if any, as its filters see
    /// the object before and after.
    fn deliver(&self, c: &Change) -> Option<(&'static str, Arc<Obj>)> {
        let now = self.filter.matches(&c.obj);
        let before = c.prev.as_ref().is_some_and(|p| self.filter.matches(p));
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
    }

    /// Sends the change's event, if it is one to this watcher; false when
    /// the client has gone.
    async fn send_change(&self, c: &Change) -> bool {
        match self.deliver(c) {
            Some((k, o)) => self.send(event_line(self.res, &self.sh, self.params.table, k, &o)).await,
            None => true,
        }
    }

    /// Feeds the watch from `start` until it ends.
    async fn run(self, start: WatchStart, mut drops: tokio::sync::watch::Receiver<u64>) {
        let sh = self.sh.clone();
        let mut last_rv = start.rv;
        if let Some(snap) = &start.initial {
            for o in snap.iter_from("", self.filter.prefix.as_deref()).filter(|o| self.filter.matches(o)) {
                if !self.send(event_line(self.res, &sh, self.params.table, "ADDED", o)).await {
                    return;
                }
            }
            if self.params.send_initial == Some(true) && !self.send(bookmark_line(self.res, snap.rv, true)).await {
                return;
            }
        }
        let mut rx = start.rx;
        for c in &start.backlog {
            last_rv = c.rv;
            if !self.send_change(c).await {
                return;
            }
        }
        let deadline = tokio::time::sleep(self.params.timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(sh.config.bookmark_every);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                changed = drops.changed() => {
                    if changed.is_err() || sh.cluster.faults.outage() {
                        let _ = self.tx.send(Err(Abort)).await;
                        return;
                    }
                    break;
                }
                _ = tick.tick(), if self.params.bookmarks => {
                    // A frozen server sends nothing, bookmarks included.
                    if sh.cluster.faults.frozen() {
                        continue;
                    }
                    match self.bookmark(&mut rx, last_rv).await {
                        Some(rv) => last_rv = rv,
                        None => return,
                    }
                }
                msg = rx.recv() => match msg {
                    Ok(c) => {
                        last_rv = c.rv;
                        if !self.send_change(&c).await {
                            return;
                        }
                    }
                    // Too slow (or the channel was reset): end the watch;
                    // the client resumes from its last resourceVersion.
                    Err(_) => break,
                },
            }
        }
    }

    /// Sends what is pending, then a bookmark at the store's
    /// resourceVersion (or `last_rv`, if later); the bookmark's
    /// resourceVersion, or `None` when the watch is to end.
    async fn bookmark(&self, rx: &mut broadcast::Receiver<Arc<Change>>, last_rv: u64) -> Option<u64> {
        // Drain under the lock so the bookmark's resourceVersion covers
        // every change this watcher was sent.
        let (pending, rv) = {
            let s = self.sh.cluster.store.lock();
            let mut p = Vec::new();
            loop {
                match rx.try_recv() {
                    Ok(c) => p.push(c),
                    Err(broadcast::error::TryRecvError::Empty) => break,
                    Err(_) => return None,
                }
            }
            (p, s.rv())
        };
        for c in pending {
            if !self.send_change(&c).await {
                return None;
            }
        }
        let last_rv = last_rv.max(rv);
        if !self.send(bookmark_line(self.res, last_rv, false)).await {
            return None;
        }
        Some(last_rv)
    }
}
