//! `HTTP_PROXY` / `HTTPS_PROXY` / `NO_PROXY` are honoured (reqwest reads them when the
//! client is built, without its `system-proxy` feature). One test in its own binary,
//! because it sets process-wide environment variables.

// Test set-up helpers below fail loudly rather than return errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{
    TEST_TIMEOUT, chat_sse_response, collect, options, request, serve_once, stream_error, text_of,
};
use kestrel_model::{ModelClient, ModelError, WireApi};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn proxy_variables_route_requests_and_no_proxy_bypasses_them() {
    kestrel_model::install_crypto_provider();
    let (http_proxy, http_proxy_heard) = serve_once(chat_sse_response("via proxy")).await;
    let (https_proxy, https_proxy_heard) =
        serve_once(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n".to_vec()).await;
    let (direct, direct_heard) = serve_once(chat_sse_response("direct")).await;
    // SAFETY: this test binary runs this one test, and no other thread reads the
    // environment while it is changed (the runtime is current-thread).
    unsafe {
        std::env::set_var("HTTP_PROXY", format!("http://127.0.0.1:{http_proxy}"));
        std::env::set_var("HTTPS_PROXY", format!("http://127.0.0.1:{https_proxy}"));
        std::env::set_var("NO_PROXY", "127.0.0.1,localhost");
        std::env::remove_var("ALL_PROXY");
    }

    // Plain http through the proxy: an absolute-form request line.
    let client = ModelClient::new(
        common::provider("http://model.kestrel-test.invalid/v1", WireApi::Chat),
        options(1).0,
    )
    .unwrap();
    let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
    let (events, error) = collect(&mut stream).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "via proxy");
    let head = tokio::time::timeout(TEST_TIMEOUT, http_proxy_heard).await.unwrap().unwrap();
    assert!(
        head.starts_with("POST http://model.kestrel-test.invalid/v1/chat/completions HTTP/1.1"),
        "{head}"
    );

    // https through the proxy: a CONNECT tunnel (refused here, so the request fails).
    let client = ModelClient::new(
        common::provider("https://model.kestrel-test.invalid/v1", WireApi::Chat),
        options(1).0,
    )
    .unwrap();
    let error = stream_error(&client).await;
    assert!(matches!(error, ModelError::Network { .. }), "{error:?}");
    let head = tokio::time::timeout(TEST_TIMEOUT, https_proxy_heard).await.unwrap().unwrap();
    assert!(head.starts_with("CONNECT model.kestrel-test.invalid:443 HTTP/1.1"), "{head}");

    // NO_PROXY hosts are reached directly.
    let base_url = format!("http://127.0.0.1:{direct}/v1");
    let client =
        ModelClient::new(common::provider(&base_url, WireApi::Chat), options(1).0).unwrap();
    let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
    let (events, error) = collect(&mut stream).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "direct");
    let head = tokio::time::timeout(TEST_TIMEOUT, direct_heard).await.unwrap().unwrap();
    assert!(head.starts_with("POST /v1/chat/completions HTTP/1.1"), "{head}");
}
