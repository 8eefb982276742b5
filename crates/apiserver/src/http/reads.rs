//! Reads: one object, and lists (filtered, paged over kept snapshots so
//! pages agree), as objects or as kubectl's Tables.
//!
//! Invariant: a read changes nothing but the store's kept snapshots; every
//! page of a list shows the cluster at the list's resourceVersion.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::Response;
use serde_json::{Value, json};

use super::events;
use super::request::Req;
use super::response::{self, Abort, ResBody, Wanted};
use super::state::HttpState;
use super::table::{self, IncludeObject};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::selector::{self, FieldSelector, LabelSelector};
use crate::store::{Continue, Obj, Snapshot, key_of, parse_rv};

/// The object as this resource (view) serves it.
pub(super) fn view(res: &Resource, obj: &Obj) -> Bytes {
    if res.converted { view_converted(obj) } else { obj.json() }
}

/// The object as a converting view (Events in the other version) serves it.
fn view_converted(obj: &Obj) -> Bytes {
    Bytes::from(serde_json::to_vec(&events::to_v1(&obj.value())).unwrap_or_default())
}

/// The object as this resource serves it, as a value to edit or tabulate.
pub(super) fn view_value(res: &Resource, obj: &Obj) -> Value {
    if res.converted { events::to_v1(&obj.value()) } else { obj.value() }
}

/// The 404 for an object of this resource.
pub(super) fn not_found(res: &Resource, name: &str) -> ApiError {
    ApiError::NotFound { resource: res.qualified(), name: name.to_string() }
}

/// The objects as a `meta.k8s.io` Table (kubectl's server-side printing).
fn table_of(
    sh: &HttpState,
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
    let now = sh.cluster.time.now();
    let kind = res.kind;
    let rows: Vec<Value> = objs
        .iter()
        .map(|v| {
            let core = if res.converted { events::to_core(v) } else { v.clone() };
            let mut row = table::row(kind, &core, include, &sh.cluster.time, now);
            if include == IncludeObject::Object {
                row["object"] = v.clone();
            }
            row
        })
        .collect();
    let cols = if r.q("noHeaders").is_some() { Vec::new() } else { table::columns(kind) };
    Ok(json!({"kind": "Table", "apiVersion": api_version, "metadata": meta, "columnDefinitions": cols, "rows": rows}))
}

/// `GET` of one object (or its status).
pub(super) fn get(
    sh: &HttpState,
    r: &Req,
    res: &Resource,
    ns: &str,
    name: &str,
) -> Result<Response<ResBody>, ApiError> {
    let obj = sh.cluster.store.lock().get(res.kind, &key_of(ns, name)).ok_or_else(|| not_found(res, name))?;
    match r.wanted {
        Wanted::Table(av) => Ok(response::value_response(
            200,
            &table_of(sh, res, r, av, &[view_value(res, &obj)], json!({"resourceVersion": obj.rv.to_string()}))?,
        )),
        Wanted::Object => Ok(response::json_response(200, view(res, &obj))),
    }
}

/// The filters of a list or watch.
pub(super) struct Filter {
    /// `namespace/`, when one is named.
    pub(super) prefix: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    /// The request's namespace, label and field selectors.
    pub(super) fn from(r: &Req, res: &Resource, ns: Option<&str>) -> Result<Filter, ApiError> {
        let labels = selector::parse_labels(r.q("labelSelector").unwrap_or_default())?;
        let mut fields = selector::parse_fields(r.q("fieldSelector").unwrap_or_default(), |f| res.selectable(f))?;
        if res.converted {
            for f in &mut fields.0 {
                f.field = events::core_field(&f.field);
            }
        }
        Ok(Filter { prefix: ns.map(|n| format!("{n}/")), labels, fields })
    }

    /// Whether the object passes them.
    pub(super) fn matches(&self, o: &Obj) -> bool {
        self.prefix.as_ref().is_none_or(|p| o.key.starts_with(p.as_str()))
            && self.labels.matches_with(|k| o.labels.get(k))
            && self.fields.matches(|f| o.field(f))
    }
}

/// Where a list starts.
enum Start {
    /// The snapshot to list from, the key to start after and what is left
    /// of it (a continue token's count).
    At(Snapshot, String, Option<u64>),
    /// The continue token's snapshot is gone: upstream's 410, with a fresh
    /// token to start again.
    Expired(Response<ResBody>),
}

/// The snapshot a list reads, from its continue token or resourceVersion
/// (and match), as upstream chooses it.
fn list_start(sh: &HttpState, r: &Req, res: &Resource) -> Result<Start, ApiError> {
    let rv_param = r.q("resourceVersion");
    let rv_match = r.q("resourceVersionMatch");
    let mut s = sh.cluster.store.lock();
    match r.q("continue") {
        Some(token) => {
            if rv_param.is_some_and(|v| v != "0") || rv_match.is_some() {
                return Err(ApiError::BadRequest(
                    "specifying resource version is not allowed when using continue".into(),
                ));
            }
            let c = Continue::decode(token)?;
            match s.kept_snapshot(res.kind, c.rv) {
                Some(snap) => Ok(Start::At(snap, c.start, c.left)),
                None => {
                    let fresh = Continue { rv: s.rv(), start: c.start, left: None }.encode();
                    let mut e = ApiError::Gone(crate::store::CONTINUE_EXPIRED.to_string()).status();
                    e["metadata"] = json!({"continue": fresh});
                    Ok(Start::Expired(response::value_response(410, &e)))
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
                        Ok(Start::At(kept, String::new(), None))
                    }
                    _ if n > current => {
                        Err(ApiError::Timeout(format!("Too large resource version: {n}, current: {current}")))
                    }
                    _ => Ok(Start::At(s.snapshot(res.kind), String::new(), None)),
                }
            } else {
                match rv_match {
                    None | Some("NotOlderThan") | Some("Exact") => {}
                    Some(other) => {
                        return Err(ApiError::BadRequest(format!("invalid resourceVersionMatch {other:?}")));
                    }
                }
                Ok(Start::At(s.snapshot(res.kind), String::new(), None))
            }
        }
    }
}

/// `GET` of a collection: a snapshot, filtered, paged.
pub(super) fn list(sh: &HttpState, r: &Req, res: &Resource, ns: Option<&str>) -> Result<Response<ResBody>, ApiError> {
    let filter = Filter::from(r, res, ns)?;
    let limit = match r.q("limit") {
        None => None,
        Some(l) => match l.parse::<i64>() {
            Ok(n) if n > 0 => Some(n as usize),
            Ok(_) => None,
            Err(_) => return Err(ApiError::BadRequest(format!("invalid limit {l:?}"))),
        },
    };
    let (snap, start, left) = match list_start(sh, r, res)? {
        Start::At(snap, start, left) => (snap, start, left),
        Start::Expired(resp) => return Ok(resp),
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
        sh.cluster.store.lock().keep_snapshot(res.kind, &snap);
        meta["continue"] = json!(Continue { rv: snap.rv, start, left: remaining.map(|n| n as u64) }.encode());
        if let Some(n) = remaining {
            meta["remainingItemCount"] = json!(n);
        }
    }
    match r.wanted {
        Wanted::Table(av) => {
            let objs: Vec<Value> = items.iter().map(|o| view_value(res, o)).collect();
            Ok(response::value_response(200, &table_of(sh, res, r, av, &objs, meta)?))
        }
        Wanted::Object => {
            let head = json!({"kind": res.list_kind(), "apiVersion": res.api_version(), "metadata": meta});
            let head = serde_json::to_string(&head).unwrap_or_default();
            let mut start = BytesMut::with_capacity(head.len() + 16);
            start.put_slice(head.strip_suffix('}').unwrap_or(&head).as_bytes());
            start.put_slice(b",\"items\":[");
            let body = ListBody {
                head: Some(start.freeze()),
                items: items.into_iter().cloned().collect(),
                next: 0,
                converted: res.converted,
            };
            Ok(response::streamed_json_response(200, body.boxed()))
        }
    }
}

/// Objects a chunk of a list page: about 150 KB of served pods.
const LIST_CHUNK: usize = 64;

/// A list page's body, written as it is sent: the head, then
/// [`LIST_CHUNK`] objects a chunk, then the closing brackets. The server's
/// work on a page (each object decompressed into it) overlaps the client's
/// reading of what is already sent, and no page is whole in memory; the
/// page is still one snapshot, taken before the first byte. Sent chunked,
/// as kube-apiserver (Go's HTTP server) sends a body it did not measure.
struct ListBody {
    head: Option<Bytes>,
    items: Vec<Arc<Obj>>,
    /// The next object to write; past the end once the brackets are out.
    next: usize,
    /// The resource serves a converted view (Events in another version).
    converted: bool,
}

impl Body for ListBody {
    type Data = Bytes;
    type Error = Abort;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Abort>>> {
        if let Some(head) = self.head.take() {
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        let len = self.items.len();
        if self.next > len {
            return Poll::Ready(None);
        }
        let end = (self.next + LIST_CHUNK).min(len);
        let mut out =
            BytesMut::with_capacity(2 + self.items[self.next..end].iter().map(|o| o.json_len() + 1).sum::<usize>());
        for i in self.next..end {
            if i > 0 {
                out.put_u8(b',');
            }
            let o = &self.items[i];
            if self.converted { out.put_slice(&view_converted(o)) } else { o.put_json(&mut out) }
        }
        if end == len {
            out.put_slice(b"]}");
        }
        self.next = if end == len { len + 1 } else { end };
        Poll::Ready(Some(Ok(Frame::data(out.freeze()))))
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_none() && self.next > self.items.len()
    }
}
