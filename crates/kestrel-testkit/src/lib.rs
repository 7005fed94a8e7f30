//! Test support for Kestrel: a scripted model server that speaks the three wire APIs
//! exactly as the real providers do, with a request log and fault injection.
//!
//! ```no_run
//! use kestrel_testkit::{ScriptedServer, Script, Step};
//! let server = ScriptedServer::start(Script::new([
//!     Step::tool_call("read_file", serde_json::json!({"path": "README.md"})),
//!     Step::text("It is a README."),
//! ]))?;
//! // point a provider's base_url at server.base_url(), run the client, then:
//! assert_eq!(server.remaining(), 0);
//! # Ok::<(), std::io::Error>(())
//! ```

mod http;
mod ids;
mod logged_request;
mod script;
mod server;
mod sse;
mod wire;

pub use logged_request::LoggedRequest;
pub use script::{Fault, Reply, Script, ScriptError, ScriptedToolCall, ScriptedUsage, Step};
pub use server::{SCRIPT_EXHAUSTED, ScriptedServer, ServerOptions};
