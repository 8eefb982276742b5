//! The served cluster's journal (`sim --serve --journal FILE`): every
//! change to a Node, Pod or Event as it is stored, and every write a client
//! had accepted for a node or a pod, one JSON object a line, stamped with
//! the scenario's time.
//!
//! `cargo xtask wire` judges a scenario file's expectations from it after
//! the run, so what is judged is exactly what the served cluster held and
//! when, not what a watching client happened to see: a change line carries
//! the whole object as stored, and a state lasts from its line to the next
//! line of the same object. Write lines count the writes an expectation's
//! `writes:` means, refused ones included, as replay counts them (the
//! cluster's own kubelets and the scenario's events write to the store
//! directly and have none).
//!
//! Lines:
//! - `{"t":NANOS,"kind":"Node","key":"node-a","deleted":false,"object":{...}}`
//! - `{"t":NANOS,"write":"PATCH","path":"/api/v1/nodes/node-a/status","agent":"...","code":200}`
//!
//! `t` is nanoseconds since the scenario's t=0. Writing stops at the first
//! failure (logged once): the cluster is served either way.
//!
//! The request journal (`sim --serve --request-journal FILE`) is the same
//! kind of file with request lines only: every request a client made to a
//! single node or pod, reads included, stamped with the wall clock
//! (`cargo xtask wire-load` counts what each evicted pod cost from it; at
//! a million pods the change lines would be the bulk of the server's work):
//! - `{"unix":NANOS,"request":"GET","path":"/api/v1/namespaces/d/pods/p","agent":"...","code":200}`

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use serde_json::json;

use crate::resource::Kind;
use nodewarden_objects::TimeBase;

/// An open journal.
pub(crate) struct Journal {
    time: TimeBase,
    out: Mutex<Option<BufWriter<File>>>,
}

impl Journal {
    /// Creates (or truncates) the file.
    pub fn create(path: &Path, time: TimeBase) -> std::io::Result<Journal> {
        Ok(Journal { time, out: Mutex::new(Some(BufWriter::new(File::create(path)?))) })
    }

    /// Whether changes of this kind are kept: the ones an expectation can
    /// read.
    pub fn keeps(kind: Kind) -> bool {
        matches!(kind, Kind::Node | Kind::Pod | Kind::Event)
    }

    /// A stored change; `object` is the stored JSON.
    pub fn change(&self, kind: Kind, key: &str, deleted: bool, object: &[u8]) {
        let t = (self.time.now() - nodewarden_model::Timestamp::EPOCH).as_nanos();
        let head = json!({"t": t, "kind": kind.resource().kind_name, "key": key, "deleted": deleted}).to_string();
        // `{...head fields...,"object":<stored JSON>}`
        let mut line = Vec::with_capacity(head.len() + object.len() + 12);
        line.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
        line.extend_from_slice(b",\"object\":");
        line.extend_from_slice(if object.is_empty() { b"null" } else { object });
        line.extend_from_slice(b"}\n");
        self.put(&line);
    }

    /// A client's write (`method` on `path`), answered with `code`.
    pub fn write(&self, method: &str, path: &str, agent: &str, code: u16) {
        let t = (self.time.now() - nodewarden_model::Timestamp::EPOCH).as_nanos();
        let mut line = json!({"t": t, "write": method, "path": path, "agent": agent, "code": code}).to_string();
        line.push('\n');
        self.put(line.as_bytes());
    }

    /// A client's request to one node or pod, read or write, stamped
    /// with the Unix time (the request journal's lines).
    pub fn request(&self, method: &str, path: &str, agent: &str, code: u16) {
        let unix = nodewarden_model::wall::unix_now_nanos();
        let mut line = json!({"unix": unix, "request": method, "path": path, "agent": agent, "code": code}).to_string();
        line.push('\n');
        self.put(line.as_bytes());
    }

    fn put(&self, line: &[u8]) {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(w) = out.as_mut() else { return };
        // Flushed a line at a time: the journal is read while the server
        // still runs, or after it was killed.
        if let Err(e) = w.write_all(line).and_then(|()| w.flush()) {
            tracing::warn!(error = %e, "the journal cannot be written; it stops here");
            *out = None;
        }
    }
}

/// Whether a write to `path` is one to a node or a pod (the objects whose
/// writes an expectation counts), and to which: `node-a` or `ns/name`.
/// Public so the judge reads the journal's write lines by the same rule
/// the server wrote them.
pub fn written_object(path: &str) -> Option<(Kind, String)> {
    let rest = path.strip_prefix("/api/v1/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        ["nodes", name] | ["nodes", name, _] => Some((Kind::Node, (*name).to_string())),
        ["namespaces", ns, "pods", name] | ["namespaces", ns, "pods", name, _] => {
            Some((Kind::Pod, format!("{ns}/{name}")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_written_object() {
        assert_eq!(written_object("/api/v1/nodes/a/status"), Some((Kind::Node, "a".into())));
        assert_eq!(written_object("/api/v1/nodes/a"), Some((Kind::Node, "a".into())));
        assert_eq!(written_object("/api/v1/namespaces/d/pods/p/eviction"), Some((Kind::Pod, "d/p".into())));
        assert_eq!(written_object("/api/v1/namespaces/d/pods/p"), Some((Kind::Pod, "d/p".into())));
        assert_eq!(written_object("/api/v1/namespaces/d/events"), None);
        assert_eq!(written_object("/apis/coordination.k8s.io/v1/namespaces/x/leases/y"), None);
        assert_eq!(written_object("/api/v1/nodes"), None);
    }

    #[test]
    fn lines_are_json_with_the_object() {
        let dir = std::env::temp_dir().join(format!("nodewarden-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("j.jsonl");
        let j = Journal::create(&path, TimeBase::starting_now()).expect("create");
        j.change(Kind::Node, "a", false, br#"{"metadata":{"name":"a"}}"#);
        j.change(Kind::Pod, "d/p", true, b"");
        j.write("PATCH", "/api/v1/nodes/a", "agent", 200);
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
        assert_eq!(lines[0]["object"]["metadata"]["name"], "a");
        assert_eq!(lines[0]["kind"], "Node");
        assert_eq!(lines[1]["deleted"], true);
        assert_eq!(lines[2]["write"], "PATCH");
        assert_eq!(lines[2]["code"], 200);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
