//! HTTPS and a bearer token for the served API.
//!
//! The served cluster can be changed by anyone who reaches it, so by
//! default it is served as a real API server is: over TLS, with a serving
//! certificate signed by a CA of its own, and only to clients that present
//! its bearer token. Both are made afresh at every start and never written
//! anywhere but the kubeconfig ([`crate::Served::kubeconfig`]): whoever
//! holds that file can use the cluster, and nobody else can. Plain HTTP
//! without authentication stays available for tools that speak raw HTTP
//! ([`Security::PlainHttp`]).
//!
//! The crypto is ring's, through rustls' own provider, named explicitly:
//! nothing here depends on (or installs) a process-wide default provider.
//!
//! Invariant: over HTTPS, no request is served without the token.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use hyper::header::HeaderValue;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// How the API is served: HTTPS with a token unless a tool that speaks
/// raw HTTP needs otherwise, since anyone who reaches the served cluster
/// can change it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Security {
    /// HTTPS with a CA, a serving certificate and a bearer token made at
    /// start; every request must carry the token (401 otherwise). The
    /// default: a served cluster is writable by whoever reaches it.
    #[default]
    Https,
    /// Plain HTTP and no authentication, for tests and tools that talk raw
    /// HTTP; only safe on loopback.
    PlainHttp,
}

/// The common name of the CA made at start.
pub const CA_COMMON_NAME: &str = "nodewarden-sim-ca";

/// Why the TLS material could not be made; serving then fails rather
/// than fall back to plain HTTP unasked.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate or key generation failed.
    #[error("cannot make the certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("cannot set up TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// No randomness for the token.
    #[error("no randomness for the bearer token")]
    Random,
}

/// What a served cluster over HTTPS holds: its CA (for clients), the
/// acceptor with the serving certificate, and the bearer token.
pub struct Credentials {
    ca_pem: String,
    token: String,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Credentials {
    /// Never prints the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("ca_pem", &self.ca_pem).field("token", &"<redacted>").finish()
    }
}

/// A fresh self-signed CA named `common_name`: a signer, with its
/// certificate (`.pem()`). Tests reach it through `crate::testing` to
/// make a second, unrelated CA.
pub fn new_ca(common_name: &str) -> Result<CertifiedIssuer<'static, KeyPair>, TlsError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    Ok(CertifiedIssuer::self_signed(params, KeyPair::generate()?)?)
}

/// The names the serving certificate is valid for: `localhost`, both
/// loopback addresses, the address actually bound (even `0.0.0.0`, so a
/// kubeconfig naming it verifies) and `extra` (`--tls-san`: the names and
/// addresses clients on other machines reach the host by).
pub fn subject_alt_names(addr: SocketAddr, extra: &[String]) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        IpAddr::V4(Ipv4Addr::LOCALHOST).to_string(),
        IpAddr::V6(Ipv6Addr::LOCALHOST).to_string(),
    ];
    for name in std::iter::once(addr.ip().to_string()).chain(extra.iter().cloned()) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Whether `name` can be a subject alternative name: an IP address, or a
/// DNS name (labels of letters, digits and inner hyphens, at most 63
/// bytes each and 253 in all; a leading `*.` for a wildcard). `Err` says
/// what is wrong, for the flag's error.
pub fn check_san(name: &str) -> Result<(), String> {
    if name.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let host = name.strip_prefix("*.").unwrap_or(name);
    if host.is_empty() || name.len() > 253 {
        return Err(format!("{name:?} is neither an IP address nor a DNS name"));
    }
    for label in host.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "{name:?} is neither an IP address nor a DNS name (label {label:?}: letters, digits and inner hyphens, 1 to 63 of them)"
            ));
        }
    }
    Ok(())
}

impl Credentials {
    /// A new CA, a serving certificate for `addr` (and the `extra` names,
    /// [`subject_alt_names`]) signed by it, and a random token (32 bytes
    /// from ring's system randomness, in hex).
    pub fn generate(addr: SocketAddr, extra: &[String]) -> Result<Credentials, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let ca = new_ca(CA_COMMON_NAME)?;
        let mut params = CertificateParams::new(subject_alt_names(addr, extra))?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, "nodewarden-sim");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &*ca)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)?;
        // The server speaks HTTP/1.1 only: a client offering h2 falls back.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut bytes = [0u8; 32];
        provider.secure_random.fill(&mut bytes).map_err(|_| TlsError::Random)?;
        let token = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Credentials { ca_pem: ca.pem(), token, acceptor: TlsAcceptor::from(Arc::new(config)) })
    }

    /// The CA's certificate (PEM), for clients to trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The bearer token every request must carry.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The acceptor for incoming connections.
    pub fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }

    /// Whether `authorization` is `Bearer <token>`, compared in constant
    /// time (the scheme case-insensitively, as kube-apiserver does), so the
    /// time of a refusal tells nothing about the token.
    pub fn authorized(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(value) = authorization.map(HeaderValue::as_bytes) else { return false };
        let Some((scheme, given)) = value.split_at_checked(7) else { return false };
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return false;
        }
        constant_time_eq(given.trim_ascii(), self.token.as_bytes())
    }
}

/// Equal bytes, in a time that depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_is_authorized() {
        let c = Credentials::generate("127.0.0.1:6443".parse().expect("addr"), &[]).expect("credentials");
        assert_eq!(c.token().len(), 64);
        assert!(c.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let header = |s: &str| HeaderValue::from_str(s).expect("header");
        assert!(c.authorized(Some(&header(&format!("Bearer {}", c.token())))));
        assert!(c.authorized(Some(&header(&format!("bearer {}", c.token())))));
        assert!(!c.authorized(None));
        assert!(!c.authorized(Some(&header("Bearer"))));
        assert!(!c.authorized(Some(&header(&format!("Basic {}", c.token())))));
        assert!(!c.authorized(Some(&header(&format!("Bearer {}x", c.token())))));
        assert!(!c.authorized(Some(&header(&format!("Bearer {}", &c.token()[1..])))));
        let other = Credentials::generate("127.0.0.1:6443".parse().expect("addr"), &[]).expect("credentials");
        assert_ne!(other.token(), c.token());
        assert_ne!(other.ca_pem(), c.ca_pem());
    }

    #[test]
    fn the_certificate_names_the_bound_address() {
        assert_eq!(subject_alt_names("[::1]:1".parse().expect("addr"), &[]), ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(
            subject_alt_names("10.0.0.7:1".parse().expect("addr"), &[]),
            ["localhost", "127.0.0.1", "::1", "10.0.0.7"]
        );
        let extra = ["sim.example.com".to_string(), "10.0.0.7".to_string(), "192.0.2.1".to_string()];
        assert_eq!(
            subject_alt_names("0.0.0.0:1".parse().expect("addr"), &extra),
            ["localhost", "127.0.0.1", "::1", "0.0.0.0", "sim.example.com", "10.0.0.7", "192.0.2.1"]
        );
    }

    #[test]
    fn a_san_is_an_address_or_a_dns_name() {
        for good in ["sim.example.com", "localhost", "*.example.com", "10.1.2.3", "fd00::1", "a-b.c"] {
            assert_eq!(check_san(good), Ok(()), "{good}");
        }
        for bad in ["", "-a.com", "a..com", "a_b.com", "http://a.com", "a.com:6443", "*.", "a b"] {
            let err = check_san(bad).expect_err(bad);
            assert!(err.contains("neither an IP address nor a DNS name"), "{err}");
        }
    }
}
