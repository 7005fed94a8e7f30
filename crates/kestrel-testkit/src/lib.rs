//! Test support for Kestrel: a scripted model server that speaks the three wire APIs
//! exactly as the real providers do, with a request log and fault injection; a pty
//! screen driver for TUI tests ([`Pty`]) and plain-text screen snapshots
//! ([`assert_snapshot`]); and [`JobsServer`], a scripted Ray Jobs API that really runs its
//! jobs and can lose the node under one ([`NodeLoss`]), for the swarm's `ray` executor
//! where a real head cannot show the fault.
//!
//! [`ScriptedServer`] listens on 127.0.0.1 and answers `POST {base}/chat/completions`
//! (OpenAI Chat Completions), `{base}/responses` (OpenAI Responses) and `{base}/messages`
//! (Anthropic Messages), streaming (SSE) when the request says `"stream": true`, plus
//! `GET {base}/models`. Each model request consumes the next [`Step`] of the [`Script`]
//! (with [`Step::when`], the first one left that is for its model or content); once none
//! is left for it, it answers HTTP 500 "scripted model: script exhausted".
//!
//! ```no_run
//! use kestrel_testkit::{Fault, ScriptedServer, Script, Step};
//! let server = ScriptedServer::start(Script::new([
//!     Step::tool_call("read_file", serde_json::json!({"path": "README.md"}))
//!         .with_fault(Fault::Status { status: 429, retry_after_secs: Some(1), message: None, times: None }),
//!     Step::text("It is a README.").with_reasoning("The file says so."),
//! ]))?;
//! // point a provider's base_url at server.base_url(), run the client, then:
//! assert_eq!(server.remaining(), 0);
//! assert_eq!(server.requests()[0].path, "/v1/chat/completions");
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The same script as JSON, for the `scripted-model` binary
//! (`scripted-model --script FILE.json [--port N] [--log FILE.jsonl]`):
//!
//! ```json
//! {"steps": [
//!   {"reply": {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
//!    "fault": {"kind": "status", "status": 429, "retry_after_secs": 1}},
//!   {"reply": {"text": "It is a README.", "reasoning": "The file says so.",
//!              "usage": {"input_tokens": 120, "cached_input_tokens": 100, "output_tokens": 9}}}
//! ]}
//! ```

mod http;
mod ids;
mod jobs;
mod logged_request;
mod pty;
mod script;
mod server;
mod server_thread;
mod snapshot;
mod sse;
mod wire;

pub use jobs::{JobSnapshot, JobStatus, JobsOptions, JobsServer, NodeLoss};
pub use logged_request::LoggedRequest;
pub use pty::{Key, Pty, PtyError, vt100};
pub use script::{Fault, Reply, Script, ScriptError, ScriptedToolCall, ScriptedUsage, Step, When};
pub use server::{SCRIPT_EXHAUSTED, ScriptedServer, ServerOptions};
pub use snapshot::{UPDATE_SNAPSHOTS_ENV, assert_snapshot};

/// The smallest valid PNG: 1×1, transparent (for tests that send an image).
pub const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];
