//! The byte stream to the bridge: plain TCP, or TLS trusting a given CA.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::CertificateDer;

use super::error::ClientError;

/// A duplex byte stream (TCP, TLS, or an in-memory pipe in tests).
pub trait Duplex: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Duplex for T {}

/// TLS settings: the bridge's certificate must chain to `ca_file`.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsOptions {
    pub ca_file: PathBuf,
    /// The name the certificate must carry; the host when not given.
    pub server_name: Option<String>,
}

/// Connects within `timeout`.
pub async fn connect(
    host: &str,
    port: u16,
    tls: Option<&TlsOptions>,
    timeout: Duration,
) -> Result<Box<dyn Duplex>, ClientError> {
    let tcp = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
        .await
        .map_err(|_| {
            ClientError::Transport(format!(
                "connecting to {host}:{port} took more than {} s",
                timeout.as_secs_f64()
            ))
        })?
        .map_err(|e| ClientError::Transport(format!("cannot connect to {host}:{port}: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let Some(tls) = tls else { return Ok(Box::new(tcp)) };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(&tls.ca_file)?));
    let name = tls.server_name.clone().unwrap_or_else(|| host.to_string());
    let server_name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|e| {
        ClientError::Usage(format!(
            "--server-name '{name}' is not a valid DNS name or IP address: {e}"
        ))
    })?;
    let stream = tokio::time::timeout(timeout, connector.connect(server_name, tcp))
        .await
        .map_err(|_| {
            ClientError::Transport(format!(
                "the TLS handshake with {host}:{port} took more than {} s",
                timeout.as_secs_f64()
            ))
        })?
        .map_err(|e| {
            ClientError::Transport(format!(
                "TLS handshake with {host}:{port} (as '{name}') failed: {e}"
            ))
        })?;
    Ok(Box::new(stream))
}

fn client_config(ca_file: &std::path::Path) -> Result<rustls::ClientConfig, ClientError> {
    let shown = ca_file.display();
    let file = std::fs::File::open(ca_file)
        .map_err(|e| ClientError::Usage(format!("--ca-file {shown}: {e}")))?;
    let certs = CertificateDer::pem_reader_iter(file)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ClientError::Usage(format!("--ca-file {shown} is not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(ClientError::Usage(format!("--ca-file {shown} holds no certificate")));
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| {
            ClientError::Usage(format!("--ca-file {shown}: unusable certificate: {e}"))
        })?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ClientError::Transport(format!("TLS protocol versions: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_connection_is_a_transport_error_naming_the_address() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let Err(error) = connect("127.0.0.1", port, None, Duration::from_secs(5)).await else {
            panic!("connected to a closed port")
        };
        assert!(
            matches!(&error, ClientError::Transport(m) if m.contains(&format!("127.0.0.1:{port}"))),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_missing_or_empty_ca_file_is_a_usage_error() {
        let tls = TlsOptions { ca_file: "/nonexistent/ca.pem".into(), server_name: None };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let Err(error) = connect("127.0.0.1", port, Some(&tls), Duration::from_secs(5)).await
        else {
            panic!("TLS without a CA")
        };
        assert!(
            matches!(&error, ClientError::Usage(m) if m.contains("--ca-file /nonexistent/ca.pem")),
            "{error}"
        );
        let empty = std::env::temp_dir().join(format!("aicc-empty-ca-{}.pem", std::process::id()));
        std::fs::write(&empty, "").unwrap();
        let tls = TlsOptions { ca_file: empty.clone(), server_name: None };
        let Err(error) = connect("127.0.0.1", port, Some(&tls), Duration::from_secs(5)).await
        else {
            panic!("TLS with an empty CA")
        };
        assert!(error.to_string().contains("holds no certificate"), "{error}");
        let _ = std::fs::remove_file(empty);
    }
}
