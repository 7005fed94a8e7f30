mod common;

use common::{call, context, err, ok};
use kestrel_protocol::Mode;
use kestrel_tools::ToolContext;
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const PAGE: &str = "<!doctype html><html><head><title>Docs</title>\
    <script>var x = '<h1>no</h1>';</script><style>h1 { color: red }</style></head>\
    <body><nav><a href=\"/\">Home</a> <a href=\"/about\">About</a></nav>\
    <h1>Install</h1><p>Run <code>cargo add kestrel</code> and read the \
    <a href=\"/guide\">guide</a>.</p><ul><li>fast</li><li>small</li></ul></body></html>";

/// A tiny HTTP/1.1 server on 127.0.0.1 with a few canned routes; it stops with the test.
#[allow(clippy::unwrap_used)] // test fixture setup
async fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => request.extend_from_slice(&buffer[..read]),
                    }
                }
                let head = String::from_utf8_lossy(&request).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let big = "0123456789".repeat(10_000);
                let (status, content_type, body, extra): (&str, &str, Vec<u8>, &str) =
                    match path.as_str() {
                        "/page" => ("200 OK", "text/html; charset=utf-8", PAGE.into(), ""),
                        "/text" => ("200 OK", "text/plain", b"plain text\n".to_vec(), ""),
                        "/big" => ("200 OK", "text/plain", big.into_bytes(), ""),
                        "/image" => ("200 OK", "image/png", b"\x89PNG\r\n\x1a\n\x00".to_vec(), ""),
                        "/moved" => ("302 Found", "text/plain", Vec::new(), "Location: /page\r\n"),
                        _ => ("404 Not Found", "text/plain", b"no such page".to_vec(), ""),
                    };
                let header = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
                     {extra}Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(header.as_bytes()).await;
                let _ = stream.write_all(&body).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("http://{address}")
}

fn networked(root: &Path) -> ToolContext {
    let _ = rustls::crypto::ring::default_provider().install_default();
    ToolContext { network: true, ..context(root, Mode::Auto) }
}

#[tokio::test]
async fn html_is_returned_as_readable_markdown_without_scripts_styles_and_nav() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let output =
        call(&networked(dir.path()), "web_fetch", json!({"url": format!("{base}/page")})).await;
    let content = ok(&output);
    assert!(content.starts_with("Title: Docs"), "{content}");
    assert!(content.contains("# Install"), "{content}");
    assert!(content.contains("Run `cargo add kestrel` and read the"), "{content}");
    assert!(content.contains(&format!("[guide]({base}/guide)")), "links are absolute: {content}");
    assert!(content.contains("- fast\n- small"), "{content}");
    assert!(!content.contains("About") && !content.contains("color") && !content.contains("var x"));
}

#[tokio::test]
async fn text_redirects_and_size_caps() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let ctx = networked(dir.path());
    let output = call(&ctx, "web_fetch", json!({"url": format!("{base}/text")})).await;
    assert_eq!(ok(&output), "plain text\n");

    let output = call(&ctx, "web_fetch", json!({"url": format!("{base}/moved")})).await;
    let content = ok(&output);
    assert!(content.contains("redirected to") && content.contains("# Install"), "{content}");

    let output =
        call(&ctx, "web_fetch", json!({"url": format!("{base}/big"), "max_bytes": 1000})).await;
    let content = ok(&output);
    assert!(content.starts_with(&"0123456789".repeat(100)), "{content:.100}");
    assert!(content.contains("body cut after 1000 bytes"), "{content}");
    assert!(content.len() < 1200);
}

#[tokio::test]
async fn http_errors_and_binary_bodies_are_error_outputs() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let ctx = networked(dir.path());
    let output = call(&ctx, "web_fetch", json!({"url": format!("{base}/missing")})).await;
    let message = err(&output);
    assert!(message.contains("404") && message.contains("no such page"), "{message}");
    let output = call(&ctx, "web_fetch", json!({"url": format!("{base}/image")})).await;
    assert!(err(&output).contains("image/png"), "{}", output.content);
}

#[tokio::test]
async fn refused_without_network_and_for_other_schemes() {
    let dir = tempfile::tempdir().unwrap();
    let offline = context(dir.path(), Mode::Auto);
    let output = call(&offline, "web_fetch", json!({"url": "http://127.0.0.1:9/"})).await;
    assert!(err(&output).contains("[sandbox] network = true"), "{}", output.content);
    let ctx = networked(dir.path());
    let output = call(&ctx, "web_fetch", json!({"url": "file:///etc/passwd"})).await;
    assert!(err(&output).contains("http and https"), "{}", output.content);
    let output = call(&ctx, "web_fetch", json!({"url": "not a url"})).await;
    assert!(err(&output).contains("invalid URL"));
}

#[tokio::test]
async fn an_unreachable_server_is_an_error_naming_the_url() {
    // Bind then drop: nothing listens on this port any more.
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        call(&networked(dir.path()), "web_fetch", json!({"url": url})),
    )
    .await
    .unwrap();
    assert!(err(&output).contains(&url), "{}", output.content);
}
