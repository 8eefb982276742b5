//! `--zone-outage`: the incident nodewarden exists for, judged from
//! outside. The first zone loses the API server at `--crash-at` and gets
//! it back `--outage` seconds later; the harness keeps what the API server
//! showed of it (each node Unknown, each node tainted, the pods of each
//! tainted node as listed when the taint arrived) and, from the server's
//! request journal, what each evicted pod cost in requests and when it
//! was deleted.
//!
//! The judge here reads upstream's rules itself rather than through
//! nodewarden's code: a pod is due when its node's unreachable taint has
//! been on for the shortest `tolerationSeconds` of the tolerations that
//! match it (none: at once; none with seconds: never). A deletion before
//! that, of a pod no tainted zone node held, of a pod that tolerates the
//! taint for ever, or a second one, is a fault.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

use super::nodes::{NodeSeen, UNREACHABLE};
use super::{max, percentile, round3, secs};

/// How long a pod tolerates its node's `unreachable:NoExecute` taint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Tolerated {
    /// No toleration matches: deleted as soon as the taint is seen.
    Not,
    /// For this many seconds from the taint.
    For(i64),
    /// A matching toleration has no `tolerationSeconds`.
    Forever,
}

/// Upstream's reading of a pod's tolerations against the unreachable
/// NoExecute taint (empty value): which match, then the shortest
/// `tolerationSeconds` among them (`getMinTolerationTime`).
pub(super) fn unreachable_toleration(pod: &Value) -> Tolerated {
    let tolerations = pod.pointer("/spec/tolerations").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let matching: Vec<&Value> = tolerations.iter().filter(|t| tolerates_unreachable(t)).collect();
    if matching.is_empty() {
        return Tolerated::Not;
    }
    let seconds = matching.iter().filter_map(|t| t.get("tolerationSeconds").and_then(Value::as_i64)).min();
    match seconds {
        // A matching toleration without seconds does not make the pod
        // tolerate for ever when another one names seconds: the
        // shortest time wins, as upstream's minimum does.
        Some(s) => Tolerated::For(s.max(0)),
        None => Tolerated::Forever,
    }
}

/// `v1.Toleration.ToleratesTaint` for `node.kubernetes.io/unreachable`
/// with effect NoExecute and no value.
fn tolerates_unreachable(t: &Value) -> bool {
    let field = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default();
    let effect_ok = matches!(field("effect"), "" | "NoExecute");
    let key_ok = matches!(field("key"), "" | UNREACHABLE);
    let key_named = field("key") == UNREACHABLE;
    effect_ok
        && match field("operator") {
            "Exists" => key_ok,
            "" | "Equal" => key_named && field("value").is_empty(),
            _ => false,
        }
}

/// A pod of a zone node, as listed when its node was seen tainted.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ZonePod {
    pub(super) node: String,
    pub(super) tolerated: Tolerated,
}

/// The pod's path on the API (`/api/v1/namespaces/NS/pods/NAME`) and
/// what the judge needs of it.
pub(super) fn zone_pod(pod: &Value, node: &str) -> Option<(String, ZonePod)> {
    let ns = pod.pointer("/metadata/namespace")?.as_str()?;
    let name = pod.pointer("/metadata/name")?.as_str()?;
    Some((
        format!("/api/v1/namespaces/{ns}/pods/{name}"),
        ZonePod { node: node.to_string(), tolerated: unreachable_toleration(pod) },
    ))
}

/// One line of the server's request journal.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Request {
    pub(super) unix: i64,
    pub(super) method: String,
    pub(super) path: String,
    pub(super) code: u16,
}

/// Reads the request journal (`sim --serve --request-journal`); a line cut
/// short by the server's end is skipped.
pub(super) fn read_requests(path: &Path) -> Result<Vec<Request>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            Some(Request {
                unix: v.get("unix")?.as_i64()?,
                method: v.get("request")?.as_str()?.to_string(),
                path: v.get("path")?.as_str()?.to_string(),
                code: u16::try_from(v.get("code")?.as_u64()?).ok()?,
            })
        })
        .collect())
}

/// The pod a request was about: its path without a subresource
/// (`/status`, `/eviction`); `None` for a node's.
fn pod_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [_, "pods", _] => Some(path),
        [_, "pods", _, _] => path.rsplit_once('/').map(|(p, _)| p),
        _ => None,
    }
}

/// The evictions judged against the zone's pods.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Evictions {
    /// Pods deleted (a DELETE answered 2xx), before and after the heal.
    pub(super) before_heal: usize,
    pub(super) after_heal: usize,
    /// Pods of tainted zone nodes whose toleration ran out before the heal.
    pub(super) due_before_heal: usize,
    /// Deleted before their toleration ran out (from the taint's
    /// timeAdded, which is whole seconds and never later than the taint).
    pub(super) early: Vec<String>,
    /// Deleted, but no tainted zone node held them when it was tainted.
    pub(super) unlisted: Vec<String>,
    /// Deleted although they tolerate the taint for ever.
    pub(super) tolerated: Vec<String>,
    /// DELETEs answered 2xx beyond the first, per pod.
    pub(super) duplicated: usize,
    /// Requests to each deleted pod (its status, its eviction, reads).
    pub(super) requests_per_pod: Vec<f64>,
}

impl Evictions {
    /// The faults: what a safe controller never does.
    pub(super) fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut say = |what: &str, pods: &[String]| {
            if let Some(first) = pods.first() {
                out.push(format!("{} pod(s) {what}, the first {first}", pods.len()));
            }
        };
        say("deleted before their toleration ran out", &self.early);
        say("deleted that no tainted node of the zone held", &self.unlisted);
        say("deleted that tolerate the taint for ever", &self.tolerated);
        if self.duplicated > 0 {
            out.push(format!("{} deletion(s) of a pod already deleted", self.duplicated));
        }
        out
    }
}

/// Judges the deletions in `requests` against the zone's pods
/// (`pods`: path → pod), the taints' timeAdded (`tainted`: node → Unix
/// nanoseconds) and the heal (Unix nanoseconds).
pub(super) fn judge(
    pods: &HashMap<String, ZonePod>,
    tainted: &HashMap<String, i64>,
    requests: &[Request],
    heal: i64,
) -> Evictions {
    let mut e = Evictions::default();
    let mut per_pod: HashMap<&str, usize> = HashMap::new();
    let mut deleted: BTreeMap<&str, i64> = BTreeMap::new();
    for r in requests {
        let Some(pod) = pod_of(&r.path) else { continue };
        *per_pod.entry(pod).or_default() += 1;
        if r.method == "DELETE" && r.path == pod && (200..300).contains(&r.code) {
            if deleted.contains_key(pod) {
                e.duplicated += 1;
            } else {
                deleted.insert(pod, r.unix);
            }
        }
    }
    let nanos = |s: i64| s.saturating_mul(1_000_000_000);
    for (&path, &at) in &deleted {
        if at < heal {
            e.before_heal += 1;
        } else {
            e.after_heal += 1;
        }
        e.requests_per_pod.push(per_pod.get(path).copied().unwrap_or(0) as f64);
        let Some(p) = pods.get(path) else {
            e.unlisted.push(path.to_string());
            continue;
        };
        let added = tainted.get(&p.node).copied().unwrap_or(i64::MAX);
        match p.tolerated {
            Tolerated::Forever => e.tolerated.push(path.to_string()),
            Tolerated::For(s) if at < added.saturating_add(nanos(s)) => e.early.push(path.to_string()),
            Tolerated::Not if at < added => e.early.push(path.to_string()),
            _ => {}
        }
    }
    e.due_before_heal = pods
        .values()
        .filter(|p| {
            let Some(&added) = tainted.get(&p.node) else { return false };
            match p.tolerated {
                Tolerated::Not => added < heal,
                Tolerated::For(s) => added.saturating_add(nanos(s)) < heal,
                Tolerated::Forever => false,
            }
        })
        .count();
    e
}

/// How the zone went down on the API server, from the outage (Unix
/// nanoseconds): every node Unknown, every node tainted.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ZoneSeen {
    pub(super) nodes: usize,
    /// Per node seen Unknown: when its change arrived, seconds after the
    /// outage.
    pub(super) unknown: Vec<f64>,
    /// Per node tainted: the taint's timeAdded, seconds after the outage.
    pub(super) tainted: Vec<f64>,
}

impl ZoneSeen {
    pub(super) fn of(zone: &BTreeMap<String, i64>, book: &HashMap<String, NodeSeen>, outage: i64) -> ZoneSeen {
        let mut z = ZoneSeen { nodes: zone.len(), ..ZoneSeen::default() };
        for name in zone.keys() {
            let Some(seen) = book.get(name) else { continue };
            if let Some((_, arrival)) = seen.unknown {
                z.unknown.push(secs(outage, arrival));
            }
            if let Some((added, _)) = seen.tainted {
                z.tainted.push(secs(outage, added));
            }
        }
        z
    }

    /// Until every node of the zone read Unknown; `None` until then.
    pub(super) fn all_unknown(&self) -> Option<f64> {
        (self.unknown.len() == self.nodes).then(|| max(&self.unknown)).flatten()
    }

    /// Until every node of the zone was tainted; `None` until then.
    pub(super) fn all_tainted(&self) -> Option<f64> {
        (self.tainted.len() == self.nodes).then(|| max(&self.tainted)).flatten()
    }

    /// Nodes tainted a second after the first, as the zone's limiter paces
    /// them (`None` with fewer than two).
    pub(super) fn taint_rate(&self) -> Option<f64> {
        let (first, last) = (percentile(&self.tainted, 0.0)?, max(&self.tainted)?);
        (self.tainted.len() > 1 && last > first).then(|| round3((self.tainted.len() - 1) as f64 / (last - first)))
    }
}

/// What `--zone-outage` measured of the zone, for the report.
pub(super) struct ZoneFigures {
    pub(super) seen: ZoneSeen,
    pub(super) watch: ZoneWatch,
    pub(super) evictions: Evictions,
    /// When the zone got the API server back, Unix nanoseconds.
    pub(super) heal: i64,
}

/// What the harness keeps of the outage while it runs: the pods of each
/// tainted zone node, the taints' times, and the controller's memory and
/// write backlog, sampled.
#[derive(Default)]
pub(super) struct ZoneWatch {
    pub(super) pods: HashMap<String, ZonePod>,
    /// The zone's tainted nodes: the taint's timeAdded (Unix nanoseconds).
    pub(super) tainted: HashMap<String, i64>,
    /// `nodewarden run`'s RSS at the outage, and the most sampled from then.
    pub(super) rss_at_outage: Option<u64>,
    pub(super) rss_max: u64,
    /// The most writes `nodewarden_write_queue_depth` said were waiting.
    pub(super) queue_max: f64,
    /// The most writes `nodewarden_writes_wanted` said were decided and
    /// not yet built (marks kept as decisions).
    pub(super) wanted_max: f64,
    pub(super) samples: usize,
    last_sample: Option<std::time::Instant>,
}

/// How often the controller's memory and backlog are read.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

impl ZoneWatch {
    /// The zone's nodes the node watch has seen tainted since the last
    /// look, with their taint's timeAdded.
    pub(super) fn newly_tainted(
        &self,
        zone: &BTreeMap<String, i64>,
        book: &HashMap<String, NodeSeen>,
    ) -> Vec<(String, i64)> {
        zone.keys()
            .filter(|n| !self.tainted.contains_key(*n))
            .filter_map(|n| book.get(n).and_then(|s| s.tainted).map(|(added, _)| (n.clone(), added)))
            .collect()
    }

    /// One look, between the harness's other steps: the controller's
    /// memory and backlog every [`SAMPLE_EVERY`] from the outage on; the
    /// pods of the zone's nodes `newly` tainted (before any toleration
    /// runs out: the fleet's shortest is 30 s).
    pub(super) async fn look(
        &mut self,
        api: &super::api::Api,
        run: &nodewarden_harness::process::Proc,
        metrics: std::net::SocketAddr,
        tick: f64,
        newly: Vec<(String, i64)>,
    ) -> Result<()> {
        if self.last_sample.is_none_or(|t| t.elapsed() >= SAMPLE_EVERY) {
            self.last_sample = Some(std::time::Instant::now());
            let rss = super::usage::usage(run, tick)?.rss;
            self.rss_at_outage.get_or_insert(rss);
            self.rss_max = self.rss_max.max(rss);
            let timeouts = nodewarden_harness::http::Timeouts {
                connect: std::time::Duration::from_secs(1),
                read: std::time::Duration::from_secs(2),
            };
            let page = tokio::task::spawn_blocking(move || nodewarden_harness::http::scrape(metrics, timeouts))
                .await
                .unwrap_or_default();
            self.queue_max =
                self.queue_max.max(nodewarden_harness::prometheus::sum(&page, "nodewarden_write_queue_depth"));
            self.wanted_max =
                self.wanted_max.max(nodewarden_harness::prometheus::sum(&page, "nodewarden_writes_wanted"));
            self.samples += 1;
        }
        for (node, added) in newly {
            let path = format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}");
            let list = api.json(http::Request::get(&path).body(Vec::new())?).await?.unwrap_or_default();
            for pod in list.get("items").and_then(Value::as_array).into_iter().flatten() {
                if let Some((path, p)) = zone_pod(pod, &node) {
                    self.pods.insert(path, p);
                }
            }
            self.tainted.insert(node, added);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(tolerations: Value) -> Value {
        json!({"metadata": {"namespace": "d", "name": "p"}, "spec": {"tolerations": tolerations}})
    }

    #[test]
    fn tolerations_are_read_as_upstream_reads_them() {
        let unreachable = |s: Option<i64>| {
            let mut t = json!({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"});
            if let Some(s) = s {
                t["tolerationSeconds"] = json!(s);
            }
            t
        };
        let not_ready = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5});
        assert_eq!(unreachable_toleration(&pod(json!([]))), Tolerated::Not);
        assert_eq!(unreachable_toleration(&json!({"spec": {}})), Tolerated::Not);
        assert_eq!(unreachable_toleration(&pod(json!([not_ready.clone()]))), Tolerated::Not);
        assert_eq!(unreachable_toleration(&pod(json!([not_ready, unreachable(Some(300))]))), Tolerated::For(300));
        assert_eq!(unreachable_toleration(&pod(json!([unreachable(None)]))), Tolerated::Forever);
        assert_eq!(unreachable_toleration(&pod(json!([unreachable(None), unreachable(Some(60))]))), Tolerated::For(60));
        assert_eq!(unreachable_toleration(&pod(json!([unreachable(Some(-3))]))), Tolerated::For(0));
        // Tolerate everything; a NoSchedule-only one does not count; Equal
        // needs the key named and no value.
        assert_eq!(unreachable_toleration(&pod(json!([{"operator": "Exists"}]))), Tolerated::Forever);
        assert_eq!(
            unreachable_toleration(&pod(json!([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoSchedule"}]))),
            Tolerated::Not
        );
        assert_eq!(
            unreachable_toleration(&pod(json!([{"key": UNREACHABLE, "effect": "NoExecute", "tolerationSeconds": 9}]))),
            Tolerated::For(9)
        );
        assert_eq!(
            unreachable_toleration(&pod(json!([{"key": UNREACHABLE, "value": "x", "effect": "NoExecute"}]))),
            Tolerated::Not
        );
    }

    #[test]
    fn evictions_are_judged_against_taints_and_tolerations() {
        const S: i64 = 1_000_000_000;
        let path = |n: &str| format!("/api/v1/namespaces/d/pods/{n}");
        let pods: HashMap<String, ZonePod> = [
            ("due", "a", Tolerated::For(30)),
            ("early", "a", Tolerated::For(30)),
            ("late", "a", Tolerated::For(600)),
            ("ds", "a", Tolerated::Forever),
            ("untainted", "b", Tolerated::For(30)),
            ("due-kept", "a", Tolerated::For(60)),
        ]
        .into_iter()
        .map(|(p, n, t)| (path(p), ZonePod { node: n.into(), tolerated: t }))
        .collect();
        let tainted = HashMap::from([("a".to_string(), 100 * S)]);
        let req =
            |at: i64, m: &str, p: &str, code: u16| Request { unix: at * S, method: m.into(), path: p.into(), code };
        let requests = vec![
            req(100, "GET", "/api/v1/nodes/a", 200),
            req(131, "PATCH", &format!("{}/status", path("due")), 200),
            req(131, "DELETE", &path("due"), 200),
            req(132, "DELETE", &path("due"), 200),
            req(120, "DELETE", &path("early"), 200),
            req(140, "DELETE", &path("ds"), 200),
            req(150, "DELETE", &path("other"), 200),
            req(150, "DELETE", &path("late"), 409),
            req(210, "DELETE", &path("due-kept"), 200),
        ];
        let e = judge(&pods, &tainted, &requests, 200 * S);
        assert_eq!((e.before_heal, e.after_heal), (4, 1));
        // due and early (30 s after 100), due-kept (60 s); not late (600 s),
        // ds (for ever) nor untainted.
        assert_eq!(e.due_before_heal, 3);
        assert_eq!(e.early, vec![path("early")]);
        assert_eq!(e.unlisted, vec![path("other")]);
        assert_eq!(e.tolerated, vec![path("ds")]);
        assert_eq!(e.duplicated, 1);
        let mut per_pod = e.requests_per_pod.clone();
        per_pod.sort_by(f64::total_cmp);
        assert_eq!(per_pod, vec![1.0, 1.0, 1.0, 1.0, 3.0]);
        assert_eq!(e.problems().len(), 4);
        assert!(judge(&pods, &tainted, &[], 200 * S).problems().is_empty());
    }

    #[test]
    fn the_zone_is_read_from_the_node_watch() {
        const S: i64 = 1_000_000_000;
        let zone: BTreeMap<String, i64> = ["a", "b", "c"].map(|n| (n.to_string(), 0)).into();
        let seen = |unknown: Option<i64>, tainted: Option<i64>| NodeSeen {
            unknown: unknown.map(|u| (u * S, u * S)),
            tainted: tainted.map(|t| (t * S, t * S + S)),
            ..NodeSeen::default()
        };
        let mut book = HashMap::from([
            ("a".to_string(), seen(Some(45), Some(46))),
            ("b".to_string(), seen(Some(50), Some(56))),
            ("c".to_string(), seen(None, None)),
            ("elsewhere".to_string(), seen(Some(10), Some(10))),
        ]);
        let z = ZoneSeen::of(&zone, &book, 0);
        assert_eq!((z.nodes, z.unknown.clone(), z.tainted.clone()), (3, vec![45.0, 50.0], vec![46.0, 56.0]));
        assert_eq!((z.all_unknown(), z.all_tainted(), z.taint_rate()), (None, None, Some(0.1)));
        book.insert("c".into(), seen(Some(48), Some(66)));
        let z = ZoneSeen::of(&zone, &book, 0);
        assert_eq!((z.all_unknown(), z.all_tainted(), z.taint_rate()), (Some(50.0), Some(66.0), Some(0.1)));
    }
}
