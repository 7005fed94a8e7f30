//! `web_fetch`: GETs an http(s) URL and returns readable text (HTML converted to
//! markdown-ish text), refused when the session has no network access.

use crate::arguments::{self, optional_u64};
use crate::{Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, html};
use reqwest::Url;
use serde::Deserialize;
use serde_json::json;
use std::sync::OnceLock;
use std::time::Duration;

/// Bytes of the body read when the call gives no `max_bytes`.
pub const DEFAULT_MAX_BYTES: u64 = 1024 * 1024;
/// The most a call may ask for.
pub const MAX_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Time for the whole request, body included.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The `web_fetch` tool. Holds one HTTP client, built on first use.
#[derive(Debug, Default)]
pub struct WebFetchTool {
    client: OnceLock<reqwest::Client>,
}

#[derive(Deserialize)]
struct Arguments {
    url: String,
    #[serde(default, deserialize_with = "optional_u64")]
    max_bytes: Option<u64>,
}

impl Tool for WebFetchTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "web_fetch".to_string(),
            description: format!(
                "Fetches an http or https URL with GET and returns its content as readable \
                 text: HTML pages are converted to markdown (headings, paragraphs, links, \
                 lists, code) without scripts, styles and navigation; text, JSON and XML are \
                 returned as they are. Reads at most `max_bytes` of the body (default \
                 {DEFAULT_MAX_BYTES}, at most {MAX_MAX_BYTES}). Only works when network access \
                 is on."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The http:// or https:// URL to fetch."},
                    "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_MAX_BYTES, "description": format!("Maximum bytes of the response body to read (default {DEFAULT_MAX_BYTES}).")}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, arguments: serde_json::Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments: Arguments = match arguments::parse("web_fetch", arguments) {
                Ok(arguments) => arguments,
                Err(output) => return output,
            };
            // yolo checks nothing, the network setting included.
            if !context.network && context.mode != kestrel_protocol::Mode::Yolo {
                return ToolOutput::error(
                    "network access is off: set `[sandbox] network = true` in config.toml to \
                     allow web_fetch",
                );
            }
            let url = match Url::parse(arguments.url.trim()) {
                Ok(url) => url,
                Err(error) => {
                    return ToolOutput::error(format!("invalid URL `{}`: {error}", arguments.url));
                }
            };
            if !matches!(url.scheme(), "http" | "https") {
                return ToolOutput::error(format!(
                    "web_fetch only fetches http and https URLs, not `{}:`",
                    url.scheme()
                ));
            }
            let max_bytes = match arguments.max_bytes {
                Some(0) => return ToolOutput::error("max_bytes must be at least 1"),
                Some(bytes) => bytes.min(MAX_MAX_BYTES),
                None => DEFAULT_MAX_BYTES,
            };
            let client = match self.client() {
                Ok(client) => client,
                Err(message) => return ToolOutput::error(message),
            };
            tokio::select! {
                output = fetch(client, url, max_bytes) => output,
                () = context.cancel.cancelled() => ToolOutput::error("web_fetch cancelled by the user"),
            }
        })
    }
}

impl WebFetchTool {
    fn client(&self) -> Result<&reqwest::Client, String> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        // reqwest panics without a rustls provider; the binary installs ring at start,
        // but a library must not rely on that.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("kestrel/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| format!("could not set up the HTTP client: {error}"))?;
        Ok(self.client.get_or_init(|| client))
    }
}

async fn fetch(client: &reqwest::Client, url: Url, max_bytes: u64) -> ToolOutput {
    let mut response = match client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "text/html, text/plain, application/json, */*;q=0.5")
        .send()
        .await
    {
        Ok(response) => response,
        Err(error) => {
            return ToolOutput::error(format!("could not fetch {url}: {}", chain(&error)));
        }
    };
    let status = response.status();
    let final_url = response.url().clone();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let limit = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let mut body = Vec::new();
    let mut truncated = false;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) if body.len() >= limit => {
                truncated = !chunk.is_empty();
                if truncated {
                    break;
                }
            }
            Ok(Some(chunk)) => {
                let room = limit - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if chunk.len() > room {
                    truncated = true;
                    break;
                }
            }
            Ok(None) => break,
            Err(error) => {
                return ToolOutput::error(format!(
                    "reading the body of {final_url} failed: {}",
                    chain(&error)
                ));
            }
        }
    }
    let kind = Kind::of(&content_type, &body);
    let text = match kind {
        Kind::Html => html::to_markdown(&String::from_utf8_lossy(&body), Some(&final_url)),
        Kind::Text => String::from_utf8_lossy(&body).into_owned(),
        Kind::Binary => {
            return ToolOutput::error(format!(
                "{final_url} returned `{content_type}` ({} bytes read), which is not text; \
                 web_fetch only returns text and HTML",
                body.len()
            ));
        }
    };
    let mut content = String::new();
    if final_url != url {
        content.push_str(&format!("(redirected to {final_url})\n"));
    }
    if !status.is_success() {
        content.push_str(&format!("HTTP {status} from {final_url}\n\n"));
        content.push_str(&text);
        return ToolOutput::error(content);
    }
    content.push_str(&text);
    if truncated {
        content.push_str(&format!(
            "\n\n[body cut after {max_bytes} bytes; raise max_bytes (at most {MAX_MAX_BYTES}) \
             to read more]"
        ));
    }
    if content.trim().is_empty() {
        content = format!("(the page at {final_url} has no readable text)");
    }
    ToolOutput::ok(content)
}

/// What to do with a body.
enum Kind {
    Html,
    Text,
    Binary,
}

impl Kind {
    fn of(content_type: &str, body: &[u8]) -> Self {
        let mime = content_type.split(';').next().unwrap_or("").trim();
        if mime == "text/html" || mime == "application/xhtml+xml" {
            return Self::Html;
        }
        let textual = mime.starts_with("text/")
            || mime.ends_with("json")
            || mime.ends_with("xml")
            || mime.ends_with("javascript")
            || mime.ends_with("+json")
            || mime.ends_with("yaml")
            || mime.ends_with("toml");
        if textual {
            return Self::Text;
        }
        if mime.is_empty() || mime == "application/octet-stream" {
            // Unlabelled: sniff it.
            if body.iter().take(8192).any(|&b| b == 0) {
                return Self::Binary;
            }
            let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
            return if head.contains("<html") || head.contains("<!doctype html") {
                Self::Html
            } else {
                Self::Text
            };
        }
        Self::Binary
    }
}

/// An error with its sources, which is where reqwest says what actually went wrong.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
