//! A tool call as a transcript cell: a status mark and its title, then what it did —
//! the command, file diffs, its output (collapsed when long unless expanded), an error.

use crate::diff_view;
use crate::theme;
use crate::wrap::{hard_wrap, wrap_spans};
use kestrel_protocol::acp;
use ratatui::text::{Line, Span};
use serde_json::Value;
use std::path::Path;

/// Output lines shown for a finished call unless output is expanded.
const COLLAPSED_OUTPUT: usize = 5;
/// Diff lines shown per file unless output is expanded.
const COLLAPSED_DIFF: usize = 40;

/// Child tool calls shown under a `task` call (the latest ones).
const CHILD_TOOLS: usize = 4;
/// Lines of the child's answer shown under a `task` call (the latest ones).
const CHILD_ANSWER_LINES: usize = 2;

/// What a subagent (the child session of a `task` call) is doing, as its updates say.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildActivity {
    pub(crate) session_id: String,
    /// Its tool calls in order: id, title, status.
    tools: Vec<(String, String, acp::ToolCallStatus)>,
    /// Its answer so far.
    answer: String,
}

impl ChildActivity {
    pub(crate) fn new(session_id: &str) -> Self {
        Self { session_id: session_id.to_owned(), ..Self::default() }
    }

    /// Takes one of the child's updates; false when it changes nothing shown.
    pub(crate) fn apply(&mut self, update: &acp::SessionUpdate) -> bool {
        match update {
            acp::SessionUpdate::AgentMessageChunk(chunk) => {
                if let acp::ContentBlock::Text(text) = &chunk.content {
                    self.answer.push_str(&text.text);
                    return true;
                }
                false
            }
            acp::SessionUpdate::ToolCall(call) => {
                let id = call.tool_call_id.0.to_string();
                self.tools.retain(|(known, _, _)| *known != id);
                self.tools.push((id, call.title.clone(), call.status));
                true
            }
            acp::SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.as_ref();
                let Some(tool) = self.tools.iter_mut().find(|(known, _, _)| known == id) else {
                    return false;
                };
                if let Some(status) = update.fields.status {
                    tool.2 = status;
                }
                if let Some(title) = &update.fields.title {
                    tool.1 = title.clone();
                }
                true
            }
            _ => false,
        }
    }
}

/// The child session a `task` call's update names (`_meta.kestrel.childSessionId`).
pub(crate) fn child_session_of(update: &acp::ToolCallUpdate) -> Option<String> {
    let kestrel = update.meta.as_ref()?.get("kestrel")?;
    let id = kestrel.get(acp::kestrel::CHILD_SESSION_META)?.as_str()?;
    Some(id.to_owned())
}

/// One tool call as the worker reported it so far.
#[derive(Debug, Clone)]
pub(crate) struct ToolCell {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) name: Option<String>,
    pub(crate) kind: acp::ToolKind,
    pub(crate) status: acp::ToolCallStatus,
    pub(crate) raw_input: Option<Value>,
    pub(crate) content: Vec<acp::ToolCallContent>,
    /// The subagent running this call (`task`), once known.
    pub(crate) child: Option<ChildActivity>,
}

impl ToolCell {
    pub(crate) fn new(call: acp::ToolCall) -> Self {
        Self {
            id: call.tool_call_id.0.to_string(),
            title: call.title,
            name: call.name,
            kind: call.kind,
            status: call.status,
            raw_input: call.raw_input,
            content: call.content,
            child: None,
        }
    }

    /// Applies an update's fields (absent fields stay as they were).
    pub(crate) fn update(&mut self, fields: acp::ToolCallUpdateFields) {
        if let Some(title) = fields.title {
            self.title = title;
        }
        if let Some(name) = fields.name {
            self.name = Some(name);
        }
        if let Some(kind) = fields.kind {
            self.kind = kind;
        }
        if let Some(status) = fields.status {
            self.status = status;
        }
        if let Some(raw_input) = fields.raw_input {
            self.raw_input = Some(raw_input);
        }
        if let Some(content) = fields.content {
            self.content = content;
        }
    }

    /// A call made from a bare update (one whose `tool_call` we never saw).
    pub(crate) fn from_update(update: acp::ToolCallUpdate) -> Self {
        let mut cell = Self {
            id: update.tool_call_id.0.to_string(),
            title: "tool".into(),
            name: None,
            kind: acp::ToolKind::Other,
            status: acp::ToolCallStatus::Pending,
            raw_input: None,
            content: Vec::new(),
            child: None,
        };
        cell.update(update.fields);
        cell
    }

    pub(crate) fn is_finished(&self) -> bool {
        matches!(self.status, acp::ToolCallStatus::Completed | acp::ToolCallStatus::Failed)
    }

    pub(crate) fn render(&self, width: usize, cwd: &Path, expanded: bool) -> Vec<Line<'static>> {
        let (mark, style) = match self.status {
            acp::ToolCallStatus::Pending => ("○", theme::dim()),
            acp::ToolCallStatus::InProgress => ("●", theme::warning()),
            acp::ToolCallStatus::Completed => ("✓", theme::success()),
            acp::ToolCallStatus::Failed => ("✗", theme::error()),
            _ => ("?", theme::dim()),
        };
        let header = [Span::styled(self.title.clone(), theme::bold())];
        let mut lines =
            wrap_spans(&header, width, &[Span::styled(format!("{mark} "), style)], &indent(2));
        let mut body: Vec<Line<'static>> = Vec::new();
        let inner = width.saturating_sub(4).max(8);
        if let Some(command) = self.command() {
            // The title already shows a one-line command in full.
            if command.contains('\n') || !self.title.ends_with(command.trim()) {
                for line in command.lines() {
                    body.extend(hard_wrap(
                        vec![Span::styled(line.to_owned(), theme::accent())],
                        inner,
                        &[Span::styled("$ ", theme::dim())],
                        &indent(2),
                    ));
                }
            }
        }
        if let Some(child) = &self.child {
            // Once the call is done its output carries the child's answer.
            body.extend(child_lines(child, inner, !self.is_finished()));
        }
        let failed = matches!(self.status, acp::ToolCallStatus::Failed);
        for content in &self.content {
            match content {
                acp::ToolCallContent::Diff(diff) => {
                    let mut diff_lines = diff_view::file_diff(
                        &diff.path,
                        diff.old_text.as_deref(),
                        &diff.new_text,
                        cwd,
                        inner,
                    );
                    collapse(&mut diff_lines, COLLAPSED_DIFF, expanded, false);
                    body.extend(diff_lines);
                }
                acp::ToolCallContent::Content(content) => {
                    let text = match &content.content {
                        acp::ContentBlock::Text(text) => text.text.clone(),
                        acp::ContentBlock::ResourceLink(link) => link.uri.clone(),
                        _ => "[non-text content]".to_owned(),
                    };
                    body.extend(self.output(&text, inner, expanded, failed));
                }
                acp::ToolCallContent::Terminal(terminal) => body.push(Line::from(Span::styled(
                    format!("[terminal {}]", terminal.terminal_id.0),
                    theme::dim(),
                ))),
                _ => {}
            }
        }
        for (index, line) in body.into_iter().enumerate() {
            let lead = if index == 0 { "  └ " } else { "    " };
            let mut spans = vec![Span::styled(lead, theme::dim())];
            spans.extend(line.spans);
            lines.push(Line::from(spans));
        }
        lines
    }

    fn command(&self) -> Option<&str> {
        let is_shell =
            self.name.as_deref() == Some("shell") || matches!(self.kind, acp::ToolKind::Execute);
        if !is_shell {
            return None;
        }
        self.raw_input.as_ref()?.get("command")?.as_str()
    }

    fn output(&self, text: &str, width: usize, expanded: bool, failed: bool) -> Vec<Line<'static>> {
        let text = text.trim_end();
        if text.is_empty() {
            return Vec::new();
        }
        let total = text.lines().count();
        // What a read or search returned is for the model; people get its size.
        let for_the_model = matches!(self.kind, acp::ToolKind::Read | acp::ToolKind::Search);
        if for_the_model && !failed && !expanded {
            let noun = if total == 1 { "line" } else { "lines" };
            return vec![Line::from(Span::styled(format!("{total} {noun}"), theme::dim()))];
        }
        let style = if failed { theme::error() } else { theme::dim() };
        let keep = if failed { COLLAPSED_OUTPUT * 2 } else { COLLAPSED_OUTPUT };
        // Collapsed, only the last lines are wrapped: a huge output costs nothing to show.
        let skipped = if expanded || total <= keep + 1 { 0 } else { total - keep };
        let mut lines = Vec::new();
        for line in text.lines().skip(skipped) {
            let line = line.replace('\t', "    ");
            lines.extend(hard_wrap(vec![Span::styled(line, style)], width, &[], &[]));
        }
        let mut hidden = skipped;
        if !expanded && lines.len() > keep + 1 {
            hidden += lines.len() - keep;
            lines.drain(..lines.len() - keep);
        }
        if hidden > 0 {
            let note = format!("… {hidden} more lines (ctrl+o to expand)");
            lines.insert(0, Line::from(Span::styled(note, theme::dim())));
        }
        lines
    }
}

/// A subagent's id as shown: the last 12 characters. A UUIDv7 starts with its creation
/// time, so subagents started together share their first characters; its tail is random.
/// `kestrel resume` takes it.
pub(crate) fn short_id(id: &str) -> String {
    let skip = id.chars().count().saturating_sub(12);
    id.chars().skip(skip).collect()
}

/// The nested view of a subagent: its id, its latest tool calls, its answer's last lines.
fn child_lines(child: &ChildActivity, width: usize, with_answer: bool) -> Vec<Line<'static>> {
    let short = short_id(&child.session_id);
    let mut lines = vec![Line::from(vec![
        Span::styled("subagent ", theme::accent()),
        Span::styled(short, theme::bold()),
        Span::styled(" · open it from /sessions", theme::dim()),
    ])];
    let skipped = child.tools.len().saturating_sub(CHILD_TOOLS);
    if skipped > 0 {
        lines.push(Line::from(Span::styled(format!("│ … {skipped} earlier calls"), theme::dim())));
    }
    for (_, title, status) in child.tools.iter().skip(skipped) {
        let (mark, style) = match status {
            acp::ToolCallStatus::Pending => ("○", theme::dim()),
            acp::ToolCallStatus::InProgress => ("●", theme::warning()),
            acp::ToolCallStatus::Completed => ("✓", theme::success()),
            acp::ToolCallStatus::Failed => ("✗", theme::error()),
            _ => ("?", theme::dim()),
        };
        let spans = vec![
            Span::styled("│ ", theme::dim()),
            Span::styled(format!("{mark} "), style),
            Span::raw(title.clone()),
        ];
        lines.push(Line::from(crate::wrap::truncate_spans(spans, width)));
    }
    if !with_answer {
        return lines;
    }
    let answer: Vec<&str> =
        child.answer.trim().lines().filter(|line| !line.trim().is_empty()).collect();
    let first = answer.len().saturating_sub(CHILD_ANSWER_LINES);
    for line in &answer[first..] {
        let style = theme::dim().add_modifier(ratatui::style::Modifier::ITALIC);
        let spans = [Span::styled((*line).to_owned(), style)];
        lines.extend(wrap_spans(
            &spans,
            width,
            &[Span::styled("│ ", theme::dim())],
            &[Span::styled("│ ", theme::dim())],
        ));
    }
    lines
}

fn indent(width: usize) -> Vec<Span<'static>> {
    vec![Span::raw(" ".repeat(width))]
}

/// Keeps the first `keep` lines (or the last ones, `tail`) and says how many are hidden.
fn collapse(lines: &mut Vec<Line<'static>>, keep: usize, expanded: bool, tail: bool) {
    if expanded || lines.len() <= keep + 1 {
        return;
    }
    let hidden = lines.len() - keep;
    let note =
        Line::from(Span::styled(format!("… {hidden} more lines (ctrl+o to expand)"), theme::dim()));
    if tail {
        let kept = lines.split_off(hidden);
        *lines = std::iter::once(note).chain(kept).collect();
    } else {
        lines.truncate(keep);
        lines.push(note);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|line| line.spans.iter().map(|span| span.content.as_ref()).collect())
            .collect()
    }

    fn shell(output: &str) -> ToolCell {
        let call: acp::ToolCall = serde_json::from_value(json!({
            "toolCallId": "c1", "title": "shell: make", "name": "shell", "kind": "execute",
            "status": "completed", "rawInput": {"command": "make"},
            "content": [{"type": "content", "content": {"type": "text", "text": output}}]
        }))
        .unwrap();
        ToolCell::new(call)
    }

    #[test]
    fn long_output_shows_its_last_lines_unless_expanded() {
        let output: String = (1..=10_000).map(|n| format!("line {n}\n")).collect();
        let cell = shell(&output);
        let collapsed = plain(&cell.render(60, Path::new("/w"), false));
        assert_eq!(collapsed[0], "✓ shell: make");
        assert_eq!(collapsed[1], "  └ … 9995 more lines (ctrl+o to expand)");
        assert_eq!(collapsed.last().unwrap(), "    line 10000");
        assert_eq!(collapsed.len(), 7);
        let expanded = cell.render(60, Path::new("/w"), true);
        assert_eq!(expanded.len(), 10_001);
        let short = plain(&shell("a\nb\n").render(60, Path::new("/w"), false));
        assert_eq!(short, ["✓ shell: make", "  └ a", "    b"]);
    }

    #[test]
    fn a_task_call_nests_its_subagents_activity() {
        let mut cell = shell("");
        cell.status = acp::ToolCallStatus::InProgress;
        let mut child = ChildActivity::new("0123456789abcdef");
        let call: acp::ToolCall =
            serde_json::from_value(json!({"toolCallId": "k1", "title": "read_file: a.rs"}))
                .unwrap();
        assert!(child.apply(&acp::SessionUpdate::ToolCall(call)));
        let chunk = acp::ContentChunk::new(acp::ContentBlock::from("Found it.".to_string()));
        assert!(child.apply(&acp::SessionUpdate::AgentMessageChunk(chunk)));
        cell.child = Some(child);
        let lines = plain(&cell.render(60, Path::new("/w"), false));
        assert_eq!(
            lines[1..],
            [
                "  └ subagent 456789abcdef · open it from /sessions",
                "    │ ○ read_file: a.rs",
                "    │ Found it."
            ]
        );
    }
}
