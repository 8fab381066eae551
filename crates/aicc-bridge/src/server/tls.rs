//! Optional TLS for remote use (AICC section 12): a rustls acceptor from a
//! PEM certificate chain and private key.
use std::sync::Arc;

use anyhow::Context as _;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

pub fn acceptor(cert_file: &str, key_file: &str) -> anyhow::Result<TlsAcceptor> {
    // The file iterators report a failure to open apart from one to read.
    let certs = CertificateDer::pem_file_iter(cert_file)
        .with_context(|| format!("opening TLS certificate {cert_file}"))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading TLS certificate {cert_file}"))?;
    anyhow::ensure!(!certs.is_empty(), "no certificate found in {cert_file}");
    let key = PrivateKeyDer::pem_file_iter(key_file)
        .with_context(|| format!("opening TLS key {key_file}"))?
        .next()
        .with_context(|| format!("no private key found in {key_file}"))?
        .with_context(|| format!("reading TLS key {key_file}"))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS protocol versions")?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .context("TLS certificate and key do not match")?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}
