//! The system's root certificates are read on the first TLS handshake, not when a client
//! is built: plain http to a local server never reads them. `SSL_CERT_FILE` points at a
//! FIFO whose writer counts the readers (and hands each the test CA), so every read of
//! the roots is seen. One test in its own binary: it sets a process-wide variable.

// Test set-up helpers below fail loudly rather than return errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::tls_server::{fixture, start_tls_server};
use common::{TEST_TIMEOUT, collect, options, request, text_of};
use kestrel_model::{ModelClient, WireApi};
use kestrel_testkit::{Script, ScriptedServer, Step};
use tokio_util::sync::CancellationToken;

/// A FIFO that serves `ca.pem` to each reader, counting them.
fn counting_cert_file(dir: &tempfile::TempDir) -> (PathBuf, Arc<AtomicUsize>) {
    let path = dir.path().join("roots.pem");
    let made = std::process::Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success(), "mkfifo failed");
    let reads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&reads);
    let pem = std::fs::read(fixture("ca.pem")).unwrap();
    let fifo = path.clone();
    // Blocks in open() until a reader comes; the process ends with the test either way.
    std::thread::spawn(move || {
        loop {
            let Ok(mut writer) = std::fs::OpenOptions::new().write(true).open(&fifo) else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = writer.write_all(&pem);
            drop(writer);
            // Until that reader has closed its end, a new open() would succeed at once
            // and count it twice: a non-blocking open fails (ENXIO) once no reader is left.
            while std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .is_ok()
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    });
    (path, reads)
}

async fn ask(client: &ModelClient) -> String {
    let mut stream =
        tokio::time::timeout(TEST_TIMEOUT, client.stream(&request(), &CancellationToken::new()))
            .await
            .unwrap()
            .unwrap();
    let (events, error) = tokio::time::timeout(TEST_TIMEOUT, collect(&mut stream)).await.unwrap();
    assert!(error.is_none(), "{error:?}");
    text_of(&events)
}

#[tokio::test]
async fn roots_are_read_on_the_first_tls_handshake_and_never_for_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_file, reads) = counting_cert_file(&dir);
    // SAFETY: this test binary runs this one test, and no other thread reads the
    // environment while it is changed (the runtime is current-thread).
    unsafe {
        std::env::set_var("SSL_CERT_FILE", &cert_file);
    }

    let server = ScriptedServer::start(Script::new([Step::text("plain hello")])).unwrap();
    let plain = common::client_for(&server.base_url(), WireApi::Chat, options(1).0);
    assert_eq!(ask(&plain).await, "plain hello");
    assert_eq!(reads.load(Ordering::SeqCst), 0, "a plain-http request read the roots");

    let tls_url = tokio::time::timeout(TEST_TIMEOUT, start_tls_server(2)).await.unwrap();
    let secure = ModelClient::new(common::provider(&tls_url, WireApi::Chat), options(1).0).unwrap();
    assert_eq!(reads.load(Ordering::SeqCst), 0, "building an https client read the roots");

    // The first handshake reads them (and trusts the CA they hold); the client keeps them.
    assert_eq!(ask(&secure).await, "secure hello");
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    assert_eq!(ask(&secure).await, "secure hello");
    assert_eq!(reads.load(Ordering::SeqCst), 1, "the roots were read again");
}
