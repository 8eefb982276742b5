//! nodewarden's adapter to a real Kubernetes API server (kube-rs).
//!
//! It makes no lifecycle decision. It turns watched objects into the
//! engine's [`Observation`](nodewarden_engine::Observation)s as they are
//! decoded, leniently ([`trimmed`], with `nodewarden_objects`'s readings, [`watch`]), runs the one control loop
//! ([`nodewarden_controller::Controller`]) on a thread of its own that wakes
//! on an observation or at the engine's next due time ([`engine_thread`]),
//! and carries the actions the safety interlock let through out as API
//! calls with client-side rate limits, retries and preconditions
//! ([`writer`]), answering each with `WriteFinished` and the object's fresh
//! state through the same channel the watchers use.
//!
//! ```text
//!  watchers (tokio) --Input--> crossbeam channel --> engine thread: Controller::step
//!        ^                           ^                        | actions (judged)
//!        | API                       | WriteFinished + state  v
//!        +------------------------ writer (tokio) <-- KubeApi (ClusterApi)
//! ```

/// `kube::Resource` for a wrapper `$t<K>` of a k8s-openapi kind `K` that
/// keeps its own `metadata`: the kind's names and path, the wrapper's
/// metadata. The watches' [`Trimmed`] and the writer's `Whole` are both
/// such wrappers (each decodes objects its own way).
macro_rules! kind_of {
    ($t:ident) => {
        impl<K: k8s_openapi::Resource> kube::Resource for $t<K> {
            type DynamicType = ();
            type Scope = K::Scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed(K::KIND)
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed(K::GROUP)
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed(K::VERSION)
            }
            fn api_version(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed(K::API_VERSION)
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed(K::URL_PATH_SEGMENT)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use kind_of;

mod engine_thread;
mod input;
mod leader;
mod limiter;
mod prefetch;
mod probe;
mod runner;
mod shadow;
mod trimmed;
mod watch;
mod whole;
mod write_log;
mod writer;

pub use engine_thread::{EngineClock, EngineThread, Health};
pub use input::{Input, Watched};
pub use leader::{ElectionConfig, ElectionError, Fence, Leadership, campaign, process_identity};
pub use nodewarden_controller::write_order::{DEFAULT_BURST, DEFAULT_QPS};
pub use nodewarden_objects::Detail;
pub use runner::{ProbeClient, RunOptions, Running, start};
pub use shadow::{ShadowBoard, ShadowFeed};
pub use trimmed::{Readable, Scheduled, Trimmed};
pub use watch::{Watches, spawn_watchers};
pub use writer::{DryRunApi, KubeApi, WRITE_LAG_METRIC, WriterOptions, spawn_writer};

/// A client configuration made fit for the controller: kube-rs's own retry
/// of 429, 503 and 504 answers (on by default since kube 3, up to 15
/// attempts, each waiting out the answer's `Retry-After`) is turned off.
/// The writer retries by itself, each attempt under the client rate limit
/// and judged again just before it goes out; a retry hidden below it would
/// send a write that may no longer be true, outside the rate limit. And a
/// Lease renewal must not sit out a `Retry-After` inside one attempt: it
/// tries again on its own schedule, well within the renew deadline.
pub fn controller_config(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config
}

/// The client `nodewarden run` watches and writes through: kube's, from
/// `config`, with each paged list's next page requested while the watcher
/// decodes the current one ([`prefetch`]). Needs a tokio runtime.
pub fn controller_client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    let builder = kube::client::ClientBuilder::try_from(controller_config(config))?;
    Ok(builder.with_layer(&prefetch::ListPrefetch).build())
}

/// Why a request never got an answer from the API server, in the few words
/// an operator acts on (`connection refused`, `invalid peer certificate:
/// UnknownIssuer`, `failed to lookup address information: ...`); `None`
/// when the server did answer (an API status, or a body that would not
/// decode), since then it was reached and the answer says what is wrong.
///
/// kube-rs reports a refused connection as `client error (Connect)`: the
/// words that matter sit at the end of the error's source chain.
pub fn unreachable_cause(e: &kube::Error) -> Option<String> {
    match e {
        kube::Error::Api(_) | kube::Error::SerdeError(_) | kube::Error::FromUtf8(_) => None,
        e => Some(root_cause(e)),
    }
}

/// The innermost error of `e`'s source chain, without the OS error number
/// (`No such file or directory (os error 2)` reads `no such file or
/// directory`) and starting in lower case, to follow a colon.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    let text = inner.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => &text[..i],
        _ => text.as_str(),
    };
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        // `Connection refused`, but not `TLS handshake` or `IO error`.
        (Some(first), Some(second)) if first.is_uppercase() && second.is_lowercase() => {
            first.to_lowercase().chain(text[first.len_utf8()..].chars()).collect()
        }
        _ => text.to_string(),
    }
}

/// The configuration's API server URL as people write it: kube-rs keeps a
/// trailing `/` on a bare host (`https://10.0.0.1:6443/`).
pub fn server_url(config: &kube::Config) -> String {
    config.cluster_url.to_string().trim_end_matches('/').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_cause_drops_the_os_error_number_and_capital() {
        let io = std::io::Error::from_raw_os_error(2);
        assert_eq!(root_cause(&io), "no such file or directory");
        assert_eq!(root_cause(&std::io::Error::other("TLS handshake eof")), "TLS handshake eof");
        let config = kube::Config::new("https://10.0.0.1:6443".parse().expect("uri"));
        assert_eq!(server_url(&config), "https://10.0.0.1:6443");
    }

    /// A port nobody listens on answers with a refused connection, which
    /// kube-rs itself only calls `client error (Connect)`.
    #[tokio::test]
    async fn a_refused_connection_reads_connection_refused() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().expect("uri"));
        config.accept_invalid_certs = true;
        let client = kube::Client::try_from(config).expect("client");
        let e = client.apiserver_version().await.expect_err("nothing listens there");
        assert_eq!(unreachable_cause(&e).as_deref(), Some("connection refused"), "{e:?}");
        let answered = kube::Error::Api(Box::new(kube::core::Status::failure("forbidden", "Forbidden").with_code(403)));
        assert_eq!(unreachable_cause(&answered), None);
    }
}
