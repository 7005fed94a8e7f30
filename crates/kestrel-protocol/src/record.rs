//! The session record (ARCHITECTURE §5): one JSON object per line, a header first,
//! then items each tagged with `type` and stamped with `ts`. Readers must accept
//! fields they do not know (a newer Kestrel may add some) and skip a torn last line.

use crate::swarm::SwarmSessionTag;
use crate::{Mode, SessionId, Timestamp};
use serde::{Deserialize, Serialize};

/// The record format's version, written in every header.
pub const RECORD_VERSION: u32 = 1;

/// The first line of every record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordHeader {
    pub id: SessionId,
    pub version: u32,
    pub created_at: Timestamp,
    pub cwd: String,
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<SessionId>,
    /// `(session id, item index)` this session was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// The swarm role this session plays (ARCHITECTURE §10); `None` for every other
    /// session. It brings the role's tools and mode back when the session is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swarm: Option<SwarmSessionTag>,
    /// The git repository of the workspace when the session's line began: taken when a
    /// top-level or swarm session starts, copied to its subagents and forks, kept on
    /// resume. The only repository whose git commands an allow rule lets out of the
    /// sandbox (ARCHITECTURE §6). Absent in records older than it: none is trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<WorkspaceRepository>,
}

/// See [`RecordHeader::repository`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkspaceRepository {
    /// The workspace was in no repository, or it could not be told which.
    None,
    /// git's directory for the workspace, by path and by device and inode (a directory
    /// made later at the same path is another one), and its working tree's top.
    Git { git_dir: String, work_tree: Option<String>, device: u64, inode: u64 },
}

/// Where a fork came from: the source session and the number of items copied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForkedFrom {
    pub session_id: SessionId,
    pub items: u64,
}

/// One item after the header, with its time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordEntry {
    pub ts: Timestamp,
    #[serde(flatten)]
    pub item: RecordItem,
}

impl RecordEntry {
    /// The item stamped with the current time.
    pub fn now(item: RecordItem) -> Self {
        Self { ts: Timestamp::now(), item }
    }
}

/// Any line of a record: the header or an item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordLine {
    Header(RecordHeaderLine),
    Entry(RecordEntry),
}

/// The header as it stands on disk: `{"type":"session", ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "session")]
pub struct RecordHeaderLine {
    #[serde(flatten)]
    pub header: RecordHeader,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model gave its final answer.
    EndTurn,
    /// The user cancelled.
    Cancelled,
    /// The process running the turn died; recorded when the session is loaded again.
    Interrupted,
    /// An error ended the turn (the `error` field of `turn_completed` says which).
    Failed,
    /// `--max-turns` (model round trips) ran out before a final answer.
    MaxTurns,
}

/// Token counts of one model request, and what they cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// All input tokens, cached ones included.
    pub input_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// All output tokens, reasoning included.
    pub output_tokens: u64,
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// In US dollars, from the catalog's prices; 0 for a model it does not know.
    #[serde(default)]
    pub cost: f64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cost += other.cost;
    }
}

/// What kind of thing a notice reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    WorkerRestarted,
    Error,
    ModelSwitch,
    /// The session's mode was switched (`mode` names it): a resumed session keeps it.
    ModeSwitch,
    Retry,
    Info,
}

/// A line for people: something happened to the session that is not conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    pub kind: NoticeKind,
    pub message: String,
    /// For `model_switch`: the model in use from here on, as `provider/model`, so a
    /// resumed session continues with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// For `mode_switch`: the mode in force from here on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
}

/// The items of a record, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RecordItem {
    UserMessage {
        text: String,
    },
    AssistantMessage {
        #[serde(default)]
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// Provider data that must go back with the reasoning (a thinking signature,
        /// encrypted reasoning); opaque to everything but the model client.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_opaque: Option<serde_json::Value>,
    },
    ToolCall {
        id: String,
        name: String,
        /// The arguments exactly as the model sent them (possibly invalid JSON).
        arguments: String,
    },
    ToolResult {
        id: String,
        output: String,
        is_error: bool,
        duration_ms: u64,
    },
    Usage {
        #[serde(flatten)]
        usage: Usage,
    },
    TurnStarted {},
    TurnCompleted {
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    Compaction {
        summary: String,
        /// Index (0-based, header excluded) of the last item the summary replaces.
        replaces_through: u64,
    },
    Notice {
        #[serde(flatten)]
        notice: Notice,
    },
    Checkpoint {
        /// What a turn's edits changed, for undo; the shape belongs to the tools that wrote it.
        files: serde_json::Value,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_line_has_session_type_and_optional_fields_left_out() {
        let header = RecordHeader {
            id: SessionId::from_string("s1"),
            version: RECORD_VERSION,
            created_at: Timestamp { millis: 0 },
            cwd: "/w".into(),
            provider: "openai".into(),
            model: "gpt-5".into(),
            parent_id: None,
            forked_from: None,
            swarm: None,
            repository: None,
        };
        let line = serde_json::to_string(&RecordLine::Header(RecordHeaderLine { header })).unwrap();
        assert_eq!(
            line,
            r#"{"type":"session","id":"s1","version":1,"created_at":"1970-01-01T00:00:00.000Z","cwd":"/w","provider":"openai","model":"gpt-5"}"#
        );
        assert!(matches!(
            serde_json::from_str::<RecordLine>(&line).unwrap(),
            RecordLine::Header(_)
        ));
    }

    #[test]
    fn a_swarm_sessions_header_carries_its_tag() {
        let line = r#"{"type":"session","id":"s1","version":1,"created_at":"1970-01-01T00:00:00.000Z","cwd":"/w","provider":"openai","model":"gpt-5","swarm":{"run":"r1","task":"parse","role":"reviewer","attempt":2}}"#;
        let RecordLine::Header(RecordHeaderLine { header }) =
            serde_json::from_str::<RecordLine>(line).unwrap()
        else {
            panic!("not a header: {line}");
        };
        let tag = header.swarm.clone().unwrap();
        assert_eq!((tag.run.as_str(), tag.task.as_str()), ("r1", "parse"));
        assert_eq!((tag.role, tag.attempt), (crate::swarm::SwarmRole::Reviewer, 2));
        let back = serde_json::to_string(&RecordLine::Header(RecordHeaderLine { header })).unwrap();
        assert_eq!(back, line);
    }

    #[test]
    fn items_are_flat_objects_with_type_and_ts() {
        let entry = RecordEntry {
            ts: Timestamp { millis: 0 },
            item: RecordItem::ToolResult {
                id: "c1".into(),
                output: "ok".into(),
                is_error: false,
                duration_ms: 3,
            },
        };
        let line = serde_json::to_string(&entry).unwrap();
        assert_eq!(
            line,
            r#"{"ts":"1970-01-01T00:00:00.000Z","type":"tool_result","id":"c1","output":"ok","is_error":false,"duration_ms":3}"#
        );
        let back: RecordLine = serde_json::from_str(&line).unwrap();
        assert_eq!(back, RecordLine::Entry(entry));
    }

    #[test]
    fn unknown_fields_are_accepted() {
        let line =
            r#"{"ts":"1970-01-01T00:00:00.000Z","type":"user_message","text":"hi","extra":1}"#;
        let entry: RecordEntry = serde_json::from_str(line).unwrap();
        assert_eq!(entry.item, RecordItem::UserMessage { text: "hi".into() });
    }
}
