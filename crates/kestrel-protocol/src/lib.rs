//! Kestrel's wire types. Every format another program reads is defined here once:
//! the session record (ARCHITECTURE §5), the `exec --json` event stream (§3), ACP
//! messages (`acp`) and the JSON-RPC connection (`jsonrpc`). No files, no OS.

pub mod acp;
pub mod base64;
mod exec_event;
mod ids;
pub mod jsonrpc;
mod mode;
mod record;
pub mod swarm;
mod time;

pub use exec_event::{
    EXEC_EVENT_VERSION, ExecError, ExecEvent, ExecItem, ExecItemKind, ExecPlanStep, ExecUsage,
};
pub use ids::{SessionId, ToolCallId};
pub use mode::Mode;
pub use record::{
    ForkedFrom, Notice, NoticeKind, RECORD_VERSION, RecordEntry, RecordHeader, RecordHeaderLine,
    RecordItem, RecordLine, StopReason, Usage, WorkspaceRepository,
};
pub use time::Timestamp;
