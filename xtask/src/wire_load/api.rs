//! The served API as the harness reads it: kube's client with the
//! kubeconfig's CA and token, as `nodewarden run` connects, and a time
//! limit on every request so a stalled server fails the run instead of
//! hanging it.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::io::AsyncBufReadExt;
use kube::core::params::{GetParams, ListParams, WatchParams};
use serde_json::Value;

/// Any one request's answer (a page, a Lease).
pub(super) const REQUEST_LIMIT: Duration = Duration::from_secs(120);

/// Items a list page asks for (kubectl's chunk size).
pub(super) const PAGE: u32 = 500;

/// The leader election Lease (`--leader-elect-resource-*` defaults).
pub(super) const ELECTION_LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodewarden";

pub(super) const NODE_LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

/// The served API, through kube's client with the kubeconfig's CA and
/// token.
pub(super) struct Api {
    pub(super) client: kube::Client,
}

impl Api {
    pub(super) async fn connect(kubeconfig: &Path) -> Result<Api> {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .with_context(|| format!("reading the kubeconfig {}", kubeconfig.display()))?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("the kubeconfig {}", kubeconfig.display()))?;
        // Watches here end within 30 s (`timeoutSeconds`) and are opened
        // again; a request silent for a minute has stalled.
        config.read_timeout = Some(Duration::from_secs(60));
        config.connect_timeout = Some(Duration::from_secs(5));
        Ok(Api { client: kube::Client::try_from(config).context("kube client")? })
    }

    /// The body of a GET; `None` on 404.
    pub(super) async fn get(&self, req: http::Request<Vec<u8>>) -> Result<Option<String>> {
        let uri = req.uri().to_string();
        match tokio::time::timeout(REQUEST_LIMIT, self.client.request_text(req)).await {
            Err(_) => bail!("GET {uri}: no answer within {} s", REQUEST_LIMIT.as_secs()),
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => Ok(None),
            Ok(Err(e)) => Err(anyhow!("GET {uri}: {e}")),
            Ok(Ok(text)) => Ok(Some(text)),
        }
    }

    pub(super) async fn json(&self, req: http::Request<Vec<u8>>) -> Result<Option<Value>> {
        let uri = req.uri().to_string();
        match self.get(req).await? {
            None => Ok(None),
            Some(t) => serde_json::from_str(&t).map(Some).map_err(|e| anyhow!("GET {uri}: not JSON: {e}")),
        }
    }

    /// One object by its path; `None` when there is none.
    pub(super) async fn object(&self, path: &str) -> Result<Option<Value>> {
        let (dir, name) = path.rsplit_once('/').with_context(|| format!("{path} names no object"))?;
        self.json(kube::core::Request::new(dir).get(name, &GetParams::default())?).await
    }

    /// Every item of a collection, page by page, each given to `take` as
    /// its page arrives (at 100k nodes, the whole list decoded at once
    /// would be gigabytes); the list's resourceVersion.
    pub(super) async fn list(&self, path: &str, mut take: impl FnMut(&Value)) -> Result<String> {
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let req = kube::core::Request::new(path).list(&params)?;
            let page = self.json(req).await?.with_context(|| format!("{path}: not served (404)"))?;
            page.get("items").and_then(Value::as_array).into_iter().flatten().for_each(&mut take);
            let rv = page.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
            match page.pointer("/metadata/continue").and_then(Value::as_str).filter(|c| !c.is_empty()) {
                Some(c) => params = params.continue_token(c),
                None => return Ok(rv.to_string()),
            }
        }
    }

    /// A watch from `rv`, ended by the server after `timeout` seconds;
    /// its lines as they come.
    pub(super) async fn watch(
        &self,
        path: &str,
        rv: &str,
        timeout: u32,
    ) -> Result<impl futures_util::Stream<Item = std::io::Result<String>> + Unpin + use<>> {
        let req = kube::core::Request::new(path).watch(&WatchParams::default().timeout(timeout), rv)?;
        let uri = req.uri().to_string();
        let body = tokio::time::timeout(REQUEST_LIMIT, self.client.request_stream(req))
            .await
            .map_err(|_| anyhow!("watch {uri}: no answer within {} s", REQUEST_LIMIT.as_secs()))?
            .map_err(|e| anyhow!("watch {uri}: {e}"))?;
        Ok(Box::pin(body.lines()))
    }
}
