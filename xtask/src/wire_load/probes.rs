//! The served API's responsiveness after the incident: how late node
//! Lease renewals arrive on a watch (the lag a controller's heartbeat
//! reading suffers), and how long a full paged list of the pods takes.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::StreamExt;
use kube::core::params::ListParams;
use nodewarden_harness::process::unix_nanos;
use serde_json::Value;

use super::api::{Api, NODE_LEASES, PAGE};
use super::nodes::time_at;
use super::round3;

/// The age of the node Lease in one watch event line when it arrived at
/// `arrival`, in seconds; `None` for other events.
pub(super) fn lease_event_lag(line: &str, arrival: i64) -> Option<f64> {
    let event: Value = serde_json::from_str(line).ok()?;
    if !matches!(event.get("type")?.as_str()?, "ADDED" | "MODIFIED") {
        return None;
    }
    Some((arrival - time_at(&event["object"], "/spec/renewTime")?) as f64 / 1e9)
}

/// Node Lease renewals seen on a watch.
pub(super) struct LeaseLag {
    pub(super) events: usize,
    pub(super) lags: Vec<f64>,
    pub(super) window: f64,
}

/// Watches the node Leases for `window` from now: for each renewal, how
/// long after its renewTime it arrived.
pub(super) async fn lease_lag(api: &Api, window: Duration) -> Result<LeaseLag> {
    let req = kube::core::Request::new(NODE_LEASES).list(&ListParams::default().limit(1))?;
    let list = api.json(req).await?.context("node Leases are not served")?;
    let rv =
        list.pointer("/metadata/resourceVersion").and_then(Value::as_str).context("a list without resourceVersion")?;
    let began = Instant::now();
    let mut lines = api.watch(NODE_LEASES, rv, u32::try_from(window.as_secs()).unwrap_or(u32::MAX)).await?;
    let until = tokio::time::Instant::now() + window + Duration::from_secs(10);
    let mut lag = LeaseLag { events: 0, lags: Vec::new(), window: 0.0 };
    while let Ok(Some(line)) = tokio::time::timeout_at(until, lines.next()).await {
        let line = line.context("reading the Lease watch")?;
        if let Some(l) = lease_event_lag(&line, unix_nanos()) {
            lag.events += 1;
            lag.lags.push(l);
        }
    }
    lag.window = began.elapsed().as_secs_f64();
    Ok(lag)
}

/// What a full paged list of the pods took.
pub(super) struct Listed {
    pub(super) pods: u64,
    pub(super) pages: u64,
    pub(super) bytes: u64,
    pub(super) seconds: f64,
}

/// The `metadata` of a list page, read from what comes before its
/// `items` (the served API writes it first), so the items need not be
/// decoded; `None` when it is not there.
pub(super) fn page_head(text: &str) -> Option<Value> {
    let items = text.find("\"items\":")?;
    let head = text[..items].trim_end().strip_suffix(',')?;
    let v: Value = serde_json::from_str(&format!("{head}}}")).ok()?;
    v.get("metadata").cloned()
}

/// Lists every pod, [`PAGE`] at a time, with continue tokens. The first
/// page is decoded (its items and `remainingItemCount` give the total);
/// the others only up to their items.
pub(super) async fn list_pods(api: &Api) -> Result<Listed> {
    let began = Instant::now();
    let mut params = ListParams::default().limit(PAGE);
    let mut listed = Listed { pods: 0, pages: 0, bytes: 0, seconds: 0.0 };
    let mut total: Option<u64> = None;
    loop {
        let req = kube::core::Request::new("/api/v1/pods").list(&params)?;
        let text = api.get(req).await?.context("/api/v1/pods is not served")?;
        listed.pages += 1;
        listed.bytes += text.len() as u64;
        let head = if total.is_some() { page_head(&text) } else { None };
        let meta = match head {
            Some(m) => m,
            None => {
                let page: Value = serde_json::from_str(&text).context("a pod list page is not JSON")?;
                let n = page.get("items").and_then(Value::as_array).map_or(0, Vec::len) as u64;
                listed.pods += n;
                if listed.pages == 1 {
                    total = page.pointer("/metadata/remainingItemCount").and_then(Value::as_u64).map(|r| r + n);
                }
                page.get("metadata").cloned().unwrap_or_default()
            }
        };
        match meta.get("continue").and_then(Value::as_str).filter(|c| !c.is_empty()) {
            Some(c) => params = params.continue_token(c),
            None => break,
        }
    }
    listed.seconds = round3(began.elapsed().as_secs_f64());
    listed.pods = total.unwrap_or(listed.pods);
    Ok(listed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::wire_load::test_clock::{T0, at};

    #[test]
    fn lease_lag_is_arrival_minus_renew_time() {
        let event = |kind: &str| {
            json!({"type": kind, "object": {"metadata": {"name": "n"}, "spec": {"renewTime": at(1.25)}}}).to_string()
        };
        assert_eq!(lease_event_lag(&event("MODIFIED"), T0 + 1_300_000_000), Some(0.05));
        assert_eq!(lease_event_lag(&event("BOOKMARK"), T0), None);
        assert_eq!(lease_event_lag("{", T0), None);
    }

    #[test]
    fn a_page_is_read_up_to_its_items() {
        let page = r#"{"apiVersion":"v1","kind":"PodList","metadata":{"continue":"abc","remainingItemCount":3},"items":[{"metadata":{"name":"x","items":1}}]}"#;
        assert_eq!(page_head(page).and_then(|m| m.get("continue").cloned()), Some(json!("abc")));
        let items_first = r#"{"items":[],"metadata":{"continue":"abc"}}"#;
        assert_eq!(page_head(items_first), None);
    }
}
