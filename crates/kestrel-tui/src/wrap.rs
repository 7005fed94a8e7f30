//! Word wrapping of styled text to a width in terminal columns (wide and combining
//! characters counted by `unicode-width`), with a prefix on the first line and another on
//! the lines that follow (list markers, quote bars, indentation).

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The display width of `text` in terminal columns.
pub(crate) fn width(text: &str) -> usize {
    UnicodeWidthStr::width(text)
}

/// The display width of a line's spans.
pub(crate) fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(|span| width(&span.content)).sum()
}

/// A run of characters of one style: a piece of a word or a space.
#[derive(Debug, Clone)]
struct Piece {
    text: String,
    style: Style,
    width: usize,
}

/// Tab stops every this many columns (of the text, prefixes not counted).
const TAB_STOP: usize = 8;
/// Stands under a combining mark that has no character to combine with (after a space,
/// at the start): a cell must never start with a zero-width character.
const MARK_BASE: char = '\u{25cc}';

/// Words (pieces without spaces, possibly of several styles) and the spaces between them.
#[derive(Debug)]
enum Token {
    Word(Vec<Piece>),
    Space(Piece),
}

fn tokens(spans: &[Span<'_>]) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut word: Vec<Piece> = Vec::new();
    let mut column = 0;
    for span in spans {
        for ch in span.content.chars() {
            // A tab is the spaces up to the next tab stop.
            let (ch, count) = match ch {
                '\t' => (' ', TAB_STOP - column % TAB_STOP),
                _ => (ch, 1),
            };
            let ch_width = ch.width().unwrap_or(0);
            if ch_width == 0 && word.is_empty() {
                word.push(Piece { text: MARK_BASE.to_string(), style: span.style, width: 1 });
                column += 1;
            }
            column += ch_width * count;
            if ch == ' ' {
                if !word.is_empty() {
                    tokens.push(Token::Word(std::mem::take(&mut word)));
                }
                if let Some(Token::Space(piece)) = tokens.last_mut()
                    && piece.style == span.style
                {
                    piece.text.push_str(&" ".repeat(count));
                    piece.width += count;
                } else {
                    tokens.push(Token::Space(Piece {
                        text: " ".repeat(count),
                        style: span.style,
                        width: count,
                    }));
                }
                continue;
            }
            match word.last_mut() {
                Some(piece) if piece.style == span.style => {
                    piece.text.push(ch);
                    piece.width += ch_width;
                }
                _ => word.push(Piece { text: ch.to_string(), style: span.style, width: ch_width }),
            }
        }
    }
    if !word.is_empty() {
        tokens.push(Token::Word(word));
    }
    tokens
}

struct LineBuilder<'p> {
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    used: usize,
    width: usize,
    first_prefix: &'p [Span<'static>],
    rest_prefix: &'p [Span<'static>],
    /// Whether the current line has content beyond its prefix.
    content: bool,
}

impl<'p> LineBuilder<'p> {
    fn new(width: usize, first: &'p [Span<'static>], rest: &'p [Span<'static>]) -> Self {
        let mut builder = Self {
            lines: Vec::new(),
            current: Vec::new(),
            used: 0,
            width: width.max(1),
            first_prefix: first,
            rest_prefix: rest,
            content: false,
        };
        builder.start(true);
        builder
    }

    fn start(&mut self, first: bool) {
        let prefix = if first { self.first_prefix } else { self.rest_prefix };
        self.current = prefix.to_vec();
        self.used = spans_width(prefix);
        self.content = false;
        // A prefix wider than the line leaves at least one column for text.
        if self.used >= self.width {
            self.width = self.used + 1;
        }
    }

    fn break_line(&mut self) {
        let line = Line::from(std::mem::take(&mut self.current));
        self.lines.push(line);
        self.start(false);
    }

    fn room(&self) -> usize {
        self.width.saturating_sub(self.used)
    }

    fn push_piece(&mut self, piece: &Piece) {
        self.used += piece.width;
        self.content = true;
        match self.current.last_mut() {
            Some(span) if span.style == piece.style && !span.content.is_empty() => {
                span.content.to_mut().push_str(&piece.text);
            }
            _ => self.current.push(Span::styled(piece.text.clone(), piece.style)),
        }
    }

    /// Places a word longer than a whole line character by character.
    fn push_split(&mut self, word: &[Piece]) {
        for piece in word {
            for ch in piece.text.chars() {
                let ch_width = ch.width().unwrap_or(0);
                if ch_width > self.room() && self.content {
                    self.break_line();
                }
                let single = Piece { text: ch.to_string(), style: piece.style, width: ch_width };
                self.push_piece(&single);
            }
        }
    }

    fn finish(mut self) -> Vec<Line<'static>> {
        let line = Line::from(std::mem::take(&mut self.current));
        self.lines.push(line);
        self.lines
    }
}

/// Wraps `spans` into lines no wider than `width` (words kept whole where they fit),
/// `first_prefix` before the first line and `rest_prefix` before the others. Always
/// returns at least one line.
pub(crate) fn wrap_spans(
    spans: &[Span<'_>],
    width: usize,
    first_prefix: &[Span<'static>],
    rest_prefix: &[Span<'static>],
) -> Vec<Line<'static>> {
    let mut builder = LineBuilder::new(width, first_prefix, rest_prefix);
    for token in tokens(spans) {
        match token {
            Token::Space(piece) => {
                // Spaces at a line break are dropped; at the very start they are kept
                // (indentation in the text itself).
                if piece.width <= builder.room() {
                    if builder.content || builder.lines.is_empty() {
                        builder.push_piece(&piece);
                    }
                } else if builder.content {
                    builder.break_line();
                }
            }
            Token::Word(pieces) => {
                let word_width: usize = pieces.iter().map(|piece| piece.width).sum();
                if word_width > builder.room() && builder.content {
                    trim_trailing_space(&mut builder.current);
                    builder.break_line();
                }
                if word_width > builder.room() {
                    builder.push_split(&pieces);
                } else {
                    for piece in &pieces {
                        builder.push_piece(piece);
                    }
                }
            }
        }
    }
    let mut lines = builder.finish();
    for line in &mut lines {
        trim_trailing_space(&mut line.spans);
    }
    lines
}

/// Cuts a line to `width` columns without wrapping (code, tables), marking the cut with `…`.
pub(crate) fn truncate_spans(spans: Vec<Span<'static>>, width: usize) -> Vec<Span<'static>> {
    if spans_width(&spans) <= width {
        return spans;
    }
    let mut out = Vec::new();
    let mut used = 0;
    let limit = width.saturating_sub(1);
    for span in spans {
        let mut text = String::new();
        for ch in span.content.chars() {
            let ch_width = ch.width().unwrap_or(0);
            if used + ch_width > limit {
                break;
            }
            used += ch_width;
            text.push(ch);
        }
        let full = text.len() == span.content.len();
        out.push(Span::styled(text, span.style));
        if !full {
            break;
        }
    }
    out.push(Span::raw("…"));
    out
}

/// Splits a line into rows of exactly `width` columns at most, character by character
/// (code blocks and diffs are wrapped hard, so every character stays visible).
pub(crate) fn hard_wrap(
    spans: Vec<Span<'static>>,
    width: usize,
    prefix: &[Span<'static>],
    rest_prefix: &[Span<'static>],
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut current: Vec<Span<'static>> = prefix.to_vec();
    let mut used = spans_width(prefix);
    let width = width.max(used + 1);
    for span in spans {
        let mut text = String::new();
        for ch in span.content.chars() {
            let ch_width = ch.width().unwrap_or(0);
            if used + ch_width > width {
                if !text.is_empty() {
                    current.push(Span::styled(std::mem::take(&mut text), span.style));
                }
                lines.push(Line::from(std::mem::replace(&mut current, rest_prefix.to_vec())));
                used = spans_width(rest_prefix);
            }
            used += ch_width;
            text.push(ch);
        }
        if !text.is_empty() {
            current.push(Span::styled(text, span.style));
        }
    }
    lines.push(Line::from(current));
    lines
}

fn trim_trailing_space(spans: &mut Vec<Span<'static>>) {
    loop {
        let count = spans.len();
        let Some(last) = spans.last_mut() else { break };
        let trimmed = last.content.trim_end_matches(' ').len();
        if trimmed == last.content.len() {
            break;
        }
        if trimmed > 0 {
            last.content.to_mut().truncate(trimmed);
            break;
        }
        // Keep a prefix made only of spaces (indentation) when nothing else is left.
        if count == 1 {
            break;
        }
        spans.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|line| line.spans.iter().map(|span| span.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn words_wrap_at_the_width_with_prefixes() {
        let spans = [Span::raw("the quick brown fox jumps over the lazy dog")];
        let lines = wrap_spans(&spans, 12, &[Span::raw("- ")], &[Span::raw("  ")]);
        assert_eq!(
            text(&lines),
            ["- the quick", "  brown fox", "  jumps over", "  the lazy", "  dog"]
        );
    }

    #[test]
    fn long_words_are_split_and_wide_characters_counted() {
        let lines = wrap_spans(&[Span::raw("abcdefghij")], 4, &[], &[]);
        assert_eq!(text(&lines), ["abcd", "efgh", "ij"]);
        let lines = wrap_spans(&[Span::raw("日本語のテキスト")], 6, &[], &[]);
        assert_eq!(text(&lines), ["日本語", "のテキ", "スト"]);
        assert!(lines.iter().all(|line| spans_width(&line.spans) <= 6));
    }

    #[test]
    fn styles_survive_wrapping_and_hard_wrap_keeps_every_character() {
        let bold = Style::default().add_modifier(ratatui::style::Modifier::BOLD);
        let spans = [Span::raw("plain "), Span::styled("bold", bold), Span::raw("ness")];
        let lines = wrap_spans(&spans, 40, &[], &[]);
        assert_eq!(lines[0].spans[1].style, bold);
        let lines = hard_wrap(vec![Span::raw("0123456789")], 4, &[], &[]);
        assert_eq!(text(&lines), ["0123", "4567", "89"]);
        assert_eq!(text(&[Line::from(truncate_spans(vec![Span::raw("abcdef")], 4))]), ["abc…"]);
    }
}
