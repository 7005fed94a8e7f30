//! The multi-line prompt editor: a `ratatui-textarea` with soft wrapping, prompt
//! history (Up/Down at the first/last line), large pastes kept as one block shown as a
//! placeholder and expanded when the prompt is sent, and pasted image paths attached as
//! images.

use crate::attachment::{self, Image};
use crate::theme;
use crate::wrap;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Widget;
use ratatui_textarea::{CursorMove, Input, TextArea, WrapMode};

/// Pastes with more lines than this, or more characters, become one block.
const PASTE_BLOCK_LINES: usize = 8;
const PASTE_BLOCK_CHARS: usize = 1000;
/// The composer grows up to this many rows, then scrolls.
pub(crate) const MAX_ROWS: usize = 10;

/// One large paste, kept whole.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PasteBlock {
    placeholder: String,
    text: String,
}

/// A prompt ready to send: its text and attached images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prompt {
    pub(crate) text: String,
    pub(crate) images: Vec<Image>,
    /// As typed, to put back into the composer when it cannot be sent.
    pub(crate) typed: Typed,
}

impl Prompt {
    pub(crate) fn text(text: impl Into<String>) -> Self {
        let text = text.into();
        let typed = Typed { text: text.clone(), pastes: Vec::new(), images: Vec::new() };
        Self { text, images: Vec::new(), typed }
    }
}

/// A prompt as typed: its placeholders and the paste blocks and images they stand for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Typed {
    text: String,
    pastes: Vec<PasteBlock>,
    images: Vec<(String, Image)>,
}

/// A prompt of the history as typed, with the paste blocks its placeholders stand for
/// (recalling it must send the pasted text, not the placeholder).
#[derive(Clone)]
struct Entry {
    typed: String,
    pastes: Vec<PasteBlock>,
}

/// The prompt being written.
pub(crate) struct Composer {
    textarea: TextArea<'static>,
    pastes: Vec<PasteBlock>,
    /// Attached images and the placeholders that stand for them in the text.
    images: Vec<(String, Image)>,
    history: Vec<Entry>,
    /// Where Up/Down is in the history; `None` while editing a new prompt.
    history_index: Option<usize>,
    /// The prompt being written before browsing the history.
    draft: Option<Entry>,
}

impl Composer {
    pub(crate) fn new() -> Self {
        let mut textarea = TextArea::default();
        textarea.set_wrap_mode(WrapMode::WordOrGlyph);
        textarea.set_cursor_line_style(Style::default());
        textarea.set_cursor_style(Style::default().add_modifier(Modifier::REVERSED));
        textarea.set_placeholder_text("Ask anything · / for commands · @ to mention a file");
        textarea.set_placeholder_style(theme::dim());
        Self {
            textarea,
            pastes: Vec::new(),
            images: Vec::new(),
            history: Vec::new(),
            history_index: None,
            draft: None,
        }
    }

    /// The text as typed (paste blocks as their placeholders).
    pub(crate) fn text(&self) -> String {
        self.textarea.lines().join("\n")
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.textarea.is_empty()
    }

    pub(crate) fn set_text(&mut self, text: &str) {
        let lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
        let mut textarea = TextArea::new(lines);
        textarea.set_wrap_mode(WrapMode::WordOrGlyph);
        textarea.set_cursor_line_style(Style::default());
        textarea.set_cursor_style(Style::default().add_modifier(Modifier::REVERSED));
        textarea.set_placeholder_text(self.textarea.placeholder_text().to_owned());
        textarea.set_placeholder_style(theme::dim());
        textarea.move_cursor(CursorMove::Bottom);
        textarea.move_cursor(CursorMove::End);
        self.textarea = textarea;
    }

    pub(crate) fn clear(&mut self) {
        self.set_text("");
        self.pastes.clear();
        self.images.clear();
        self.history_index = None;
        self.draft = None;
    }

    /// Passes an editing key to the text area.
    pub(crate) fn input(&mut self, input: impl Into<Input>) {
        self.textarea.input(input);
    }

    pub(crate) fn insert_newline(&mut self) {
        self.textarea.insert_newline();
    }

    #[cfg(test)]
    pub(crate) fn insert_str(&mut self, text: &str) {
        self.textarea.insert_str(text);
    }

    /// Inserts pasted text: the path of an image file (relative to `cwd`) as an attached
    /// image, small pastes as typed text, large ones as one block.
    pub(crate) fn paste(&mut self, text: &str, cwd: &std::path::Path) {
        if let Some(image) = attachment::pasted_image(text, cwd) {
            let name = image.path.file_name().map(|name| name.to_string_lossy().into_owned());
            let number = self.images.len() + 1;
            let placeholder = format!("[Image #{number}: {}]", name.unwrap_or_default());
            self.textarea.insert_str(&placeholder);
            self.images.push((placeholder, image));
            return;
        }
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let lines = text.lines().count();
        if lines > PASTE_BLOCK_LINES || text.chars().count() > PASTE_BLOCK_CHARS {
            let number = self.pastes.len() + 1;
            let placeholder = format!("[Pasted text #{number} +{lines} lines]");
            self.textarea.insert_str(&placeholder);
            self.pastes.push(PasteBlock { placeholder, text });
        } else {
            self.textarea.insert_str(&text);
        }
    }

    /// The prompt to send, paste blocks expanded, with the images whose placeholders are
    /// still in the text; clears the composer and records the typed text in the history.
    pub(crate) fn take(&mut self) -> Prompt {
        let typed = self.text();
        let mut text = typed.clone();
        for paste in &self.pastes {
            text = text.replacen(&paste.placeholder, &paste.text, 1);
        }
        let shown_images: Vec<(String, Image)> = self
            .images
            .iter()
            .filter(|(placeholder, _)| typed.contains(placeholder.as_str()))
            .cloned()
            .collect();
        let images = shown_images.iter().map(|(_, image)| image.clone()).collect();
        let pastes: Vec<PasteBlock> = self
            .pastes
            .iter()
            .filter(|paste| typed.contains(paste.placeholder.as_str()))
            .cloned()
            .collect();
        if !typed.trim().is_empty() && self.history.last().map(|entry| &entry.typed) != Some(&typed)
        {
            self.history.push(Entry { typed: typed.clone(), pastes: pastes.clone() });
        }
        self.clear();
        Prompt { text, images, typed: Typed { text: typed, pastes, images: shown_images } }
    }

    /// Puts prompts that could not be sent back, before what it holds, with their paste
    /// blocks and images.
    pub(crate) fn put_back(&mut self, prompts: impl IntoIterator<Item = Typed>) {
        let (mut texts, mut pastes, mut images) = (Vec::new(), Vec::new(), Vec::new());
        for prompt in prompts {
            texts.push(prompt.text);
            pastes.extend(prompt.pastes);
            images.extend(prompt.images);
        }
        if texts.is_empty() {
            return;
        }
        if !self.is_empty() {
            texts.push(self.text());
        }
        pastes.append(&mut self.pastes);
        images.append(&mut self.images);
        self.set_text(&texts.join("\n"));
        self.pastes = pastes;
        self.images = images;
    }

    /// Adds earlier prompts (of a resumed session) to the history.
    pub(crate) fn remember(&mut self, prompt: &str) {
        if !prompt.trim().is_empty()
            && self.history.last().map(|entry| entry.typed.as_str()) != Some(prompt)
        {
            self.history.push(Entry { typed: prompt.to_owned(), pastes: Vec::new() });
        }
    }

    /// Whether the cursor is on the first line (Up goes to history there).
    pub(crate) fn cursor_on_first_line(&self) -> bool {
        self.textarea.cursor().0 == 0
    }

    pub(crate) fn cursor_on_last_line(&self) -> bool {
        self.textarea.cursor().0 + 1 >= self.textarea.lines().len()
    }

    /// Shows the previous prompt of the history; false when there is none.
    pub(crate) fn history_previous(&mut self) -> bool {
        if self.history.is_empty() {
            return false;
        }
        let index = match self.history_index {
            None => {
                self.draft = Some(Entry { typed: self.text(), pastes: self.pastes.clone() });
                self.history.len() - 1
            }
            Some(0) => return false,
            Some(index) => index - 1,
        };
        self.history_index = Some(index);
        let entry = self.history[index].clone();
        self.show(entry);
        true
    }

    /// Shows the next prompt of the history, or the draft after the newest.
    pub(crate) fn history_next(&mut self) -> bool {
        let Some(index) = self.history_index else { return false };
        if index + 1 < self.history.len() {
            self.history_index = Some(index + 1);
            let entry = self.history[index + 1].clone();
            self.show(entry);
        } else {
            self.history_index = None;
            let draft =
                self.draft.take().unwrap_or(Entry { typed: String::new(), pastes: Vec::new() });
            self.show(draft);
        }
        true
    }

    /// Whether it shows a history entry as recalled, not yet edited (Up/Down keep
    /// walking the history rather than a menu for its text).
    pub(crate) fn showing_history(&self) -> bool {
        self.history_index
            .and_then(|index| self.history.get(index))
            .is_some_and(|entry| entry.typed == self.text())
    }

    /// Puts a history entry (or the draft) in the editor with its paste blocks.
    fn show(&mut self, entry: Entry) {
        self.set_text(&entry.typed);
        self.pastes = entry.pastes;
    }

    /// The word the cursor is in or just after (for `@` mentions), with its start column.
    pub(crate) fn current_word(&self) -> Option<(usize, String)> {
        let ratatui_textarea::DataCursor(row, col) = self.textarea.cursor();
        let line = self.textarea.lines().get(row)?;
        let before: String = line.chars().take(col).collect();
        let start = before
            .char_indices()
            .rev()
            .find(|(_, ch)| ch.is_whitespace())
            .map_or(0, |(index, ch)| index + ch.len_utf8());
        let word = &before[start..];
        Some((before[..start].chars().count(), word.to_owned()))
    }

    /// Replaces the word before the cursor with `replacement`.
    pub(crate) fn replace_current_word(&mut self, replacement: &str) {
        if let Some((_, word)) = self.current_word() {
            for _ in 0..word.chars().count() {
                self.textarea.delete_char();
            }
        }
        self.textarea.insert_str(replacement);
    }

    /// Rows needed to show the text at `width`, between 1 and [`MAX_ROWS`]: counted with
    /// word wrapping, as the text area wraps (a word that does not fit moves down whole).
    pub(crate) fn rows(&self, width: u16) -> u16 {
        let width = usize::from(width).max(1);
        let mut rows = 0;
        for line in self.textarea.lines() {
            rows += if wrap::width(line) <= width {
                1
            } else {
                let spans = [ratatui::text::Span::raw(line.as_str())];
                wrap::wrap_spans(&spans, width, &[], &[]).len()
            };
            if rows >= MAX_ROWS {
                break;
            }
        }
        u16::try_from(rows.clamp(1, MAX_ROWS)).unwrap_or(1)
    }

    pub(crate) fn draw(&self, area: Rect, buffer: &mut Buffer) {
        (&self.textarea).render(area, buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_put_back_keeps_its_paste_blocks_and_images() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("shot.png"), b"\x89PNG").unwrap();
        let mut composer = Composer::new();
        composer.insert_str("see ");
        composer.paste("shot.png", dir.path());
        composer.insert_str(" and ");
        let long: String = (1..=20).map(|n| format!("line {n}\n")).collect();
        composer.paste(&long, dir.path());
        let sent = composer.take();
        assert_eq!(sent.images.len(), 1);
        composer.insert_str("draft");
        composer.put_back([sent.typed.clone()]);
        assert!(composer.text().starts_with("see [Image #1: shot.png] and [Pasted text #1"));
        assert!(composer.text().ends_with("\ndraft"), "{}", composer.text());
        let again = composer.take();
        assert_eq!(again.images, sent.images);
        assert_eq!(again.text, format!("{}\ndraft", sent.text));
    }

    #[test]
    fn large_pastes_are_one_block_expanded_on_send() {
        let mut composer = Composer::new();
        composer.insert_str("look: ");
        let big: String = (0..20).map(|n| format!("line {n}\n")).collect();
        composer.paste(&big, std::path::Path::new("/"));
        assert_eq!(composer.text(), "look: [Pasted text #1 +20 lines]");
        let sent = composer.take().text;
        assert!(sent.starts_with("look: line 0\nline 1\n"), "{sent}");
        assert!(composer.is_empty());
    }

    #[test]
    fn a_pasted_image_path_is_attached_while_its_placeholder_stays() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("shot.png"), [137u8, 80, 78, 71]).unwrap();
        let mut composer = Composer::new();
        composer.insert_str("see ");
        composer.paste("shot.png", dir.path());
        assert_eq!(composer.text(), "see [Image #1: shot.png]");
        let prompt = composer.take();
        assert_eq!(prompt.images.len(), 1);
        assert_eq!(prompt.images[0].mime_type, "image/png");
        composer.paste("shot.png", dir.path());
        composer.set_text("changed my mind");
        assert!(composer.take().images.is_empty());
    }

    #[test]
    fn history_walks_back_and_returns_to_the_draft() {
        let mut composer = Composer::new();
        composer.insert_str("first");
        composer.take();
        composer.insert_str("second");
        composer.take();
        composer.insert_str("draft");
        assert!(composer.history_previous());
        assert_eq!(composer.text(), "second");
        assert!(composer.history_previous());
        assert_eq!(composer.text(), "first");
        assert!(!composer.history_previous());
        assert!(composer.history_next());
        assert!(composer.history_next());
        assert_eq!(composer.text(), "draft");
    }

    #[test]
    fn the_current_word_is_found_for_mentions() {
        let mut composer = Composer::new();
        composer.insert_str("read @src/ma");
        assert_eq!(composer.current_word(), Some((5, "@src/ma".to_owned())));
        composer.replace_current_word("@src/main.rs ");
        assert_eq!(composer.text(), "read @src/main.rs ");
    }
}
