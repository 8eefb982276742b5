//! The served API over HTTPS with a bearer token (the default): only the
//! kubeconfig's holders get in, a client trusting another CA is refused at
//! the handshake, and plain HTTP stays available when asked for.

mod common;

use std::time::Duration;

use common::{OrFail, client, options, start};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodewarden_apiserver::{Security, secure_kubeconfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What kube-apiserver answers a request without valid credentials.
fn unauthorized() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
}

async fn config_of(kubeconfig: &str) -> kube::Config {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).or_fail("kubeconfig");
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.or_fail("config");
    config.read_timeout = Some(Duration::from_secs(10));
    config.connect_timeout = Some(Duration::from_secs(5));
    config
}

/// GET `path` with a client of `config`; (status, body).
async fn raw_get(config: kube::Config, path: &str) -> (u16, Value) {
    let c = kube::Client::try_from(config).or_fail("client");
    let req = hyper::Request::get(path).body(kube::client::Body::from(Vec::new())).or_fail("request");
    let resp = c.send(req).await.or_fail("send");
    let code = resp.status().as_u16();
    let body = resp.into_body().collect_bytes().await.or_fail("body");
    (code, serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into())))
}

/// Every error in `e`'s chain, joined.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_by_default_with_the_ca_and_token_in_the_kubeconfig() {
    let served = start(options(2, 1)).await;
    assert!(served.url().starts_with("https://127.0.0.1:"), "{}", served.url());
    let (ca, token) = (served.ca_pem().expect("a CA"), served.token().expect("a token"));
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----") && token.len() == 64);
    let kubeconfig = served.kubeconfig();
    assert!(
        kubeconfig.contains(&format!("    server: {}\n    certificate-authority-data: ", served.url()))
            && kubeconfig.contains(&format!("  user:\n    token: {token}\n"))
            && kubeconfig.contains("current-context: nodewarden-sim"),
        "{kubeconfig}"
    );
    let nodes = Api::<Node>::all(client(&served, false).await).list(&Default::default()).await.or_fail("list");
    assert_eq!(nodes.items.len(), 2);
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_a_wrong_one_gets_401_and_nothing_else() {
    let mut opts = options(2, 1);
    opts.server.record_requests = true;
    let served = start(opts).await;
    // The served CA, so TLS succeeds, but no credentials.
    let mut anonymous = common::config(&served).await;
    anonymous.auth_info = Default::default();
    // The same CA and a token of the right shape that is not the token.
    let wrong = config_of(&secure_kubeconfig(&served.url(), served.ca_pem().expect("CA"), &"0".repeat(64))).await;
    // Refused before fault injection: an outage of requests would
    // otherwise answer first.
    served.faults().inject(nodewarden_apiserver::ApiFault::Errors { rate: 1.0, code: 503 }, None);
    for (who, config) in [("no token", anonymous), ("a wrong token", wrong)] {
        for path in ["/api/v1/nodes", "/version", "/api", "/healthz"] {
            assert_eq!(raw_get(config.clone(), path).await, (401, unauthorized()), "{who}: {path}");
        }
    }
    // Unauthenticated requests never reach the (authorizer's) request log.
    assert!(served.requests().is_empty(), "{:?}", served.requests());
    served.faults().clear();
    let (code, body) = raw_get(common::config(&served).await, "/api/v1/nodes").await;
    assert_eq!((code, body["kind"].as_str()), (200, Some("NodeList")), "{body}");
    assert_eq!(served.requests().len(), 1);
    served.stop();
}

/// `--tls-san`: the certificate is valid for the extra names, and the
/// kubeconfig names the first; a name it does not carry is refused at
/// the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_names_are_in_the_certificate_and_the_kubeconfig_names_the_first() {
    let mut opts = options(1, 1);
    opts.server.tls_sans = vec!["sim.example.test".into(), "192.0.2.10".into()];
    let served = start(opts).await;
    let port = served.addr.port();
    let kubeconfig = served.kubeconfig();
    assert!(kubeconfig.contains(&format!("    server: https://sim.example.test:{port}\n")), "{kubeconfig}");
    // Reached on loopback, verified as the name a remote client uses.
    let as_name = |name: &str| {
        let kubeconfig = kubeconfig.clone();
        let name = name.to_string();
        async move {
            let mut config = config_of(&kubeconfig).await;
            config.cluster_url = served_url(port);
            config.tls_server_name = Some(name);
            config.default_retry = false;
            config
        }
    };
    let c = kube::Client::try_from(as_name("sim.example.test").await).or_fail("client");
    let nodes = Api::<Node>::all(c).list(&Default::default()).await.or_fail("list as sim.example.test");
    assert_eq!(nodes.items.len(), 1);
    let c = kube::Client::try_from(as_name("other.example.test").await).or_fail("client");
    let e = match Api::<Node>::all(c).list(&Default::default()).await {
        Ok(_) => panic!("a name the certificate does not carry got in"),
        Err(e) => chain(&e),
    };
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    served.stop();
}

fn served_url(port: u16) -> hyper::Uri {
    format!("https://127.0.0.1:{port}").parse().or_fail("url")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_another_ca_is_refused_at_the_handshake() {
    let served = start(options(1, 1)).await;
    let other = nodewarden_apiserver::testing::new_ca("another-ca").or_fail("a second CA");
    let kubeconfig = secure_kubeconfig(&served.url(), &other.pem(), served.token().expect("token"));
    let mut config = config_of(&kubeconfig).await;
    config.default_retry = false;
    let c = kube::Client::try_from(config).or_fail("client");
    let e = match Api::<Node>::all(c).list(&Default::default()).await {
        Ok(_) => panic!("a client trusting another CA got in"),
        Err(e) => chain(&e),
    };
    let lower = e.to_lowercase();
    assert!(lower.contains("certificate") || lower.contains("invalid peer"), "{e}");
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_when_asked_and_never_by_accident() {
    // HTTPS: a plain HTTP request gets no HTTP answer.
    let served = start(options(1, 1)).await;
    let reply = raw_http(served.addr).await;
    assert!(!reply.starts_with("HTTP/1.1 200"), "{reply}");
    served.stop();

    let mut opts = options(1, 1);
    opts.server.security = Security::PlainHttp;
    let served = start(opts).await;
    assert!(served.url().starts_with("http://127.0.0.1:"), "{}", served.url());
    assert_eq!((served.ca_pem(), served.token()), (None, None));
    let kubeconfig = served.kubeconfig();
    assert!(!kubeconfig.contains("certificate-authority-data") && kubeconfig.contains("  user: {}\n"), "{kubeconfig}");
    let reply = raw_http(served.addr).await;
    assert!(reply.starts_with("HTTP/1.1 200") && reply.contains("\"kind\":\"APIVersions\""), "{reply}");
    let nodes = Api::<Node>::all(client(&served, false).await).list(&Default::default()).await.or_fail("list");
    assert_eq!(nodes.items.len(), 1);
    served.stop();
}

/// `GET /api` in plain HTTP/1.1, without credentials; what came back.
async fn raw_http(addr: std::net::SocketAddr) -> String {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.or_fail("connect");
        let head =
            format!("GET /api HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n\r\n");
        s.write_all(head.as_bytes()).await.or_fail("write");
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw).await;
        String::from_utf8_lossy(&raw).into_owned()
    };
    tokio::time::timeout(Duration::from_secs(15), exchange).await.or_fail("timed out")
}
