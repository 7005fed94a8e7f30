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
        let mut lines = Vec::new();
        for line in text.lines() {
            let line = line.replace('\t', "    ");
            lines.extend(hard_wrap(vec![Span::styled(line, style)], width, &[], &[]));
        }
        let keep = if failed { COLLAPSED_OUTPUT * 2 } else { COLLAPSED_OUTPUT };
        collapse(&mut lines, keep, expanded, true);
        lines
    }
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
