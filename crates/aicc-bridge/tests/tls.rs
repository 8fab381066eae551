//! Optional TLS for remote agents (AICC section 12), against the whole
//! bridge in-process with a certificate made for the test.
mod support;

use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_rustls::rustls;

#[tokio::test]
async fn a_tls_listener_serves_aicc_to_a_client_that_trusts_its_certificate() {
    let dir = std::env::temp_dir().join(format!("aicc-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, certified.cert.pem()).unwrap();
    std::fs::write(&key_path, certified.signing_key.serialize_pem()).unwrap();
    let security = format!(
        "    security:\n      tls_cert_file: \"{}\"\n      tls_key_file: \"{}\"\n",
        cert_path.display(),
        key_path.display()
    );
    let bridge = support::start(support::config(&security), &[]);
    let port = bridge.port;

    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let client_config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let stream =
        connector.connect("localhost".try_into().unwrap(), tcp).await.expect("TLS handshake");
    let (reader, mut writer) = tokio::io::split(stream);
    let mut lines = BufReader::new(reader).lines();
    let init: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(init["type"], "session_init");
    writer
        .write_all(b"{\"protocol\":\"aicc/0.1\",\"type\":\"heartbeat\",\"message_id\":\"h\"}\n")
        .await
        .unwrap();
    loop {
        let message: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        if message["in_reply_to"] == "h" {
            break;
        }
    }

    // Plain text on the TLS port gets no AICC at all.
    let mut plain = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    plain.write_all(b"{\"protocol\":\"aicc/0.1\",\"type\":\"heartbeat\"}\n").await.unwrap();
    let mut answer = String::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        BufReader::new(&mut plain).read_line(&mut answer),
    )
    .await;
    assert!(!answer.contains("aicc/0.1"), "plain text was answered: {answer}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_peer_that_never_finishes_the_tls_handshake_is_closed_after_the_handshake_bound() {
    let dir = std::env::temp_dir().join(format!("aicc-tls-stall-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, certified.cert.pem()).unwrap();
    std::fs::write(&key_path, certified.signing_key.serialize_pem()).unwrap();
    let settings = format!("    handshake_timeout_s: 0.5\n    security:\n      tls_cert_file: \"{}\"\n      tls_key_file: \"{}\"\n", cert_path.display(), key_path.display());
    let bridge = support::start(support::config(&settings), &[]);
    // Connected, and silent: no ClientHello ever comes.
    let mut silent = tokio::net::TcpStream::connect(("127.0.0.1", bridge.port)).await.unwrap();
    let mut sink = Vec::new();
    let end = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        tokio::io::AsyncReadExt::read_to_end(&mut silent, &mut sink),
    )
    .await;
    assert!(matches!(end, Ok(Ok(0))), "the bridge closes a silent TLS peer: {end:?}");
    assert!(support::logged_soon("TLS handshake not done within 0.5 s"), "the reason is logged");
    let _ = std::fs::remove_dir_all(&dir);
}
