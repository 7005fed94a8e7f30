//! The permission prompt for `ask` mode. It cannot be answered by a stray key: nothing
//! is selected when it appears, digits and arrows only select, and Enter confirms a
//! selection. Rejecting asks for an optional reason (sent to the worker with the answer).
//! Esc interrupts the turn instead of answering.

use crate::diff_view;
use crate::theme;
use crate::wrap::{hard_wrap, truncate_spans, wrap_spans};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::RequestId;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Widget};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Preview lines of what the call would do.
const PREVIEW_LINES: usize = 12;

/// One answer the worker offered.
#[derive(Debug, Clone)]
pub(crate) struct ApprovalOption {
    pub(crate) id: String,
    pub(crate) label: String,
    pub(crate) rejects: bool,
}

/// What a key did to the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApprovalAction {
    None,
    Answer { option_id: String, reason: Option<String> },
    Interrupt,
}

/// A waiting `session/request_permission`.
#[derive(Debug, Clone)]
pub(crate) struct Approval {
    pub(crate) id: RequestId,
    pub(crate) session_id: String,
    title: String,
    name: Option<String>,
    raw_input: Option<Value>,
    /// Why the worker asks (the policy's summary, sent as the call's text content).
    summary: Option<String>,
    options: Vec<ApprovalOption>,
    selected: Option<usize>,
    /// Other text was typed at the prompt (the user thought they were in the composer):
    /// digits stop selecting until an arrow key shows intent, so "see item 1⏎" answers
    /// nothing.
    typing: bool,
    /// The reason being typed, once a rejecting option was confirmed.
    reason: Option<String>,
    /// Asked by a subagent of the session rather than the session itself.
    pub(crate) from_subagent: bool,
    cwd: PathBuf,
}

impl Approval {
    pub(crate) fn new(id: RequestId, request: acp::RequestPermissionRequest, cwd: &Path) -> Self {
        let fields = request.tool_call.fields;
        let summary = fields.content.iter().flatten().find_map(|content| match content {
            acp::ToolCallContent::Content(acp::Content {
                content: acp::ContentBlock::Text(text),
                ..
            }) => Some(text.text.clone()),
            _ => None,
        });
        let options = request
            .options
            .into_iter()
            .map(|option| ApprovalOption {
                id: option.option_id.0.to_string(),
                rejects: matches!(
                    option.kind,
                    acp::PermissionOptionKind::RejectOnce | acp::PermissionOptionKind::RejectAlways
                ),
                label: option.name,
            })
            .collect();
        Self {
            id,
            session_id: request.session_id.0.to_string(),
            title: fields.title.unwrap_or_else(|| "a tool call".to_owned()),
            name: fields.name,
            raw_input: fields.raw_input,
            summary,
            options,
            selected: None,
            typing: false,
            reason: None,
            from_subagent: false,
            cwd: cwd.to_path_buf(),
        }
    }

    pub(crate) fn handle_key(&mut self, key: KeyEvent) -> ApprovalAction {
        if let Some(reason) = &mut self.reason {
            match key.code {
                KeyCode::Esc => self.reason = None,
                KeyCode::Enter => {
                    let option = self.selected.and_then(|index| self.options.get(index));
                    if let Some(option) = option {
                        let reason = reason.trim().to_owned();
                        return ApprovalAction::Answer {
                            option_id: option.id.clone(),
                            reason: (!reason.is_empty()).then_some(reason),
                        };
                    }
                }
                KeyCode::Backspace => {
                    reason.pop();
                }
                KeyCode::Char(ch) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                    reason.push(ch)
                }
                _ => {}
            }
            return ApprovalAction::None;
        }
        match key.code {
            KeyCode::Esc => return ApprovalAction::Interrupt,
            KeyCode::Up => {
                self.typing = false;
                self.selected = Some(self.selected.map_or(0, |index| index.saturating_sub(1)))
            }
            KeyCode::Down => {
                self.typing = false;
                let last = self.options.len().saturating_sub(1);
                self.selected = Some(self.selected.map_or(0, |index| (index + 1).min(last)));
            }
            KeyCode::Char(digit @ '1'..='9') if !self.typing => {
                let index = usize::from(digit as u8 - b'1');
                if index < self.options.len() {
                    self.selected = Some(index);
                }
            }
            KeyCode::Char(_) => {
                self.typing = true;
                self.selected = None;
            }
            KeyCode::Enter => {
                let option = self.selected.and_then(|index| self.options.get(index));
                if let Some(option) = option {
                    if option.rejects {
                        self.reason = Some(String::new());
                    } else {
                        return ApprovalAction::Answer {
                            option_id: option.id.clone(),
                            reason: None,
                        };
                    }
                }
            }
            _ => {}
        }
        ApprovalAction::None
    }

    /// What the call would do: the command, the edit as a diff, the patch.
    fn preview(&self, width: usize) -> Vec<Line<'static>> {
        let Some(input) = &self.raw_input else { return Vec::new() };
        let text = |key: &str| input.get(key).and_then(Value::as_str);
        let mut lines = match (self.name.as_deref(), text("command")) {
            (Some("shell") | None, Some(command)) => command
                .lines()
                .flat_map(|line| {
                    hard_wrap(
                        vec![Span::styled(line.to_owned(), theme::accent())],
                        width,
                        &[Span::styled("$ ", theme::dim())],
                        &[Span::raw("  ")],
                    )
                })
                .collect(),
            _ => match (self.name.as_deref(), text("path")) {
                (Some("edit_file"), Some(path)) => diff_view::file_diff(
                    &self.cwd.join(path),
                    Some(text("old_string").unwrap_or_default()),
                    text("new_string").unwrap_or_default(),
                    &self.cwd,
                    width,
                ),
                (Some("write_file"), Some(path)) => diff_view::file_diff(
                    &self.cwd.join(path),
                    None,
                    text("content").unwrap_or_default(),
                    &self.cwd,
                    width,
                ),
                _ => match text("patch") {
                    Some(patch) => diff_view::colour_patch(patch, width),
                    None => {
                        let json = serde_json::to_string(input).unwrap_or_default();
                        wrap_spans(&[Span::styled(json, theme::dim())], width, &[], &[])
                    }
                },
            },
        };
        if lines.len() > PREVIEW_LINES {
            let hidden = lines.len() - PREVIEW_LINES;
            lines.truncate(PREVIEW_LINES);
            lines.push(Line::from(Span::styled(format!("… {hidden} more lines"), theme::dim())));
        }
        lines
    }

    fn lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut lines = wrap_spans(
            &[Span::styled(self.title.clone(), theme::bold())],
            width,
            &[Span::styled(
                if self.from_subagent { "A subagent asks: allow " } else { "Allow " },
                Style::default(),
            )],
            &[Span::raw("  ")],
        );
        if let Some(summary) = &self.summary {
            let spans = [Span::styled(summary.clone(), theme::dim())];
            lines.extend(wrap_spans(&spans, width, &[], &[]));
        }
        lines.extend(self.preview(width));
        lines.push(Line::default());
        for (index, option) in self.options.iter().enumerate() {
            let chosen = self.selected == Some(index);
            let style = if chosen { theme::selected() } else { Style::default() };
            let pointer = if chosen { "› " } else { "  " };
            let label = format!("{}. {}", index + 1, option.label);
            let spans = vec![Span::styled(pointer, style), Span::styled(label, style)];
            lines.push(Line::from(truncate_spans(spans, width)));
        }
        let hint = match &self.reason {
            Some(reason) => {
                lines.push(Line::default());
                lines.push(Line::from(vec![
                    Span::styled("Reason (optional): ", theme::bold()),
                    Span::raw(reason.clone()),
                    Span::styled("▏", theme::accent()),
                ]));
                "enter send · esc back".to_owned()
            }
            None if self.selected.is_some() => {
                format!("enter confirm · ↑↓ or 1-{} change · esc interrupt", self.options.len())
            }
            None => {
                format!(
                    "↑↓ or 1-{} select, then enter · esc interrupt the turn",
                    self.options.len()
                )
            }
        };
        lines.push(Line::from(Span::styled(hint, theme::dim())));
        lines
    }

    /// Rows needed at `width` (borders included).
    pub(crate) fn height(&self, width: u16) -> u16 {
        let inner = usize::from(width.saturating_sub(4)).max(10);
        u16::try_from(self.lines(inner).len() + 2).unwrap_or(u16::MAX)
    }

    pub(crate) fn draw(&self, area: Rect, buffer: &mut Buffer) {
        Clear.render(area, buffer);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Rounded)
            .border_style(theme::warning())
            .title(Span::styled(" Permission needed ", theme::warning()));
        let inner = block.inner(area);
        block.render(area, buffer);
        let inner = Rect { x: inner.x + 1, width: inner.width.saturating_sub(2), ..inner };
        let lines = self.lines(usize::from(inner.width).max(10));
        // Keep the options and hint visible when the preview does not fit.
        let skip = lines.len().saturating_sub(usize::from(inner.height));
        for (row, line) in lines.iter().skip(skip).enumerate() {
            let y = inner.y + u16::try_from(row).unwrap_or(0);
            if y >= inner.y + inner.height {
                break;
            }
            line.clone().render(Rect { x: inner.x, y, width: inner.width, height: 1 }, buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn approval() -> Approval {
        let request: acp::RequestPermissionRequest = serde_json::from_value(json!({
            "sessionId": "s",
            "toolCall": {"toolCallId": "c1", "title": "shell: rm -rf build", "name": "shell",
                         "rawInput": {"command": "rm -rf build"}},
            "options": [
                {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "allow_always", "name": "Always allow shell", "kind": "allow_always"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}
            ]
        }))
        .unwrap();
        Approval::new(RequestId::Number(7), request, Path::new("/w"))
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn a_stray_enter_or_letter_answers_nothing() {
        let mut prompt = approval();
        assert_eq!(prompt.handle_key(key(KeyCode::Enter)), ApprovalAction::None);
        assert_eq!(prompt.handle_key(key(KeyCode::Char('1'))), ApprovalAction::None);
        assert_eq!(
            prompt.handle_key(key(KeyCode::Enter)),
            ApprovalAction::Answer { option_id: "allow_once".into(), reason: None }
        );
    }

    #[test]
    fn a_sentence_typed_at_the_prompt_answers_nothing() {
        let mut prompt = approval();
        for ch in "see item 1".chars() {
            assert_eq!(prompt.handle_key(key(KeyCode::Char(ch))), ApprovalAction::None);
        }
        assert_eq!(prompt.handle_key(key(KeyCode::Enter)), ApprovalAction::None);
        // A selection made before stray typing does not survive it either.
        let mut prompt = approval();
        prompt.handle_key(key(KeyCode::Char('1')));
        prompt.handle_key(key(KeyCode::Char('y')));
        assert_eq!(prompt.handle_key(key(KeyCode::Enter)), ApprovalAction::None);
        // An arrow key shows intent again.
        prompt.handle_key(key(KeyCode::Down));
        prompt.handle_key(key(KeyCode::Char('1')));
        assert_eq!(
            prompt.handle_key(key(KeyCode::Enter)),
            ApprovalAction::Answer { option_id: "allow_once".into(), reason: None }
        );
    }

    #[test]
    fn rejecting_takes_a_reason_and_esc_interrupts() {
        let mut prompt = approval();
        prompt.handle_key(key(KeyCode::Char('3')));
        assert_eq!(prompt.handle_key(key(KeyCode::Enter)), ApprovalAction::None);
        for ch in "too risky".chars() {
            prompt.handle_key(key(KeyCode::Char(ch)));
        }
        assert_eq!(
            prompt.handle_key(key(KeyCode::Enter)),
            ApprovalAction::Answer {
                option_id: "reject_once".into(),
                reason: Some("too risky".into())
            }
        );
        let mut prompt = approval();
        assert_eq!(prompt.handle_key(key(KeyCode::Esc)), ApprovalAction::Interrupt);
    }
}
