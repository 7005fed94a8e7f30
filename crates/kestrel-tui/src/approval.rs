//! The permission prompt for `ask` mode. It cannot be answered by a stray key: keys
//! arriving within [`GUARD`] of it appearing are not its (typed text goes to the
//! composer), nothing is selected when it appears, digits and arrows only select, and
//! Enter confirms a selection. Esc selects "reject" (Enter then rejects once without a
//! reason: nothing runs, the turn goes on and the model learns it was refused); choosing
//! "reject" otherwise asks for an optional reason (typed or pasted). Saving an "always"
//! rule to the config needs Enter twice. ctrl+c interrupts the whole turn. The preview
//! fills the rows there are and scrolls with PgUp/PgDn; on a short terminal the call's
//! title and the options stay visible and the preview gives way.

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
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Keys arriving this soon after a prompt appears were meant for what was there before.
pub(crate) const GUARD: Duration = Duration::from_millis(250);
/// The option that also saves the rule to the user's config (worker's option id).
const SAVE_OPTION: &str = "allow_always_save";

/// One answer the worker offered.
#[derive(Debug, Clone)]
pub(crate) struct ApprovalOption {
    pub(crate) id: String,
    pub(crate) label: String,
    pub(crate) rejects: bool,
    /// `reject_once` (rather than `reject_always`): what Esc answers.
    pub(crate) once: bool,
}

/// What a key did to the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApprovalAction {
    None,
    /// The key was text, not an answer: it belongs in the composer.
    Typed,
    Answer {
        option_id: String,
        reason: Option<String>,
    },
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
    /// When a frame showing it at the front was flushed (keys before [`GUARD`] has passed
    /// since are not its); `None` while not yet seen.
    shown_at: Option<Instant>,
    /// Esc selected "reject": Enter rejects without asking a reason.
    esc_selected: bool,
    /// Enter was pressed once on the option that saves a rule to the config.
    confirming_save: bool,
    /// The first preview line shown (PgUp/PgDn).
    scroll: usize,
    /// The preview's length and the rows it got at the last draw (for paging).
    preview_len: Cell<usize>,
    page: Cell<usize>,
    /// The first preview line the last draw showed (the scroll, clamped).
    shown_start: Cell<usize>,
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
                once: !matches!(option.kind, acp::PermissionOptionKind::RejectAlways),
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
            shown_at: None,
            esc_selected: false,
            confirming_save: false,
            scroll: 0,
            preview_len: Cell::new(0),
            page: Cell::new(1),
            shown_start: Cell::new(0),
        }
    }

    /// It came to the front of the prompts now: the guard starts again once it is drawn.
    pub(crate) fn shown_now(&mut self) {
        self.shown_at = None;
    }

    /// A frame showing it was flushed to the terminal: the guard starts now (the first
    /// time). Returns whether this was its first frame.
    pub(crate) fn drawn(&mut self) -> bool {
        let first = self.shown_at.is_none();
        if first {
            self.shown_at = Some(Instant::now());
        }
        first
    }

    /// As if drawn long enough ago for keys to be its.
    #[cfg(test)]
    pub(crate) fn arm_for_test(&mut self) {
        self.shown_at = Some(Instant::now().checked_sub(GUARD).unwrap_or_else(Instant::now));
    }

    /// Text meant for the composer was typed (before the guard passed): digits stop
    /// selecting until an arrow key, as when it is typed at the prompt.
    pub(crate) fn typed_elsewhere(&mut self) {
        self.typing = true;
        self.selected = None;
    }

    /// Whether keys are its yet ([`GUARD`] has passed since it was shown).
    pub(crate) fn armed(&self) -> bool {
        self.shown_at.is_some_and(|at| at.elapsed() >= GUARD)
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
        let before = self.selected;
        let action = self.choose_key(key);
        if self.selected != before {
            self.confirming_save = false;
            self.esc_selected &= key.code == KeyCode::Esc;
        }
        action
    }

    fn choose_key(&mut self, key: KeyEvent) -> ApprovalAction {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc if self.confirming_save => self.confirming_save = false,
            KeyCode::Esc => {
                // Selects "reject once" (Enter confirms); a prompt offering no rejection
                // has nothing to select.
                let reject = self
                    .options
                    .iter()
                    .position(|option| option.rejects && option.once)
                    .or_else(|| self.options.iter().position(|option| option.rejects));
                if let Some(index) = reject {
                    self.typing = false;
                    self.selected = Some(index);
                    self.esc_selected = true;
                }
            }
            KeyCode::Up => {
                self.typing = false;
                self.selected = Some(self.selected.map_or(0, |index| index.saturating_sub(1)))
            }
            KeyCode::Down => {
                self.typing = false;
                let last = self.options.len().saturating_sub(1);
                self.selected = Some(self.selected.map_or(0, |index| (index + 1).min(last)));
            }
            KeyCode::PageDown => {
                let last = self.preview_len.get().saturating_sub(1);
                self.scroll = (self.shown_start.get() + self.page.get().max(1)).min(last);
            }
            KeyCode::PageUp => {
                self.scroll = self.shown_start.get().saturating_sub(self.page.get().max(1))
            }
            KeyCode::Char('o') if ctrl => {
                // Ctrl+O pages on, back to the top after the end.
                let shown = self.shown_start.get();
                let last = self.preview_len.get().saturating_sub(1);
                let next = shown + self.page.get().max(1);
                self.scroll = if shown > 0 && next > last { 0 } else { next.min(last) };
            }
            KeyCode::Char(digit @ '1'..='9') if !self.typing && !ctrl => {
                let index = usize::from(digit as u8 - b'1');
                if index < self.options.len() {
                    self.selected = Some(index);
                }
            }
            KeyCode::Char(_) if !ctrl => {
                self.typing = true;
                self.selected = None;
                return ApprovalAction::Typed;
            }
            KeyCode::Backspace if self.typing => return ApprovalAction::Typed,
            KeyCode::Enter => {
                let option = self.selected.and_then(|index| self.options.get(index));
                if let Some(option) = option {
                    if option.rejects && !self.esc_selected {
                        self.reason = Some(String::new());
                    } else if option.id == SAVE_OPTION && !self.confirming_save {
                        self.confirming_save = true;
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

    /// Pasted text goes into the reason when one is being typed (lines joined by
    /// spaces); elsewhere a paste answers nothing. Returns whether it was taken.
    pub(crate) fn paste(&mut self, text: &str) -> bool {
        let Some(reason) = &mut self.reason else { return false };
        let joined: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        if !reason.is_empty() && !reason.ends_with(' ') && !joined.is_empty() {
            reason.push(' ');
        }
        reason.push_str(&joined.join(" "));
        true
    }

    /// What the prompt asks about, for notices.
    pub(crate) fn title(&self) -> &str {
        &self.title
    }

    /// What the call would do: the command, the edit as a diff, the patch.
    fn preview(&self, width: usize) -> Vec<Line<'static>> {
        let Some(input) = &self.raw_input else { return Vec::new() };
        let text = |key: &str| input.get(key).and_then(Value::as_str);
        match (self.name.as_deref(), text("command")) {
            // One `$`: the command's later lines (a heredoc, a script) are not commands.
            (Some("shell") | None, Some(command)) => command
                .lines()
                .enumerate()
                .flat_map(|(index, line)| {
                    let first =
                        if index == 0 { Span::styled("$ ", theme::dim()) } else { Span::raw("  ") };
                    hard_wrap(
                        vec![Span::styled(line.to_owned(), theme::accent())],
                        width,
                        &[first],
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
        }
    }

    /// The prompt's parts at `width`, in the order shown.
    fn sections(&self, width: usize) -> Sections {
        let head = wrap_spans(
            &[Span::styled(self.title.clone(), theme::bold())],
            width,
            &[Span::styled(
                if self.from_subagent { "A subagent asks: allow " } else { "Allow " },
                Style::default(),
            )],
            &[Span::raw("  ")],
        );
        let summary = match &self.summary {
            Some(summary) => {
                wrap_spans(&[Span::styled(summary.clone(), theme::dim())], width, &[], &[])
            }
            None => Vec::new(),
        };
        let mut choices = Vec::new();
        for (index, option) in self.options.iter().enumerate() {
            let chosen = self.selected == Some(index);
            let style = if chosen { theme::selected() } else { Style::default() };
            let pointer = if chosen { "› " } else { "  " };
            let label = format!("{}. {}", index + 1, option.label);
            let spans = vec![Span::styled(pointer, style), Span::styled(label, style)];
            choices.push(Line::from(truncate_spans(spans, width)));
        }
        let count = self.options.len();
        let hint = match &self.reason {
            Some(reason) => {
                choices.push(Line::default());
                let spans = [
                    Span::styled("Reason (optional): ", theme::bold()),
                    Span::raw(reason.clone()),
                    Span::styled("▏", theme::accent()),
                ];
                choices.extend(wrap_spans(&spans, width, &[], &[Span::raw("  ")]));
                "enter send · esc back".to_owned()
            }
            None if self.confirming_save => {
                "enter again to save this rule to your config.toml · esc back".to_owned()
            }
            None if !self.armed() => "…".to_owned(),
            None if self.esc_selected => {
                format!("enter reject · ↑↓ or 1-{count} change · ctrl+c stop the turn")
            }
            None if self.selected.is_some() => {
                format!(
                    "enter confirm · ↑↓ or 1-{count} change · esc reject · ctrl+c stop the turn"
                )
            }
            None => {
                format!("↑↓ or 1-{count} select, then enter · esc reject · ctrl+c stop the turn")
            }
        };
        let hint = Line::from(truncate_spans(vec![Span::styled(hint, theme::dim())], width));
        Sections { head, summary, preview: self.preview(width), choices, hint }
    }

    /// The lines to show in `rows` rows: the call's title and the options (with the
    /// reason and the keys) first, then as much of the preview as fits (its cut marked),
    /// then the policy's summary. A stray key cannot answer, so hiding what is being
    /// approved would be the one way to approve blindly.
    fn fit(&self, width: usize, rows: usize) -> Vec<Line<'static>> {
        let Sections { head, summary, mut preview, choices, hint } = self.sections(width);
        let needed = choices.len() + 1;
        if rows <= needed + 1 {
            // Too short for everything: the title's first line, then the options.
            let mut lines: Vec<Line<'static>> = head.into_iter().take(1).collect();
            lines.extend(choices);
            lines.push(hint);
            lines.truncate(rows);
            return lines;
        }
        let mut budget = rows - needed;
        let head_rows = head.len().min(budget);
        budget -= head_rows;
        // The policy's summary when it leaves the preview a few rows.
        let least_preview = preview.len().min(3);
        let summary_rows = if summary.len() + least_preview <= budget { summary.len() } else { 0 };
        budget -= summary_rows;
        self.preview_len.set(preview.len());
        preview = self.window(preview, budget);
        budget -= preview.len();
        let mut lines: Vec<Line<'static>> = head.into_iter().take(head_rows).collect();
        lines.extend(summary.into_iter().take(summary_rows));
        lines.extend(preview);
        if budget > 0 {
            lines.push(Line::default());
        }
        lines.extend(choices);
        lines.push(hint);
        lines
    }

    /// The part of the preview shown in `rows` rows from the scroll position, its cuts
    /// marked (with the keys that show the rest).
    fn window(&self, preview: Vec<Line<'static>>, rows: usize) -> Vec<Line<'static>> {
        let total = preview.len();
        if total <= rows || rows == 0 {
            self.shown_start.set(0);
            self.page.set(rows.max(1));
            return if rows == 0 { Vec::new() } else { preview };
        }
        // Scrolled to the end, the window still fills its rows.
        let start = self.scroll.min(total - rows.saturating_sub(1).max(1));
        self.shown_start.set(start);
        // A content line comes first: the markers only take rows left beside one.
        let mut room = rows;
        let mut lines = Vec::new();
        if start > 0 && room >= 2 {
            let marker = format!("↑ {start} {} above (pgup)", lines_word(start));
            lines.push(Line::from(Span::styled(marker, theme::dim())));
            room -= 1;
        }
        let rest = total - start;
        let shown = if rest > room { room.saturating_sub(1).max(1) } else { rest };
        self.page.set(shown);
        lines.extend(preview.into_iter().skip(start).take(shown));
        let hidden = rest - shown;
        if hidden > 0 && room > shown {
            let marker = format!("… {hidden} more {} (pgdn)", lines_word(hidden));
            lines.push(Line::from(Span::styled(marker, theme::dim())));
        }
        lines
    }

    /// Rows needed at `width` (borders included).
    pub(crate) fn height(&self, width: u16) -> u16 {
        let inner = usize::from(width.saturating_sub(4)).max(10);
        let rows = self.fit(inner, usize::MAX / 2).len();
        u16::try_from(rows + 2).unwrap_or(u16::MAX)
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
        let lines = self.fit(usize::from(inner.width).max(10), usize::from(inner.height));
        for (row, line) in lines.into_iter().enumerate() {
            let y = inner.y + u16::try_from(row).unwrap_or(u16::MAX);
            if y >= inner.y + inner.height {
                break;
            }
            line.render(Rect { x: inner.x, y, width: inner.width, height: 1 }, buffer);
        }
    }
}

/// "line" or "lines", for `count` of them.
fn lines_word(count: usize) -> &'static str {
    if count == 1 { "line" } else { "lines" }
}

/// The parts of a prompt, before fitting them to a height.
struct Sections {
    head: Vec<Line<'static>>,
    summary: Vec<Line<'static>>,
    preview: Vec<Line<'static>>,
    /// The options, then the reason being typed.
    choices: Vec<Line<'static>>,
    hint: Line<'static>,
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
        armed(Approval::new(RequestId::Number(7), request, Path::new("/w")))
    }

    /// As if shown long enough ago for keys to be its.
    fn armed(mut prompt: Approval) -> Approval {
        prompt.arm_for_test();
        prompt
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
            assert_eq!(prompt.handle_key(key(KeyCode::Char(ch))), ApprovalAction::Typed);
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
    fn rejecting_takes_a_typed_or_pasted_reason_and_esc_rejects_once() {
        let mut prompt = approval();
        prompt.handle_key(key(KeyCode::Char('3')));
        assert_eq!(prompt.handle_key(key(KeyCode::Enter)), ApprovalAction::None);
        for ch in "too risky".chars() {
            prompt.handle_key(key(KeyCode::Char(ch)));
        }
        assert!(prompt.paste("for\nnow\n"));
        assert_eq!(
            prompt.handle_key(key(KeyCode::Enter)),
            ApprovalAction::Answer {
                option_id: "reject_once".into(),
                reason: Some("too risky for now".into())
            }
        );
        let mut prompt = approval();
        assert!(!prompt.paste("1"), "a paste outside the reason answers nothing");
        assert_eq!(prompt.handle_key(key(KeyCode::Esc)), ApprovalAction::None, "esc selects");
        assert_eq!(
            prompt.handle_key(key(KeyCode::Enter)),
            ApprovalAction::Answer { option_id: "reject_once".into(), reason: None }
        );
    }

    #[test]
    fn saving_a_rule_to_the_config_needs_enter_twice() {
        let request: acp::RequestPermissionRequest = serde_json::from_value(json!({
            "sessionId": "s",
            "toolCall": {"toolCallId": "c1", "title": "shell: ls", "name": "shell"},
            "options": [
                {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "allow_always", "name": "Always", "kind": "allow_always"},
                {"optionId": "allow_always_save", "name": "Always, save", "kind": "allow_always"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}
            ]
        }))
        .unwrap();
        let mut prompt = armed(Approval::new(RequestId::Number(1), request, Path::new("/w")));
        prompt.handle_key(key(KeyCode::Char('3')));
        assert_eq!(prompt.handle_key(key(KeyCode::Enter)), ApprovalAction::None);
        assert!(text(&prompt.fit(80, 20)).contains("enter again to save"));
        // Esc steps back; a different choice starts over.
        prompt.handle_key(key(KeyCode::Esc));
        assert_eq!(prompt.handle_key(key(KeyCode::Enter)), ApprovalAction::None);
        assert_eq!(
            prompt.handle_key(key(KeyCode::Enter)),
            ApprovalAction::Answer { option_id: "allow_always_save".into(), reason: None }
        );
    }

    #[test]
    fn a_long_preview_fills_the_rows_and_pages() {
        let mut prompt = approval();
        let long: String = (1..=80).map(|n| format!("echo {n}\n")).collect();
        prompt.raw_input = Some(json!({"command": long}));
        let first = text(&prompt.fit(60, 30));
        assert!(first.contains("echo 20") && first.contains("more lines (pgdn)"), "{first}");
        for _ in 0..10 {
            prompt.handle_key(key(KeyCode::PageDown));
            prompt.fit(60, 30);
        }
        let last = text(&prompt.fit(60, 30));
        assert!(last.contains("  echo 80") && last.contains("lines above (pgup)"), "{last}");
        assert!(!last.contains("more lines"), "{last}");
    }

    fn text(lines: &[Line<'_>]) -> String {
        let rows: Vec<String> = lines
            .iter()
            .map(|line| line.spans.iter().map(|span| span.content.as_ref()).collect())
            .collect();
        rows.join("\n")
    }

    #[test]
    fn a_short_prompt_keeps_the_title_and_options_and_cuts_the_preview() {
        let mut prompt = approval();
        let long: String = (1..=30).map(|n| format!("echo {n}\n")).collect();
        prompt.raw_input = Some(json!({"command": long}));
        let tall = text(&prompt.fit(60, 100));
        assert!(tall.contains("  echo 30") && !tall.contains("more lines"), "{tall}");
        for rows in [9, 7] {
            let short = prompt.fit(60, rows);
            assert!(short.len() <= rows);
            let short = text(&short);
            assert!(short.starts_with("Allow shell: rm -rf build"), "{short}");
            assert!(short.contains("3. Reject") && short.contains("esc reject"), "{short}");
        }
        let seven = text(&prompt.fit(60, 7));
        assert!(seven.contains("$ echo 1\n… 29 more lines (pgdn)"), "{seven}");
        // One row for the preview: a line of it, no marker.
        let six = text(&prompt.fit(60, 6));
        assert!(six.contains("$ echo 1\n") && !six.contains("more lines"), "{six}");
        // Two rows, scrolled: a line of it, then a marker if one fits.
        prompt.handle_key(key(KeyCode::PageDown));
        let seven = text(&prompt.fit(60, 7));
        assert!(seven.contains("echo 2") && seven.contains("↑ 1 line above (pgup)"), "{seven}");
        prompt.handle_key(key(KeyCode::PageUp));
        let tiny = text(&prompt.fit(60, 3));
        assert_eq!(tiny, "Allow shell: rm -rf build\n  1. Allow once\n  2. Always allow shell");
    }
}
