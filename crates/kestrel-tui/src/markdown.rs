//! Markdown to styled terminal lines (headings, emphasis, lists and task lists, quotes,
//! links, tables, rules, highlighted code), and [`MarkdownText`]: a message that grows
//! while it streams, rendered block by block so each new token re-renders only the
//! unfinished last block, never the whole message.

use crate::highlight;
use crate::theme;
use crate::wrap::{self, hard_wrap, spans_width, truncate_spans, wrap_spans};
use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Renders a whole markdown document to lines no wider than `width`.
pub(crate) fn render(source: &str, width: usize) -> Vec<Line<'static>> {
    let mut renderer = Renderer::new(width.max(4));
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    for event in Parser::new_ext(source, options) {
        renderer.event(event);
    }
    renderer.finish()
}

enum Container {
    Quote,
    Item { marker: Span<'static>, width: usize, used: bool },
}

struct CodeBlock {
    language: String,
    text: String,
}

struct Table {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<Vec<Span<'static>>>>,
    header_rows: usize,
}

struct Renderer {
    width: usize,
    lines: Vec<Line<'static>>,
    inline: Vec<Span<'static>>,
    styles: Vec<Style>,
    containers: Vec<Container>,
    lists: Vec<Option<u64>>,
    links: Vec<String>,
    code: Option<CodeBlock>,
    table: Option<Table>,
    needs_gap: bool,
}

impl Renderer {
    fn new(width: usize) -> Self {
        Self {
            width,
            lines: Vec::new(),
            inline: Vec::new(),
            styles: vec![Style::default()],
            containers: Vec::new(),
            lists: Vec::new(),
            links: Vec::new(),
            code: None,
            table: None,
            needs_gap: false,
        }
    }

    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, change: impl FnOnce(Style) -> Style) {
        let style = change(self.style());
        self.styles.push(style);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    fn text(&mut self, text: &str) {
        if let Some(code) = &mut self.code {
            code.text.push_str(text);
            return;
        }
        let style = self.style();
        self.inline.push(Span::styled(text.to_owned(), style));
    }

    /// A blank line between blocks (with the quote bars of the blocks around it).
    fn gap(&mut self) {
        if self.needs_gap && !self.lines.is_empty() {
            let bars: Vec<Span<'static>> = self
                .containers
                .iter()
                .filter(|container| matches!(container, Container::Quote))
                .map(|_| Span::styled("│ ", theme::dim()))
                .collect();
            self.lines.push(Line::from(bars));
        }
        self.needs_gap = false;
    }

    fn prefixes(&mut self) -> (Vec<Span<'static>>, Vec<Span<'static>>) {
        let mut first = Vec::new();
        let mut rest = Vec::new();
        for container in &mut self.containers {
            match container {
                Container::Quote => {
                    first.push(Span::styled("│ ", theme::dim()));
                    rest.push(Span::styled("│ ", theme::dim()));
                }
                Container::Item { marker, width, used } => {
                    if *used {
                        first.push(Span::raw(" ".repeat(*width)));
                    } else {
                        first.push(marker.clone());
                        *used = true;
                    }
                    rest.push(Span::raw(" ".repeat(*width)));
                }
            }
        }
        (first, rest)
    }

    fn flush(&mut self) {
        if self.inline.is_empty() {
            return;
        }
        let spans = std::mem::take(&mut self.inline);
        let (first, rest) = self.prefixes();
        self.lines.extend(wrap_spans(&spans, self.width, &first, &rest));
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                let style = self.style().fg(Color::Cyan);
                self.inline.push(Span::styled(code.into_string(), style));
            }
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
            Event::Html(html) | Event::InlineHtml(html) => {
                let style = theme::dim();
                for (index, line) in html.lines().enumerate() {
                    if index > 0 {
                        self.flush();
                    }
                    self.inline.push(Span::styled(line.to_owned(), style));
                }
            }
            Event::FootnoteReference(label) => self.text(&format!("[^{label}]")),
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.flush();
                self.gap();
                let (first, _) = self.prefixes();
                let room = self.width.saturating_sub(spans_width(&first)).min(60);
                let mut spans = first;
                spans.push(Span::styled("─".repeat(room), theme::dim()));
                self.lines.push(Line::from(spans));
                self.needs_gap = true;
            }
            Event::TaskListMarker(checked) => {
                let (mark, style) =
                    if checked { ("☑ ", theme::success()) } else { ("☐ ", Style::default()) };
                // The checkbox replaces the bullet of its item.
                if let Some(Container::Item { marker, width, .. }) = self.containers.last_mut() {
                    *marker = Span::styled(mark, style);
                    *width = 2;
                } else {
                    self.inline.push(Span::styled(mark, style));
                }
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                self.flush();
                self.gap();
            }
            Tag::Heading { level, .. } => {
                self.flush();
                self.gap();
                let style = match level {
                    HeadingLevel::H1 => Style::default()
                        .fg(Color::Magenta)
                        .add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                    HeadingLevel::H2 => {
                        Style::default().fg(Color::Magenta).add_modifier(Modifier::BOLD)
                    }
                    _ => Style::default().add_modifier(Modifier::BOLD),
                };
                self.styles.push(style);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.gap();
                self.containers.push(Container::Quote);
                self.push_style(|style| style.add_modifier(Modifier::ITALIC));
            }
            Tag::CodeBlock(kind) => {
                self.flush();
                self.gap();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => info.trim().to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(CodeBlock { language, text: String::new() });
            }
            Tag::List(start) => {
                self.flush();
                if self.lists.is_empty() {
                    self.gap();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                self.needs_gap = false;
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let text = format!("{number}. ");
                        *number += 1;
                        text
                    }
                    Some(None) | None => {
                        let bullet = ["• ", "◦ ", "▪ "][depth % 3];
                        bullet.to_owned()
                    }
                };
                let width = wrap::width(&marker);
                let marker = Span::styled(marker, theme::accent());
                self.containers.push(Container::Item { marker, width, used: false });
            }
            Tag::Emphasis => self.push_style(|style| style.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|style| style.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => {
                self.push_style(|style| style.add_modifier(Modifier::CROSSED_OUT))
            }
            Tag::Link { dest_url, .. } => {
                self.links.push(dest_url.into_string());
                self.push_style(|style| style.fg(Color::Blue).add_modifier(Modifier::UNDERLINED));
            }
            Tag::Image { .. } => {
                self.text("[image: ");
            }
            Tag::Table(alignments) => {
                self.flush();
                self.gap();
                self.table = Some(Table { alignments, rows: Vec::new(), header_rows: 0 });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableCell => self.inline.clear(),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush();
                self.needs_gap = true;
            }
            TagEnd::Heading(_) => {
                self.flush();
                self.pop_style();
                self.needs_gap = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.pop_style();
                self.containers.pop();
                self.needs_gap = true;
            }
            TagEnd::CodeBlock => {
                if let Some(code) = self.code.take() {
                    self.code_block(code);
                }
                self.needs_gap = true;
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                self.needs_gap = self.lists.is_empty();
            }
            TagEnd::Item => {
                self.flush();
                // An empty item still shows its marker.
                if let Some(Container::Item { used: false, .. }) = self.containers.last() {
                    let (first, _) = self.prefixes();
                    self.lines.push(Line::from(first));
                }
                self.containers.pop();
                self.needs_gap = false;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link => {
                self.pop_style();
                if let Some(url) = self.links.pop() {
                    let shown: String = self
                        .inline
                        .iter()
                        .rev()
                        .take(8)
                        .map(|span| span.content.as_ref())
                        .collect();
                    let autolink = url.ends_with(shown.trim()) && !shown.trim().is_empty();
                    if !url.is_empty() && !autolink && !url.starts_with('#') {
                        self.inline.push(Span::styled(format!(" ({url})"), theme::dim()));
                    }
                }
            }
            TagEnd::Image => self.text("]"),
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.inline);
                if let Some(row) = self.table.as_mut().and_then(|table| table.rows.last_mut()) {
                    row.push(cell);
                }
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.header_rows = table.rows.len();
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.table_lines(table);
                }
                self.needs_gap = true;
            }
            _ => {}
        }
    }

    fn code_block(&mut self, code: CodeBlock) {
        let text = code.text.strip_suffix('\n').unwrap_or(&code.text);
        let highlighted = highlight::highlight(&code.language, text);
        let plain = || -> Vec<Vec<Span<'static>>> {
            text.split('\n')
                .map(|line| vec![Span::styled(line.to_owned(), Style::default().fg(Color::Gray))])
                .collect()
        };
        let lines = highlighted.unwrap_or_else(plain);
        let (first, rest) = self.prefixes();
        let mut first = first;
        first.push(Span::raw("  "));
        let mut rest = rest;
        rest.push(Span::raw("  "));
        for (index, spans) in lines.into_iter().enumerate() {
            let prefix = if index == 0 { &first } else { &rest };
            self.lines.extend(hard_wrap(spans, self.width, prefix, &rest));
        }
    }

    fn table_lines(&mut self, table: Table) {
        let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        if columns == 0 {
            return;
        }
        let mut widths = vec![0usize; columns];
        for row in &table.rows {
            for (column, cell) in row.iter().enumerate() {
                widths[column] = widths[column].max(spans_width(cell));
            }
        }
        let (first, rest) = self.prefixes();
        let available =
            self.width.saturating_sub(spans_width(&rest)).saturating_sub(3 * (columns - 1));
        while widths.iter().sum::<usize>() > available {
            let Some((widest, _)) = widths.iter().enumerate().max_by_key(|(_, width)| **width)
            else {
                break;
            };
            if widths[widest] <= 3 {
                break;
            }
            widths[widest] -= 1;
        }
        let separator = || Span::styled(" │ ", theme::dim());
        for (row_index, row) in table.rows.iter().enumerate() {
            let mut spans = if row_index == 0 { first.clone() } else { rest.clone() };
            for (column, width) in widths.iter().enumerate() {
                if column > 0 {
                    spans.push(separator());
                }
                let mut cell = row.get(column).cloned().unwrap_or_default();
                if row_index < table.header_rows {
                    for span in &mut cell {
                        span.style = span.style.add_modifier(Modifier::BOLD);
                    }
                }
                let cell = truncate_spans(cell, *width);
                let pad = width.saturating_sub(spans_width(&cell));
                let alignment = table.alignments.get(column).copied().unwrap_or(Alignment::None);
                let (left, right) = match alignment {
                    Alignment::Right => (pad, 0),
                    Alignment::Center => (pad / 2, pad - pad / 2),
                    Alignment::Left | Alignment::None => (0, pad),
                };
                spans.push(Span::raw(" ".repeat(left)));
                spans.extend(cell);
                spans.push(Span::raw(" ".repeat(right)));
            }
            self.lines.push(Line::from(spans));
            if row_index + 1 == table.header_rows {
                let mut rule = rest.clone();
                let parts: Vec<String> = widths.iter().map(|width| "─".repeat(*width)).collect();
                rule.push(Span::styled(parts.join("─┼─"), theme::dim()));
                self.lines.push(Line::from(rule));
            }
        }
    }

    fn finish(mut self) -> Vec<Line<'static>> {
        if let Some(code) = self.code.take() {
            self.code_block(code);
        }
        if let Some(table) = self.table.take() {
            self.table_lines(table);
        }
        self.flush();
        for line in &mut self.lines {
            trim_end(line);
        }
        self.lines
    }
}

fn trim_end(line: &mut Line<'static>) {
    while let Some(last) = line.spans.last_mut() {
        let trimmed = last.content.trim_end().len();
        if trimmed == 0 {
            line.spans.pop();
        } else {
            last.content.to_mut().truncate(trimmed);
            break;
        }
    }
}

/// A markdown message that may still be growing. Finished blocks (ended by a blank
/// line outside a code fence) are rendered once per width and kept; only the last,
/// unfinished block is rendered again when text arrives.
#[derive(Debug, Default, Clone)]
pub(crate) struct MarkdownText {
    source: String,
    /// Where each finished block ends (byte offsets into `source`).
    boundaries: Vec<usize>,
    /// How far `source` has been scanned for boundaries (always at a line start).
    scanned: usize,
    /// The fence (its character and length) we are inside of, if any.
    fence: Option<(char, usize)>,
    /// Whether the block being scanned has any non-blank line yet.
    block_has_text: bool,
    cache: BlockCache,
}

#[derive(Debug, Default, Clone)]
struct BlockCache {
    width: usize,
    epoch: u64,
    blocks: Vec<Vec<Line<'static>>>,
}

impl MarkdownText {
    pub(crate) fn new(text: &str) -> Self {
        let mut markdown = Self::default();
        markdown.push(text);
        markdown
    }

    #[cfg(test)]
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Appends streamed text.
    pub(crate) fn push(&mut self, text: &str) {
        self.source.push_str(text);
        self.scan();
    }

    fn scan(&mut self) {
        while let Some(end) = self.source[self.scanned..].find('\n') {
            let line_end = self.scanned + end + 1;
            let line = &self.source[self.scanned..line_end - 1];
            let trimmed = line.trim_start();
            let indent = line.len() - trimmed.len();
            let fence = fence_of(trimmed).filter(|_| indent < 4);
            match (self.fence, fence) {
                (Some((open_char, open_len)), Some((char, len)))
                    if char == open_char
                        && len >= open_len
                        && trimmed.trim_start_matches(char).trim().is_empty() =>
                {
                    self.fence = None;
                }
                (Some(_), _) => {}
                (None, Some(opened)) => {
                    self.fence = Some(opened);
                    self.block_has_text = true;
                }
                (None, None) => {
                    if trimmed.is_empty() {
                        if self.block_has_text {
                            self.boundaries.push(line_end);
                            self.block_has_text = false;
                        }
                    } else {
                        self.block_has_text = true;
                    }
                }
            }
            self.scanned = line_end;
        }
    }

    /// The message as lines for `width`.
    pub(crate) fn lines(&mut self, width: usize) -> Vec<Line<'static>> {
        let epoch = highlight::epoch();
        if self.cache.width != width || self.cache.epoch != epoch {
            self.cache = BlockCache { width, epoch, blocks: Vec::new() };
        }
        while self.cache.blocks.len() < self.boundaries.len() {
            let index = self.cache.blocks.len();
            let start = if index == 0 { 0 } else { self.boundaries[index - 1] };
            let block = render(&self.source[start..self.boundaries[index]], width);
            self.cache.blocks.push(block);
        }
        let tail_start = self.boundaries.last().copied().unwrap_or(0);
        let tail = render(&self.source[tail_start..], width);
        let mut lines: Vec<Line<'static>> = Vec::new();
        for block in self.cache.blocks.iter().chain(std::iter::once(&tail)) {
            if block.is_empty() {
                continue;
            }
            if !lines.is_empty() {
                lines.push(Line::default());
            }
            lines.extend(block.iter().cloned());
        }
        lines
    }
}

/// The fence a line opens or closes (``` or ~~~, three or more).
fn fence_of(line: &str) -> Option<(char, usize)> {
    let first = line.chars().next()?;
    if first != '`' && first != '~' {
        return None;
    }
    let count = line.chars().take_while(|&ch| ch == first).count();
    (count >= 3).then_some((first, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|line| line.spans.iter().map(|span| span.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn blocks_lists_and_quotes_render_with_markers() {
        let text = "# Title\n\nSome *emphasis* and **bold** with `code`.\n\n- one\n- two\n  - nested\n\n1. first\n2. second\n\n> quoted\n\n- [x] done\n- [ ] todo\n";
        let lines = plain(&render(text, 40));
        assert_eq!(
            lines,
            [
                "Title",
                "",
                "Some emphasis and bold with code.",
                "",
                "• one",
                "• two",
                "  ◦ nested",
                "",
                "1. first",
                "2. second",
                "",
                "│ quoted",
                "",
                "☑ done",
                "☐ todo",
            ]
        );
    }

    #[test]
    fn links_tables_and_code_blocks() {
        let text = "See [docs](https://example.com/docs).\n\n| a | bb |\n|---|---:|\n| 1 | 2 |\n\n```\nfn main() {}\n```\n";
        let lines = plain(&render(text, 60));
        assert_eq!(
            lines,
            [
                "See docs (https://example.com/docs).",
                "",
                "a │ bb",
                "──┼───",
                "1 │  2",
                "",
                "  fn main() {}",
            ]
        );
    }

    #[test]
    fn streaming_text_splits_into_blocks_outside_fences() {
        let mut text = MarkdownText::new("para one\n\n```\ncode\n\nmore code\n");
        assert_eq!(text.boundaries, [10]);
        text.push("```\n\ntail");
        assert_eq!(text.boundaries.len(), 2);
        let lines = plain(&text.lines(40));
        assert_eq!(lines, ["para one", "", "  code", "", "  more code", "", "tail"]);
        let whole = plain(&render(text.source(), 40));
        assert_eq!(whole.len(), lines.len());
    }
}
