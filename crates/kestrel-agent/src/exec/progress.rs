//! `kestrel exec`'s progress on stderr (silenced by `--quiet`): a line when a tool call
//! starts and one for its outcome (done, failed with the first line of why, or refused
//! without running), subagents and compactions. Stdout never changes for it.

use crate::event::AgentEvent;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Mutex;

/// Longest argument summary or outcome detail shown, in characters.
const SHOWN_CHARS: usize = 160;

/// Remembers which calls ran, to tell a refusal from a failure.
#[derive(Default)]
pub(super) struct Progress {
    running: Mutex<HashSet<String>>,
}

impl Progress {
    /// The stderr line for `event`, if it gets one.
    pub(super) fn line(&self, event: &AgentEvent) -> Option<String> {
        match event {
            AgentEvent::ToolCallStarted { name, arguments, .. } => {
                Some(format!("▸ {name} {}", summarize_arguments(arguments)))
            }
            AgentEvent::ToolCallRunning { call_id } => {
                if let Ok(mut running) = self.running.lock() {
                    running.insert(call_id.clone());
                }
                None
            }
            AgentEvent::ToolCallCompleted { call_id, name, output, is_error, .. } => {
                let ran = self.running.lock().is_ok_and(|mut running| running.remove(call_id));
                Some(match (is_error, ran) {
                    (false, _) => format!("  ✓ {name}"),
                    (true, true) => format!("  ✗ {name} failed: {}", outcome_detail(output)),
                    (true, false) => {
                        let why = output.strip_prefix("not run: ").unwrap_or(output);
                        format!("  ✗ {name} not run: {}", outcome_detail(why))
                    }
                })
            }
            AgentEvent::SubagentStarted { session_id, .. } => {
                Some(format!("  ↳ subagent {session_id}"))
            }
            AgentEvent::Compacted { tokens_before, tokens_after } => {
                Some(format!("· context compacted (about {tokens_before} → {tokens_after} tokens)"))
            }
            AgentEvent::TurnStarted
            | AgentEvent::SubagentFinished { .. }
            | AgentEvent::Notice(_)
            | AgentEvent::Retrying { .. }
            | AgentEvent::TextDelta { .. }
            | AgentEvent::TextCompleted { .. }
            | AgentEvent::ReasoningDelta { .. }
            | AgentEvent::ReasoningCompleted { .. }
            | AgentEvent::Plan(_)
            | AgentEvent::Usage(_)
            | AgentEvent::TurnCompleted { .. }
            | AgentEvent::TurnFailed { .. } => None,
        }
    }
}

/// What a call is about, on one line: the command, path, pattern or URL it names, or
/// its arguments as sent.
fn summarize_arguments(arguments: &str) -> String {
    let parsed: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let named = ["command", "path", "pattern", "url", "description"]
        .iter()
        .find_map(|key| parsed.get(*key).and_then(Value::as_str));
    one_line(named.unwrap_or(arguments))
}

/// Why a call failed, on one line: the first line of its output, and for a command
/// (whose first line is its exit code) the note Kestrel added about the sandbox.
fn outcome_detail(output: &str) -> String {
    let first = output.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
    let note = output.lines().find(|line| line.starts_with("Note: "));
    match note {
        Some(note) if first.starts_with("Exit code:") => one_line(&format!("{first}; {note}")),
        Some(_) | None => one_line(first),
    }
}

/// `text` with line breaks shown as `⏎`, cut to [`SHOWN_CHARS`].
fn one_line(text: &str) -> String {
    let flat: String = text.trim().replace('\n', " ⏎ ");
    if flat.chars().count() <= SHOWN_CHARS {
        return flat;
    }
    let cut: String = flat.chars().take(SHOWN_CHARS).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completed(output: &str, is_error: bool) -> AgentEvent {
        AgentEvent::ToolCallCompleted {
            call_id: "c".into(),
            name: "shell".into(),
            arguments: String::new(),
            output: output.into(),
            is_error,
            changes: Vec::new(),
        }
    }

    #[test]
    fn a_refusal_is_told_from_a_failure_by_whether_the_call_ran() {
        let progress = Progress::default();
        let refused = progress.line(&completed("not run: it needs approval", true));
        assert_eq!(refused.unwrap(), "  ✗ shell not run: it needs approval");
        progress.line(&AgentEvent::ToolCallRunning { call_id: "c".into() });
        let failed = progress.line(&completed("Exit code: 7\nNote: the network is off\nx", true));
        assert_eq!(failed.unwrap(), "  ✗ shell failed: Exit code: 7; Note: the network is off");
    }

    #[test]
    fn arguments_are_summarized_on_one_short_line() {
        assert_eq!(summarize_arguments(r#"{"command":"ls\npwd"}"#), "ls ⏎ pwd");
        assert_eq!(summarize_arguments(r#"{"path":"a.txt","content":"x"}"#), "a.txt");
        let long = format!(r#"{{"command":"{}"}}"#, "x".repeat(400));
        assert_eq!(summarize_arguments(&long).chars().count(), SHOWN_CHARS + 1);
    }
}
