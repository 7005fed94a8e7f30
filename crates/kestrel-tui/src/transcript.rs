//! The conversation on screen: cells in order, each rendered once per width (and again
//! only when it changes), and a scroll position counted in lines from the bottom (0
//! follows new output). Drawing touches only the cells that are visible.

use crate::cell::{Cell, RenderContext};
use crate::highlight;
use crate::markdown::MarkdownText;
use crate::tool_cell::ToolCell;
use kestrel_protocol::acp;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Widget;
use std::collections::HashMap;
use std::path::PathBuf;

struct Entry {
    cell: Cell,
    /// Bumped on every change; part of the cache key.
    version: u64,
    cache: Option<Cached>,
}

struct Cached {
    width: usize,
    version: u64,
    epoch: u64,
    expanded: bool,
    lines: Vec<Line<'static>>,
}

/// The transcript: cells, their cached renders and the scroll position.
pub(crate) struct Transcript {
    entries: Vec<Entry>,
    tools: HashMap<String, usize>,
    /// Lines scrolled up from the bottom.
    scroll: usize,
    /// Tool output and reasoning shown in full (ctrl+o).
    expanded: bool,
    cwd: PathBuf,
    /// Height of the last draw, for page-wise scrolling.
    last_height: usize,
}

impl Transcript {
    pub(crate) fn new(cwd: PathBuf) -> Self {
        Self {
            entries: Vec::new(),
            tools: HashMap::new(),
            scroll: 0,
            expanded: false,
            cwd,
            last_height: 20,
        }
    }

    pub(crate) fn set_cwd(&mut self, cwd: PathBuf) {
        self.cwd = cwd;
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.tools.clear();
        self.scroll = 0;
    }

    pub(crate) fn push(&mut self, cell: Cell) {
        if let Cell::Tool(tool) = &cell {
            self.tools.insert(tool.id.clone(), self.entries.len());
        }
        self.entries.push(Entry { cell, version: 0, cache: None });
    }

    fn touch_last(&mut self) -> Option<&mut Cell> {
        let entry = self.entries.last_mut()?;
        entry.version += 1;
        Some(&mut entry.cell)
    }

    /// Appends streamed answer text: to the answer being streamed, or as a new answer
    /// when something else came in between.
    pub(crate) fn push_answer(&mut self, text: &str) {
        if let Some(Cell::Assistant(markdown)) = self.touch_last() {
            markdown.push(text);
            return;
        }
        self.push(Cell::Assistant(MarkdownText::new(text)));
    }

    /// Whether the last cell is an answer being streamed (more text joins it).
    pub(crate) fn answer_in_progress(&self) -> bool {
        matches!(self.entries.last().map(|entry| &entry.cell), Some(Cell::Assistant(_)))
    }

    /// Appends streamed reasoning, like [`Transcript::push_answer`].
    pub(crate) fn push_thought(&mut self, text: &str) {
        if let Some(Cell::Thought(thought)) = self.touch_last() {
            thought.push_str(text);
            return;
        }
        self.push(Cell::Thought(text.to_owned()));
    }

    /// Takes back the last user message if it is `text` (a prompt that was refused, not
    /// sent): cells after it stay, in order.
    pub(crate) fn remove_last_user(&mut self, text: &str) {
        let last_user = self.entries.iter().rposition(|entry| matches!(&entry.cell, Cell::User(_)));
        let Some(index) = last_user else { return };
        if !matches!(&self.entries[index].cell, Cell::User(user) if user == text) {
            return;
        }
        self.entries.remove(index);
        for position in self.tools.values_mut() {
            if *position > index {
                *position -= 1;
            }
        }
    }

    /// Appends a user message; consecutive chunks of one replayed message join.
    pub(crate) fn push_user_chunk(&mut self, text: &str, continues: bool) {
        if continues && let Some(Cell::User(user)) = self.touch_last() {
            user.push_str(text);
            return;
        }
        self.push(Cell::User(text.to_owned()));
    }

    /// The user's messages, oldest first (for the prompt history of a resumed session).
    pub(crate) fn user_prompts(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|entry| match &entry.cell {
                Cell::User(text) => Some(text.clone()),
                Cell::Assistant(_)
                | Cell::Thought(_)
                | Cell::Tool(_)
                | Cell::Plan(_)
                | Cell::Notice { .. }
                | Cell::Info { .. } => None,
            })
            .collect()
    }

    pub(crate) fn tool_call(&mut self, call: acp::ToolCall) {
        let id = call.tool_call_id.0.to_string();
        match self.tools.get(&id).copied() {
            Some(index) => {
                if let Some(entry) = self.entries.get_mut(index) {
                    entry.cell = Cell::Tool(ToolCell::new(call));
                    entry.version += 1;
                }
            }
            None => self.push(Cell::Tool(ToolCell::new(call))),
        }
    }

    /// Applies a tool call update. Returns the child session it names when that is new
    /// (a `task` call's subagent), so the caller can follow it.
    pub(crate) fn tool_update(&mut self, update: acp::ToolCallUpdate) -> Option<String> {
        let id = update.tool_call_id.0.to_string();
        let child = crate::tool_cell::child_session_of(&update);
        let index = self.tools.get(&id).copied();
        let tool = match index.and_then(|index| self.entries.get_mut(index)) {
            Some(Entry { cell: Cell::Tool(tool), version, .. }) => {
                tool.update(update.fields);
                *version += 1;
                tool
            }
            Some(_) | None => {
                self.push(Cell::Tool(ToolCell::from_update(update)));
                let Some(Entry { cell: Cell::Tool(tool), .. }) = self.entries.last_mut() else {
                    return None;
                };
                tool
            }
        };
        let child = child?;
        if tool.child.as_ref().is_some_and(|known| known.session_id == child) {
            return None;
        }
        tool.child = Some(crate::tool_cell::ChildActivity::new(&child));
        Some(child)
    }

    /// Applies an update of the subagent running tool call `call_id`.
    pub(crate) fn child_update(&mut self, call_id: &str, update: &acp::SessionUpdate) {
        let Some(index) = self.tools.get(call_id).copied() else { return };
        if let Some(Entry { cell: Cell::Tool(tool), version, .. }) = self.entries.get_mut(index)
            && let Some(child) = &mut tool.child
            && child.apply(update)
        {
            *version += 1;
        }
    }

    /// Whether tool call `call_id` has finished.
    pub(crate) fn tool_finished(&self, call_id: &str) -> bool {
        let Some(index) = self.tools.get(call_id) else { return false };
        matches!(&self.entries.get(*index).map(|entry| &entry.cell), Some(Cell::Tool(tool)) if tool.is_finished())
    }

    /// Marks calls still running as failed (the turn ended without their result).
    pub(crate) fn fail_unfinished_tools(&mut self) {
        for entry in &mut self.entries {
            if let Cell::Tool(tool) = &mut entry.cell
                && !tool.is_finished()
            {
                tool.status = acp::ToolCallStatus::Failed;
                entry.version += 1;
            }
        }
    }

    pub(crate) fn toggle_expanded(&mut self) {
        self.expanded = !self.expanded;
    }

    pub(crate) fn scroll_up(&mut self, lines: usize) {
        self.scroll = self.scroll.saturating_add(lines);
    }

    pub(crate) fn scroll_down(&mut self, lines: usize) {
        self.scroll = self.scroll.saturating_sub(lines);
    }

    pub(crate) fn page(&self) -> usize {
        self.last_height.saturating_sub(2).max(1)
    }

    pub(crate) fn scroll_to_bottom(&mut self) {
        self.scroll = 0;
    }

    pub(crate) fn is_scrolled(&self) -> bool {
        self.scroll > 0
    }

    fn ensure_rendered(&mut self, index: usize, width: usize) {
        let epoch = highlight::epoch();
        let context = RenderContext { width, cwd: &self.cwd, expanded: self.expanded };
        let Some(entry) = self.entries.get_mut(index) else { return };
        let fresh = entry.cache.as_ref().is_some_and(|cache| {
            cache.width == width
                && cache.version == entry.version
                && cache.epoch == epoch
                && cache.expanded == context.expanded
        });
        if !fresh {
            let lines = entry.cell.render(&context);
            entry.cache = Some(Cached {
                width,
                version: entry.version,
                epoch,
                expanded: context.expanded,
                lines,
            });
        }
    }

    /// Draws the visible part of the transcript into `area`.
    pub(crate) fn draw(&mut self, area: Rect, buffer: &mut Buffer) {
        let width = usize::from(area.width.saturating_sub(1)).max(1);
        let height = usize::from(area.height);
        self.last_height = height;
        // Render from the end until the screen and the scrolled-off part are covered.
        let mut needed = height + self.scroll;
        let mut first = self.entries.len();
        let mut total = 0;
        while first > 0 && total < needed {
            first -= 1;
            self.ensure_rendered(first, width);
            total += self.entries[first].cache.as_ref().map_or(0, |cache| cache.lines.len()) + 1;
        }
        // Scrolled past the top: stop at the first line.
        if first == 0 && total < needed {
            self.scroll = total.saturating_sub(height);
            needed = height + self.scroll;
        }
        let mut lines: Vec<&Line<'static>> = Vec::with_capacity(total);
        let blank = Line::default();
        for entry in &self.entries[first..] {
            if let Some(cache) = &entry.cache {
                lines.extend(cache.lines.iter());
            }
            lines.push(&blank);
        }
        // The separator after the last cell is not needed.
        lines.pop();
        let end = lines.len().saturating_sub(self.scroll.min(lines.len()));
        let start = end.saturating_sub(height.min(needed));
        for (row, line) in lines[start..end].iter().enumerate() {
            let y = area.y + u16::try_from(row).unwrap_or(u16::MAX);
            let line_area = Rect { x: area.x, y, width: area.width, height: 1 };
            // By reference: a frame copies none of the cached lines.
            Widget::render(*line, line_area, buffer);
        }
        if self.scroll > 0 && area.height > 0 {
            let note = format!(" ↓ {} more lines · pgdn or esc to follow ", self.scroll);
            let width = u16::try_from(crate::wrap::width(&note)).unwrap_or(area.width);
            let x = area.x + area.width.saturating_sub(width);
            let row =
                Rect { x, y: area.y + area.height - 1, width: width.min(area.width), height: 1 };
            ratatui::widgets::Clear.render(row, buffer);
            Line::from(ratatui::text::Span::styled(note, crate::theme::warning()))
                .render(row, buffer);
        }
    }
}
