//! The served cluster's object store: every object as compact JSON with
//! its resourceVersion, one global resourceVersion counter (etcd's
//! revision), and per kind a bounded window of past changes for watch
//! resume, a broadcast of new changes, and short-lived snapshots that keep
//! paged lists consistent.
//!
//! Invariants:
//! - every write is atomic and serialised under one lock: it either lands
//!   whole, with a resourceVersion greater than every earlier one, and is
//!   broadcast to watchers in resourceVersion order, or changes nothing;
//! - a watch from resourceVersion N sees exactly the changes after N, or is
//!   told 410 Gone when some of them have left the window;
//! - the pages of one list come from one snapshot (the resourceVersion of
//!   the first page), as etcd serves them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::resource::Kind;

/// A stored object: its JSON as clients get it, with what lists, watches
/// and selectors need kept beside it so they never parse it again.
#[derive(Debug)]
pub struct Obj {
    /// `namespace/name`, or `name` for cluster-scoped kinds: the etcd key
    /// order lists come in.
    pub key: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub rv: u64,
    /// `metadata.labels`, sorted by key (a flat list: most objects have
    /// one or two, and a map per object would cost more than the object).
    pub labels: Labels,
    /// The selectable fields' values in the resource's field order, joined
    /// by NUL (one allocation per object; field selectors never parse JSON).
    pub fields: Box<str>,
    /// What it is.
    pub kind: Kind,
    /// The object as served ([`Obj::json`]).
    body: Body,
}

/// How a stored object's JSON is kept.
enum Body {
    /// As it is served.
    Plain(Bytes),
    /// LZ4-compressed against its kind's dictionary ([`Dictionary`]): a
    /// served fleet's pods differ in a few names, addresses and times, and
    /// keep a tenth of their JSON's bytes this way.
    Packed {
        /// The compressed bytes.
        data: Box<[u8]>,
        /// The JSON's length.
        len: u32,
        /// What it was compressed against.
        dict: Arc<[u8]>,
    },
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Plain(b) => write!(f, "Plain({} bytes)", b.len()),
            Body::Packed { data, len, .. } => write!(f, "Packed({len} bytes in {})", data.len()),
        }
    }
}

/// Objects shorter than this are kept as they are: too little to gain.
const PACK_FROM: usize = 256;

impl Body {
    /// `json` kept against `dict` when that saves at least a quarter.
    fn pack(json: Bytes, dict: Option<&Arc<[u8]>>) -> Body {
        let (Some(dict), Ok(len)) = (dict, u32::try_from(json.len())) else { return Body::Plain(json) };
        if json.len() < PACK_FROM {
            return Body::Plain(json);
        }
        let mut data = lz4_flex::block::compress_with_dict(&json, dict);
        if data.len() * 4 > json.len() * 3 {
            return Body::Plain(json);
        }
        data.shrink_to_fit();
        Body::Packed { data: data.into_boxed_slice(), len, dict: dict.clone() }
    }
}

impl Obj {
    /// An object that is not stored (a dry run's answer): kept plain.
    pub(crate) fn unstored(key: String, uid: String, rv: u64, kind: Kind, json: Bytes) -> Obj {
        Obj { key, uid, rv, labels: Labels::default(), fields: Box::default(), kind, body: Body::Plain(json) }
    }

    /// The object's JSON, as served.
    pub fn json(&self) -> Bytes {
        match &self.body {
            Body::Plain(b) => b.clone(),
            Body::Packed { .. } => {
                let mut out = BytesMut::new();
                self.put_json(&mut out);
                out.freeze()
            }
        }
    }

    /// Appends the object's JSON to `out` (a list's body): a packed one is
    /// decompressed straight into it.
    pub(crate) fn put_json(&self, out: &mut BytesMut) {
        match &self.body {
            Body::Plain(b) => out.extend_from_slice(b),
            Body::Packed { data, len, dict } => {
                let start = out.len();
                out.resize(start + *len as usize, 0);
                // Compressed here from these very bytes: it cannot fail;
                // if it ever did, the object would read as `null` rather
                // than as garbage.
                match lz4_flex::block::decompress_into_with_dict(data, &mut out[start..], dict) {
                    Ok(n) if n == *len as usize => {}
                    _ => {
                        out.truncate(start);
                        out.extend_from_slice(b"null");
                    }
                }
            }
        }
    }

    /// The JSON's length in bytes.
    pub(crate) fn json_len(&self) -> usize {
        match &self.body {
            Body::Plain(b) => b.len(),
            Body::Packed { len, .. } => *len as usize,
        }
    }

    /// The bytes this object's JSON keeps in memory.
    pub(crate) fn kept_len(&self) -> usize {
        match &self.body {
            Body::Plain(b) => b.len(),
            Body::Packed { data, .. } => data.len(),
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.key.rsplit_once('/').map_or(&self.key, |(_, n)| n)
    }

    /// `metadata.namespace`, empty for cluster-scoped kinds.
    pub fn namespace(&self) -> &str {
        self.key.rsplit_once('/').map_or("", |(ns, _)| ns)
    }

    /// The object as a JSON value.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json()).unwrap_or(Value::Null)
    }

    /// A selectable field's value.
    pub(crate) fn field(&self, name: &str) -> Option<String> {
        match name {
            "metadata.name" => Some(self.name().to_string()),
            "metadata.namespace" => Some(self.namespace().to_string()),
            _ => {
                let names = self.kind.resource().fields;
                let i =
                    names.iter().position(|f| *f == name).or_else(|| (name == NODE_READY).then_some(names.len()))?;
                self.fields.split('\0').nth(i).map(str::to_string)
            }
        }
    }
}

/// The kind of a watch event, as the change feed reports it to followers
/// of the store (the HTTP watches, the in-process controller, tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Deleted (the object as it was, at the deletion's resourceVersion).
    Deleted,
}

impl EventType {
    /// `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as watchers receive it: with the object before, so a
/// filtered watch can tell an object leaving its filter from one changing.
#[derive(Debug)]
pub struct Change {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// The object after (for a deletion: its last state).
    pub obj: Arc<Obj>,
    /// The object before, for selector transitions.
    pub prev: Option<Arc<Obj>>,
}

impl Change {
    /// What keeping this change in the window costs, at most: the bytes of
    /// the object's JSON and its previous version's (the current version is shared with
    /// the table, so this counts it twice while it lasts).
    fn cost(&self) -> usize {
        self.obj.kept_len() + self.prev.as_ref().map_or(0, |p| p.kept_len())
    }
}

/// `value` as stored: compact JSON in an allocation of its own size (a
/// serializer's buffer grows by doubling and would keep up to twice the
/// object's bytes, for every object the store holds).
pub(crate) fn exact_json(value: &Value) -> Bytes {
    let mut json = serde_json::to_vec(value).unwrap_or_default();
    json.shrink_to_fit();
    Bytes::from(json)
}

type Items = imbl::OrdMap<String, Arc<Obj>>;

struct Table {
    items: Items,
    history: VecDeque<Arc<Change>>,
    /// What the window's changes keep alive ([`Change::cost`]).
    history_bytes: usize,
    /// Changes with rv up to this one have left the window.
    expired_upto: u64,
    tx: broadcast::Sender<Arc<Change>>,
    snapshots: VecDeque<(u64, Instant, Items)>,
    /// What the kind's objects are compressed against: the first one
    /// large enough to be worth it ([`Body::pack`]). Objects of a kind
    /// share most of their JSON (field names, the same images, the same
    /// conditions), so any of them makes a good dictionary; it is kept
    /// for the store's life, as every packed object needs it to be read.
    dict: Option<Arc<[u8]>>,
}

/// Store limits: how much history and how many snapshots a served
/// cluster keeps, so a large fleet fits in memory and tests can make a
/// watch fall out of the window on purpose.
#[derive(Clone, Copy, Debug)]
pub struct StoreLimits {
    /// Changes kept per kind for watch resume (upstream's watch cache keeps
    /// a similar window; older resourceVersions get 410 Gone).
    pub history: usize,
    /// And at most this many bytes of objects per kind: a kind whose
    /// objects change often and are large (node status posts) would
    /// otherwise keep a hundred thousand old versions alive.
    pub history_bytes: usize,
    /// How long a paged list's snapshot lives (etcd compacts every 5m).
    pub snapshot_ttl: Duration,
    /// Snapshots kept per kind.
    pub snapshots: usize,
    /// Changes a watcher may fall behind before its watch is closed.
    pub watch_buffer: usize,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            history: 100_000,
            history_bytes: 64 << 20,
            snapshot_ttl: Duration::from_secs(300),
            snapshots: 32,
            watch_buffer: 65_536,
        }
    }
}

/// The store: the one place the cluster's state lives, so that every
/// reader (HTTP, kubelets, the in-process controller, tests) sees one
/// history of resourceVersions.
pub struct Store {
    inner: Mutex<Inner>,
    journal: std::sync::OnceLock<Arc<crate::journal::Journal>>,
}

/// The store under its lock: reads and writes through it are atomic
/// with each other, as etcd's transactions are.
pub struct Inner {
    rv: u64,
    uid_seq: u64,
    tables: Vec<Table>,
    limits: StoreLimits,
    journal: Option<Arc<crate::journal::Journal>>,
}

/// A consistent list: the resourceVersion it was read at and the
/// objects, in key order, from the start key on.
pub struct Snapshot {
    /// The list's resourceVersion.
    pub rv: u64,
    items: Items,
}

impl Snapshot {
    /// Objects from `start` (inclusive) on, within `prefix` when given.
    pub fn iter_from<'a>(&'a self, start: &str, prefix: Option<&'a str>) -> impl Iterator<Item = &'a Arc<Obj>> + 'a {
        let lower = match prefix {
            Some(p) if p > start => p.to_string(),
            _ => start.to_string(),
        };
        self.items.range(lower..).take_while(move |(k, _)| prefix.is_none_or(|p| k.starts_with(p))).map(|(_, v)| v)
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// A watch's start: the changes already past and the subscription for the
/// rest.
pub struct WatchStart {
    /// The store's resourceVersion when the watch started.
    pub rv: u64,
    /// Changes after the requested resourceVersion, in order.
    pub backlog: Vec<Arc<Change>>,
    /// The current objects, when the watch starts with them (no or `0`
    /// resourceVersion).
    pub initial: Option<Snapshot>,
    /// New changes.
    pub rx: broadcast::Receiver<Arc<Change>>,
}

/// What a continue token holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Continue {
    /// The first page's resourceVersion.
    pub rv: u64,
    /// The key to resume from.
    pub start: String,
    /// How many objects the list had left after this page, when no
    /// selector filters it (upstream's `remainingItemCount`). Carried in
    /// the token so a later page subtracts its own length instead of
    /// counting the rest of the snapshot again: paging through a million
    /// pods would otherwise walk the snapshot once per page.
    pub left: Option<u64>,
}

impl Continue {
    /// Encodes it as upstream does (base64 of a small JSON document).
    pub fn encode(&self) -> String {
        let mut doc = json!({"v": "meta.k8s.io/v1", "rv": self.rv, "start": self.start});
        if let Some(left) = self.left {
            doc["left"] = json!(left);
        }
        base64::engine::general_purpose::URL_SAFE.encode(doc.to_string())
    }

    /// Decodes a client's token; 400 when it is not one of ours.
    pub fn decode(token: &str) -> Result<Continue, ApiError> {
        let bad = |why: &str| ApiError::BadRequest(format!("continue key is not valid: {why}"));
        let raw = base64::engine::general_purpose::URL_SAFE
            .decode(token)
            .or_else(|_| base64::engine::general_purpose::STANDARD.decode(token))
            .map_err(|_| bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
        let v: Value = serde_json::from_slice(&raw).map_err(|_| bad("not a continue token"))?;
        if v["v"] != "meta.k8s.io/v1" {
            return Err(bad("server does not recognize this encoded key"));
        }
        let rv = v["rv"].as_u64().ok_or_else(|| bad("no resourceVersion"))?;
        let start = v["start"].as_str().ok_or_else(|| bad("no start key"))?.to_string();
        Ok(Continue { rv, start, left: v["left"].as_u64() })
    }
}

/// The message upstream gives a continue token whose snapshot is gone.
pub(crate) const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

impl Store {
    /// An empty store.
    pub fn new(limits: StoreLimits) -> Store {
        let tables = Kind::ALL
            .iter()
            .map(|_| Table {
                items: Items::new(),
                history: VecDeque::new(),
                history_bytes: 0,
                expired_upto: 0,
                dict: None,
                tx: broadcast::channel(limits.watch_buffer.max(16)).0,
                snapshots: VecDeque::new(),
            })
            .collect();
        Store {
            inner: Mutex::new(Inner { rv: 0, uid_seq: 0, tables, limits, journal: None }),
            journal: std::sync::OnceLock::new(),
        }
    }

    /// Keeps a journal of every change from now on ([`crate::journal`]);
    /// a second journal is refused (returns false).
    pub(crate) fn keep_journal(&self, journal: Arc<crate::journal::Journal>) -> bool {
        if self.journal.set(journal.clone()).is_err() {
            return false;
        }
        self.lock().journal = Some(journal);
        true
    }

    /// The journal, when one is kept.
    pub(crate) fn journal(&self) -> Option<&Arc<crate::journal::Journal>> {
        self.journal.get()
    }

    /// Locks the store for a read or an atomic write.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A node's Ready condition status (`True`, `False`, `Unknown`, or empty
/// when it has none), kept beside the selectable fields so the kubelets and
/// the status line never parse a node to read it. Not selectable.
pub(crate) const NODE_READY: &str = "nodewarden.internal/ready";

/// An object's labels, kept apart from its JSON so selectors read them
/// without parsing it.
#[derive(Debug, Default)]
pub struct Labels(pub Box<[(Box<str>, Box<str>)]>);

impl Labels {
    /// The value of a label.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &*self.0[i].1)
    }
}

/// Extracts the selectable fields of a kind from its JSON.
fn fields_of(kind: Kind, v: &Value) -> Box<str> {
    let res = kind.resource();
    let mut extra = Vec::new();
    if kind == Kind::Node {
        let ready = v
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .and_then(|c| c["status"].as_str())
            .unwrap_or_default();
        extra.push((NODE_READY, ready.to_string()));
    }
    res.fields
        .iter()
        .map(|f| {
            let path = match *f {
                "source" => "source.component",
                other => other,
            };
            let mut cur = v;
            for part in path.split('.') {
                cur = cur.get(part).unwrap_or(&Value::Null);
            }
            match cur {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                Value::Null if matches!(*f, "spec.unschedulable" | "spec.hostNetwork") => "false".to_string(),
                _ => String::new(),
            }
        })
        .chain(extra.into_iter().map(|(_, v)| v))
        .collect::<Vec<_>>()
        .join("\0")
        .into_boxed_str()
}

fn labels_of(v: &Value) -> Labels {
    // serde_json's map is ordered by key.
    Labels(
        v.pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.as_str().into(), s.into()))).collect())
            .unwrap_or_default(),
    )
}

/// The store key of an object: `namespace/name`, or `name` alone for a
/// cluster-scoped one, so one kind's keys sort by namespace first.
pub fn key_of(namespace: &str, name: &str) -> String {
    if namespace.is_empty() { name.to_string() } else { format!("{namespace}/{name}") }
}

impl Inner {
    /// The current resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    fn table(&self, kind: Kind) -> &Table {
        &self.tables[kind.index()]
    }

    fn table_mut(&mut self, kind: Kind) -> &mut Table {
        &mut self.tables[kind.index()]
    }

    /// A fresh uid.
    pub(crate) fn next_uid(&mut self) -> String {
        self.uid_seq += 1;
        let n = self.uid_seq;
        // A UUID-shaped uid, unique within this server's life.
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            (n >> 32) as u32 ^ 0x6e77_6172,
            (n >> 16) & 0xffff,
            n & 0xfff,
            (n >> 12) & 0xfff,
            n
        )
    }

    /// The object at `key`.
    pub fn get(&self, kind: Kind, key: &str) -> Option<Arc<Obj>> {
        self.table(kind).items.get(key).cloned()
    }

    /// Number of objects of a kind.
    pub fn count(&self, kind: Kind) -> usize {
        self.table(kind).items.len()
    }

    /// Every object of a kind now (cheap: the map is persistent).
    pub fn snapshot(&self, kind: Kind) -> Snapshot {
        Snapshot { rv: self.rv, items: self.table(kind).items.clone() }
    }

    /// Keeps the current state of a kind for the continue token of a
    /// paged list at `rv`.
    pub(crate) fn keep_snapshot(&mut self, kind: Kind, snap: &Snapshot) {
        let limits = self.limits;
        let t = self.table_mut(kind);
        let now = Instant::now();
        t.snapshots.retain(|(_, at, _)| now.duration_since(*at) < limits.snapshot_ttl);
        if t.snapshots.iter().any(|(rv, _, _)| *rv == snap.rv) {
            return;
        }
        t.snapshots.push_back((snap.rv, now, snap.items.clone()));
        while t.snapshots.len() > limits.snapshots {
            t.snapshots.pop_front();
        }
    }

    /// The snapshot a continue token points at; `None` once expired.
    pub(crate) fn kept_snapshot(&mut self, kind: Kind, rv: u64) -> Option<Snapshot> {
        let ttl = self.limits.snapshot_ttl;
        let t = self.table_mut(kind);
        let now = Instant::now();
        t.snapshots.retain(|(_, at, _)| now.duration_since(*at) < ttl);
        t.snapshots.iter().find(|(r, _, _)| *r == rv).map(|(rv, _, items)| Snapshot { rv: *rv, items: items.clone() })
    }

    /// Starts a watch after `from` (`None`: with the current objects
    /// first). 410 Gone when changes after `from` have left the window.
    pub fn watch(&mut self, kind: Kind, from: Option<u64>) -> Result<WatchStart, ApiError> {
        let rv = self.rv;
        let t = self.table(kind);
        let rx = t.tx.subscribe();
        match from {
            None => Ok(WatchStart { rv, backlog: Vec::new(), initial: Some(self.snapshot(kind)), rx }),
            Some(n) if n < t.expired_upto => {
                Err(ApiError::Gone(format!("too old resource version: {n} ({})", t.expired_upto)))
            }
            Some(n) => {
                let start = t.history.partition_point(|c| c.rv <= n);
                let backlog = t.history.iter().skip(start).cloned().collect();
                Ok(WatchStart { rv, backlog, initial: None, rx })
            }
        }
    }

    /// Stores `value` as a new version of the object at `key` (creating it
    /// when `prev` is `None`), with a new resourceVersion, and tells the
    /// watchers. The caller has validated it.
    pub fn commit(&mut self, kind: Kind, key: &str, mut value: Value, deleted: bool) -> Arc<Obj> {
        self.rv += 1;
        let rv = self.rv;
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let uid = value.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
        let history_cap = self.limits.history.max(1);
        let bytes_cap = self.limits.history_bytes;
        let t = self.table_mut(kind);
        let json = exact_json(&value);
        if t.dict.is_none() && json.len() >= PACK_FROM {
            t.dict = Some(Arc::from(&json[..]));
        }
        let obj = Arc::new(Obj {
            key: key.to_string(),
            uid,
            rv,
            labels: labels_of(&value),
            fields: fields_of(kind, &value),
            kind,
            body: Body::pack(json, t.dict.as_ref()),
        });
        let prev = if deleted { t.items.remove(key) } else { t.items.insert(key.to_string(), obj.clone()) };
        let change_kind = match (&prev, deleted) {
            (_, true) => EventType::Deleted,
            (None, false) => EventType::Added,
            (Some(_), false) => EventType::Modified,
        };
        let change = Arc::new(Change { rv, kind: change_kind, obj: obj.clone(), prev });
        t.history_bytes += change.cost();
        t.history.push_back(change.clone());
        while t.history.len() > history_cap || (t.history_bytes > bytes_cap && t.history.len() > 1) {
            if let Some(old) = t.history.pop_front() {
                t.history_bytes -= old.cost();
                t.expired_upto = old.rv;
            }
        }
        // No receivers is not an error: nobody watches.
        let _ = t.tx.send(change);
        if let Some(j) = &self.journal
            && crate::journal::Journal::keeps(kind)
        {
            j.change(kind, key, deleted, &obj.json());
        }
        obj
    }

    /// Ends every watch on a kind (their receivers see the channel
    /// closed), so a test can check that a follower of the change feed
    /// recovers from a lost subscription.
    #[cfg(test)]
    pub(crate) fn close_watches(&mut self, kind: Kind) {
        let cap = self.limits.watch_buffer.max(16);
        self.table_mut(kind).tx = broadcast::channel(cap).0;
    }
}

/// True when `rv` (a client's resourceVersion string) parses; 400 if not.
pub(crate) fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>().map_err(|_| ApiError::BadRequest(format!("invalid resource version: {s:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> Value {
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "uid": "u", "labels": {"z": "a"}}, "spec": {}})
    }

    #[test]
    fn commits_bump_rv_and_feed_history_and_watchers() {
        let store = Store::new(StoreLimits { history: 2, ..StoreLimits::default() });
        let mut s = store.lock();
        let mut w = match s.watch(Kind::Node, Some(0)) {
            Ok(w) => w,
            Err(e) => panic!("{e}"),
        };
        let a = s.commit(Kind::Node, "a", node("a"), false);
        assert_eq!((a.rv, a.name(), a.namespace()), (1, "a", ""));
        assert_eq!(a.field("spec.unschedulable").as_deref(), Some("false"));
        assert_eq!(a.value()["metadata"]["resourceVersion"], "1");
        s.commit(Kind::Node, "b", node("b"), false);
        s.commit(Kind::Node, "a", node("a"), true);
        assert!(s.get(Kind::Node, "a").is_none());
        assert_eq!(w.rx.try_recv().map(|c| (c.rv, c.kind)).ok(), Some((1, EventType::Added)));
        // Window of two: rv 1 is gone, so a watch from 0 is too old.
        assert!(
            matches!(s.watch(Kind::Node, Some(0)), Err(ApiError::Gone(m)) if m == "too old resource version: 0 (1)")
        );
        let w = s.watch(Kind::Node, Some(1)).ok().map(|w| w.backlog.iter().map(|c| c.rv).collect::<Vec<_>>());
        assert_eq!(w, Some(vec![2, 3]));
    }

    /// The window is bounded by bytes too: large objects changing often
    /// leave it sooner than the count alone would let them.
    #[test]
    fn the_change_window_is_bounded_by_bytes() {
        let ten_versions = |limits: StoreLimits| {
            let store = Store::new(limits);
            for _ in 0..10 {
                store.lock().commit(Kind::Node, "a", node("a"), false);
            }
            store
        };
        // One version's size as kept (every version is alike).
        let sized = ten_versions(StoreLimits::default());
        let a = sized.lock().get(Kind::Node, "a").expect("stored");
        assert_eq!(a.json_len(), serde_json::to_vec(&a.value()).unwrap().len());
        let one = a.kept_len();
        // Each change counts its object and the version before it: room
        // for three changes, not four.
        let store = ten_versions(StoreLimits { history: 1000, history_bytes: 7 * one, ..StoreLimits::default() });
        let mut s = store.lock();
        let kept = s.watch(Kind::Node, Some(7)).ok().map(|w| w.backlog.len());
        assert_eq!(kept, Some(3));
        assert!(matches!(s.watch(Kind::Node, Some(6)), Err(ApiError::Gone(_))));
    }

    /// Objects of a kind are kept compressed against the kind's first
    /// large one, and read back byte for byte.
    #[test]
    fn similar_objects_are_kept_packed_and_read_back_exactly() {
        let pod = |name: &str, ip: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "apps", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
                "spec": {"nodeName": "node-000001", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log"}],
                    "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}, {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
                "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}})
        };
        let store = Store::new(StoreLimits::default());
        let mut s = store.lock();
        s.commit(Kind::Pod, "apps/web-1", pod("web-1", "10.0.0.1"), false);
        let second = pod("web-2", "10.0.0.2");
        let kept = s.commit(Kind::Pod, "apps/web-2", second.clone(), false);
        let mut want = second;
        want["metadata"]["resourceVersion"] = json!("2");
        assert_eq!(kept.json(), Bytes::from(serde_json::to_vec(&want).unwrap()));
        assert_eq!(kept.json_len(), kept.json().len());
        assert!(kept.kept_len() * 3 < kept.json_len(), "{} of {} bytes kept", kept.kept_len(), kept.json_len());
        // Into a list body, after what is there already.
        let mut out = BytesMut::from(&b"["[..]);
        kept.put_json(&mut out);
        assert_eq!(&out[1..], &kept.json()[..]);
        // A small object stays as it is.
        let tiny = s.commit(Kind::Pod, "apps/t", json!({"metadata": {"name": "t"}}), false);
        assert_eq!(tiny.kept_len(), tiny.json_len());
    }

    #[test]
    fn snapshots_are_stable_and_continue_tokens_round_trip() {
        let store = Store::new(StoreLimits::default());
        let mut s = store.lock();
        for n in ["a/x", "a/y", "b/x"] {
            s.commit(Kind::Pod, n, json!({"metadata": {"name": n}}), false);
        }
        let snap = s.snapshot(Kind::Pod);
        s.keep_snapshot(Kind::Pod, &snap);
        s.commit(Kind::Pod, "a/z", json!({"metadata": {}}), false);
        let kept = s
            .kept_snapshot(Kind::Pod, snap.rv)
            .map(|k| k.iter_from("", Some("a/")).map(|o| o.key.clone()).collect::<Vec<_>>());
        assert_eq!(kept, Some(vec!["a/x".to_string(), "a/y".to_string()]));
        let c = Continue { rv: 7, start: "a/y\u{0}".into(), left: Some(3) };
        assert_eq!(Continue::decode(&c.encode()), Ok(c));
        assert!(Continue::decode("!!").is_err());
    }
}
