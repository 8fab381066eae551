//! One connection to the bridge under test (TCP, or TLS through rustls as
//! `src/server/tls.rs` serves it): a reader task that splits what arrives
//! into lines of bounded length, and the writing half.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, WriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::CertificateDer;

/// Where scenarios run: host, port and, for TLS, how to check the server.
#[derive(Clone)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub tls: Option<TlsClient>,
}

#[derive(Clone)]
pub struct TlsClient {
    pub connector: tokio_rustls::TlsConnector,
    pub server_name: rustls::pki_types::ServerName<'static>,
}

/// Where the system's trusted certificates usually are (Debian, Ubuntu).
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

impl Endpoint {
    pub fn describe(&self) -> String {
        format!("{}://{}:{}", if self.tls.is_some() { "tls" } else { "tcp" }, self.host, self.port)
    }
}

/// Why the runner's TLS client cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// The CA file cannot be opened.
    #[error("opening CA file {}: {source}", file.display())]
    OpenCa { file: PathBuf, source: std::io::Error },
    /// The CA file is not PEM (or cannot be read).
    #[error("reading CA file {}: {source}", file.display())]
    ReadCa { file: PathBuf, source: rustls::pki_types::pem::Error },
    /// A certificate of the CA file cannot be trusted as a root.
    #[error("CA file {}: {source}", file.display())]
    UnusableCa { file: PathBuf, source: rustls::Error },
    /// The CA file holds no certificate.
    #[error("no certificate found in CA file {}", file.display())]
    NoCertificate { file: PathBuf },
    /// The TLS provider refuses the protocol versions.
    #[error("TLS protocol versions: {0}")]
    ProtocolVersions(#[source] rustls::Error),
    /// `--server-name` is not a DNS name or an IP address.
    #[error("--server-name '{name}': {source}")]
    ServerName { name: String, source: rustls::pki_types::InvalidDnsNameError },
}

/// Why a connection to the bridge under test could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The TCP connection failed.
    #[error("connecting to {endpoint}: {source}")]
    Tcp { endpoint: String, source: std::io::Error },
    /// The TLS handshake failed (e.g. an untrusted certificate or another name).
    #[error("TLS handshake with {endpoint}: {source}")]
    TlsHandshake { endpoint: String, source: std::io::Error },
}

/// A TLS client trusting the certificates of `ca_file` (PEM), checking
/// that the server's certificate names `server_name`.
pub fn tls_client(ca_file: &Path, server_name: &str) -> Result<TlsClient, TlsSetupError> {
    let file = ca_file.to_path_buf();
    let pem = std::fs::File::open(ca_file)
        .map_err(|source| TlsSetupError::OpenCa { file: file.clone(), source })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_reader_iter(pem) {
        let cert = cert.map_err(|source| TlsSetupError::ReadCa { file: file.clone(), source })?;
        roots
            .add(cert)
            .map_err(|source| TlsSetupError::UnusableCa { file: file.clone(), source })?;
    }
    if roots.is_empty() {
        return Err(TlsSetupError::NoCertificate { file });
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(TlsSetupError::ProtocolVersions)?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let server_name = rustls::pki_types::ServerName::try_from(server_name.to_string())
        .map_err(|source| TlsSetupError::ServerName { name: server_name.to_string(), source })?;
    Ok(TlsClient { connector: tokio_rustls::TlsConnector::from(Arc::new(config)), server_name })
}

/// What a connection's reader reports.
#[derive(Debug)]
pub enum Incoming {
    /// A complete line, without its LF.
    Line(Vec<u8>),
    /// A line longer than the limit arrived; nothing more is read.
    Oversized { limit_bytes: usize },
    /// The bridge closed the connection (or it failed); `partial_bytes` of
    /// an unterminated last line were left over.
    Closed { error: Option<String>, partial_bytes: usize },
}

/// An [`Incoming`] tagged with the connection it came from.
#[derive(Debug)]
pub struct Tagged {
    pub conn_id: u64,
    pub incoming: Incoming,
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

pub struct Connection {
    pub id: u64,
    writer: WriteHalf<Box<dyn Stream>>,
    reader: JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The read half goes with the task: the socket closes.
        self.reader.abort();
    }
}

impl Connection {
    /// Connects (and completes the TLS handshake); lines go to `sink`.
    pub async fn open(
        endpoint: &Endpoint,
        id: u64,
        max_line_bytes: usize,
        sink: mpsc::Sender<Tagged>,
    ) -> Result<Self, ConnectError> {
        let tcp = tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port))
            .await
            .map_err(|source| ConnectError::Tcp { endpoint: endpoint.describe(), source })?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = match &endpoint.tls {
            None => Box::new(tcp),
            Some(tls) => {
                Box::new(tls.connector.connect(tls.server_name.clone(), tcp).await.map_err(
                    |source| ConnectError::TlsHandshake { endpoint: endpoint.describe(), source },
                )?)
            }
        };
        let (read_half, writer) = tokio::io::split(stream);
        let reader = tokio::spawn(read_lines(read_half, id, max_line_bytes, sink));
        Ok(Self { id, writer, reader })
    }

    /// Writes `bytes` and a LF, in one write.
    pub async fn write_line(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut line = Vec::with_capacity(bytes.len() + 1);
        line.extend_from_slice(bytes);
        line.push(b'\n');
        self.writer.write_all(&line).await?;
        self.writer.flush().await
    }

    /// Ends the runner's side (TCP FIN, after a TLS close_notify); the
    /// reader keeps going until the bridge closes its side.
    pub async fn shutdown(&mut self) -> std::io::Result<()> {
        self.writer.shutdown().await
    }
}

/// Reads lines of at most `max_line_bytes` until EOF, an error or an
/// oversized line; each goes to `sink` (which bounds what is buffered).
async fn read_lines<R: AsyncRead + Unpin>(
    read_half: R,
    conn_id: u64,
    max_line_bytes: usize,
    sink: mpsc::Sender<Tagged>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, read_half);
    let mut line = Vec::new();
    let incoming = loop {
        let available = match reader.fill_buf().await {
            Ok([]) => break Incoming::Closed { error: None, partial_bytes: line.len() },
            Ok(bytes) => bytes,
            Err(error) => {
                break Incoming::Closed {
                    error: Some(error.to_string()),
                    partial_bytes: line.len(),
                }
            }
        };
        match available.iter().position(|&b| b == b'\n') {
            Some(end) => {
                if line.len() + end > max_line_bytes {
                    break Incoming::Oversized { limit_bytes: max_line_bytes };
                }
                line.extend_from_slice(&available[..end]);
                reader.consume(end + 1);
                if sink
                    .send(Tagged { conn_id, incoming: Incoming::Line(std::mem::take(&mut line)) })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            None => {
                let taken = available.len();
                if line.len() + taken > max_line_bytes {
                    break Incoming::Oversized { limit_bytes: max_line_bytes };
                }
                line.extend_from_slice(available);
                reader.consume(taken);
            }
        }
    };
    let _ = sink.send(Tagged { conn_id, incoming }).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn read_all(input: &[u8], limit: usize) -> Vec<Incoming> {
        let (mut client, server) = tokio::io::duplex(1024);
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(read_lines(server, 7, limit, tx));
        // The reader may stop early (an oversized line): the rest is refused.
        let _ = client.write_all(input).await;
        drop(client);
        let mut out = Vec::new();
        while let Some(tagged) = rx.recv().await {
            assert_eq!(tagged.conn_id, 7);
            out.push(tagged.incoming);
        }
        task.await.unwrap();
        out
    }

    #[tokio::test]
    async fn splits_lines_and_reports_the_close() {
        let got = read_all(b"{\"a\":1}\n\n{\"b\":2}\npartial", 64).await;
        assert!(matches!(&got[0], Incoming::Line(l) if l == b"{\"a\":1}"));
        assert!(matches!(&got[1], Incoming::Line(l) if l.is_empty()));
        assert!(matches!(&got[2], Incoming::Line(l) if l == b"{\"b\":2}"));
        assert!(matches!(&got[3], Incoming::Closed { error: None, partial_bytes: 7 }));
        assert_eq!(got.len(), 4);
    }

    #[tokio::test]
    async fn a_line_over_the_limit_stops_reading() {
        let mut input = vec![b'x'; 5000];
        input.extend_from_slice(b"\n{}\n");
        let got = read_all(&input, 4096).await;
        assert!(matches!(got[0], Incoming::Oversized { limit_bytes: 4096 }), "{got:?}");
        assert_eq!(got.len(), 1);
        let exact = read_all(b"abcd\n", 4).await;
        assert!(
            matches!(&exact[0], Incoming::Line(l) if l == b"abcd"),
            "a line of exactly the limit passes"
        );
    }
}
