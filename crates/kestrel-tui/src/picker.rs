//! A list to choose from (models, modes, sessions): type to filter, Up/Down to move,
//! Enter to choose, Esc to close. Drawn as a box over the bottom of the transcript.

use crate::fuzzy;
use crate::theme;
use crate::wrap::truncate_spans;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Widget};

/// Items visible at once; the list scrolls past this.
const VISIBLE: usize = 10;

/// What a picker chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PickerKind {
    Model,
    Mode,
    Resume,
    Sessions,
    /// A message to edit (Esc Esc).
    Rewind,
    /// A model for a UI opened with none configured (saved to config.toml).
    FirstModel,
}

/// One choice.
#[derive(Debug, Clone)]
pub(crate) struct PickerItem {
    pub(crate) label: String,
    pub(crate) detail: String,
    pub(crate) value: String,
    /// Nesting depth (subagent sessions under their parent).
    pub(crate) depth: usize,
}

/// What a key did to the picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PickerAction {
    None,
    Chosen(String),
    Closed,
}

/// An open picker.
#[derive(Debug, Clone)]
pub(crate) struct Picker {
    pub(crate) kind: PickerKind,
    title: String,
    items: Vec<PickerItem>,
    current: Option<String>,
    filter: String,
    selected: usize,
    empty_text: String,
    /// A filter that looks like PROVIDER/MODEL is offered as a choice of its own (a model
    /// the catalog does not know yet).
    free_text: bool,
}

impl Picker {
    pub(crate) fn new(
        kind: PickerKind,
        title: &str,
        items: Vec<PickerItem>,
        current: Option<String>,
    ) -> Self {
        let selected = current
            .as_ref()
            .and_then(|current| items.iter().position(|item| &item.value == current))
            .unwrap_or(0);
        Self {
            kind,
            title: title.to_owned(),
            items,
            current,
            filter: String::new(),
            selected,
            empty_text: "nothing to choose from".to_owned(),
            free_text: false,
        }
    }

    /// Offers the typed filter itself as a choice when it is PROVIDER/MODEL.
    pub(crate) fn with_free_text(mut self) -> Self {
        self.free_text = true;
        self
    }

    /// The filter as a choice of its own, when offered and not an item already.
    fn free_choice(&self) -> Option<&str> {
        let looks_right = self
            .filter
            .split_once('/')
            .is_some_and(|(provider, model)| !provider.is_empty() && !model.is_empty());
        let known = self.items.iter().any(|item| item.value == self.filter);
        (self.free_text && looks_right && !known).then_some(self.filter.as_str())
    }

    pub(crate) fn with_empty_text(mut self, text: &str) -> Self {
        self.empty_text = text.to_owned();
        self
    }

    /// Indices of the items the filter lets through, in display order.
    fn visible(&self) -> Vec<usize> {
        if self.filter.is_empty() {
            return (0..self.items.len()).collect();
        }
        let haystacks: Vec<String> =
            self.items.iter().map(|item| format!("{} {}", item.label, item.detail)).collect();
        fuzzy::rank(&self.filter, haystacks.iter().map(String::as_str), usize::MAX)
    }

    pub(crate) fn handle_key(&mut self, key: KeyEvent) -> PickerAction {
        let visible = self.visible();
        let rows = visible.len() + usize::from(self.free_choice().is_some());
        match key.code {
            KeyCode::Esc => return PickerAction::Closed,
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                return PickerAction::Closed;
            }
            KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down => self.selected = (self.selected + 1).min(rows.saturating_sub(1)),
            KeyCode::PageUp => self.selected = self.selected.saturating_sub(VISIBLE),
            KeyCode::PageDown => {
                self.selected = (self.selected + VISIBLE).min(rows.saturating_sub(1))
            }
            KeyCode::Enter => {
                if let Some(item) = visible.get(self.selected).and_then(|i| self.items.get(*i)) {
                    return PickerAction::Chosen(item.value.clone());
                }
                if let Some(free) = self.free_choice() {
                    return PickerAction::Chosen(free.to_owned());
                }
            }
            KeyCode::Backspace => {
                self.filter.pop();
                self.selected = 0;
            }
            KeyCode::Char(ch) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.filter.push(ch);
                self.selected = 0;
            }
            _ => {}
        }
        PickerAction::None
    }

    /// Rows the picker wants (border, filter, items, hint).
    pub(crate) fn height(&self) -> u16 {
        let free = usize::from(self.free_choice().is_some());
        let rows = self.items.len().clamp(1, VISIBLE) + 4 + free;
        u16::try_from(rows).unwrap_or(14)
    }

    pub(crate) fn draw(&self, area: Rect, buffer: &mut Buffer) {
        Clear.render(area, buffer);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Rounded)
            .border_style(theme::accent())
            .title(Span::styled(format!(" {} ", self.title), theme::bold()));
        let inner = block.inner(area);
        block.render(area, buffer);
        if inner.height == 0 {
            return;
        }
        let width = usize::from(inner.width);
        let mut lines: Vec<Line<'static>> = Vec::new();
        let filter = if self.filter.is_empty() {
            Span::styled("type to filter", theme::dim())
        } else {
            Span::raw(self.filter.clone())
        };
        lines.push(Line::from(vec![Span::styled("/ ", theme::dim()), filter]));
        let visible = self.visible();
        let rows = usize::from(inner.height).saturating_sub(2).max(1);
        let first = self.selected.saturating_sub(rows.saturating_sub(1));
        let free = self.free_choice();
        if visible.is_empty() && free.is_none() {
            lines.push(Line::from(Span::styled(self.empty_text.clone(), theme::dim())));
        }
        for (position, index) in visible.iter().enumerate().skip(first).take(rows) {
            let Some(item) = self.items.get(*index) else { continue };
            let chosen = position == self.selected;
            let current = self.current.as_ref() == Some(&item.value);
            let pointer = if chosen { "› " } else { "  " };
            let style = if chosen { theme::selected() } else { Style::default() };
            let mut spans = vec![Span::styled(pointer, style)];
            if item.depth > 0 {
                spans
                    .push(Span::styled(format!("{}└ ", "  ".repeat(item.depth - 1)), theme::dim()));
            }
            spans.push(Span::styled(item.label.clone(), style));
            if current {
                spans.push(Span::styled(" (current)", theme::success()));
            }
            if !item.detail.is_empty() {
                spans.push(Span::styled(format!("  {}", item.detail), theme::dim()));
            }
            lines.push(Line::from(truncate_spans(spans, width)));
        }
        if let Some(free) = free {
            let chosen = self.selected >= visible.len();
            let style = if chosen { theme::selected() } else { Style::default() };
            let spans = vec![
                Span::styled(if chosen { "› " } else { "  " }, style),
                Span::styled(format!("use {free}"), style),
                Span::styled("  (not in the list)", theme::dim()),
            ];
            lines.push(Line::from(truncate_spans(spans, width)));
        }
        let hint = "↑↓ move · enter choose · esc close";
        for (row, line) in lines.into_iter().enumerate() {
            let y = inner.y + u16::try_from(row).unwrap_or(0);
            if y >= inner.y + inner.height.saturating_sub(1) {
                break;
            }
            line.render(Rect { x: inner.x, y, width: inner.width, height: 1 }, buffer);
        }
        let hint_row =
            Rect { x: inner.x, y: inner.y + inner.height - 1, width: inner.width, height: 1 };
        Line::from(Span::styled(hint, theme::dim())).render(hint_row, buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(label: &str) -> PickerItem {
        PickerItem { label: label.into(), detail: String::new(), value: label.into(), depth: 0 }
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn typing_filters_and_enter_chooses_the_selected_item() {
        let items = vec![item("ask"), item("auto"), item("yolo")];
        let mut picker = Picker::new(PickerKind::Mode, "Mode", items, Some("auto".into()));
        assert_eq!(picker.handle_key(key(KeyCode::Enter)), PickerAction::Chosen("auto".into()));
        picker.handle_key(key(KeyCode::Char('y')));
        assert_eq!(picker.handle_key(key(KeyCode::Enter)), PickerAction::Chosen("yolo".into()));
        picker.handle_key(key(KeyCode::Char('z')));
        assert_eq!(picker.handle_key(key(KeyCode::Enter)), PickerAction::None);
        assert_eq!(picker.handle_key(key(KeyCode::Esc)), PickerAction::Closed);
    }
}
