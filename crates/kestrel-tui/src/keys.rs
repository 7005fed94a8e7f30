//! What keys and pastes do: the approval prompt, pickers and the `/swarm` view take them
//! first, then the slash and mention menus, then the composer. Ctrl+C twice quits; Esc
//! interrupts.

use crate::app::{App, TerminalRequest};
use crate::approval::ApprovalAction;
use crate::client;
use crate::commands::{self, MenuItem};
use crate::event::AppEvent;
use crate::mention;
use crate::picker::PickerAction;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::time::{Duration, Instant};

/// A second ctrl+c within this time quits.
const QUIT_WINDOW: Duration = Duration::from_secs(3);
/// An `@` file list older than this is listed again when `@` is typed.
const FILES_FRESH: Duration = Duration::from_secs(3);
/// Esc twice within this time edits an earlier message.
const DOUBLE_ESC: Duration = Duration::from_millis(800);

/// Said (until the next key) when an Enter came as a prompt appeared.
const ENTER_DROPPED: &str = "a prompt appeared: your message was not sent";

/// A menu shown above the composer.
pub(crate) enum Menu {
    Slash(Vec<MenuItem>),
    Mention(Vec<String>),
}

impl App {
    pub(crate) fn handle_terminal_event(&mut self, event: Event) {
        match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => self.handle_key(key),
            Event::Paste(text) => {
                // Text not for the prompt's reason is kept in the composer (shown under a
                // prompt or picker), never dropped.
                let taken = self
                    .approvals
                    .front_mut()
                    .is_some_and(|approval| approval.armed() && approval.paste(&text));
                if !taken {
                    // Pasted text is typing: a digit after it is text, not a choice.
                    if let Some(approval) = self.approvals.front_mut() {
                        approval.typed_elsewhere();
                    }
                    let cwd = self.session_cwd.clone();
                    self.composer.paste(&text, &cwd);
                }
            }
            Event::Key(_)
            | Event::Resize(..)
            | Event::Mouse(_)
            | Event::FocusGained
            | Event::FocusLost => {}
        }
    }

    /// The menu for what is being typed, if any.
    pub(crate) fn menu(&self) -> Option<Menu> {
        let text = self.composer.text();
        if self.menu_dismissed.as_deref() == Some(text.as_str()) || self.composer.showing_history()
        {
            return None;
        }
        if let Some(query) = text.strip_prefix('/')
            && !query.contains(char::is_whitespace)
        {
            let items = commands::matching(query, &self.custom_commands);
            return (!items.is_empty()).then_some(Menu::Slash(items));
        }
        let (_, word) = self.composer.current_word()?;
        let query = word.strip_prefix('@')?;
        let files = self.files.as_ref()?;
        let matches = mention::matches(query, files);
        (!matches.is_empty()).then_some(Menu::Mention(matches))
    }

    fn handle_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.ctrl_c();
            return;
        }
        if self.quit_armed.take().is_some() || self.status.hint.as_deref() == Some(ENTER_DROPPED) {
            self.status.hint = None;
        }
        if ctrl && key.code == KeyCode::Char('l') {
            self.terminal_request = Some(TerminalRequest::Clear);
            return;
        }
        if ctrl && key.code == KeyCode::Char('z') {
            self.terminal_request = Some(TerminalRequest::Suspend);
            return;
        }
        if let Some(approval) = self.approvals.front_mut() {
            if !approval.armed() {
                self.key_before_prompt_seen(key);
                return;
            }
            match approval.handle_key(key) {
                ApprovalAction::None => {}
                ApprovalAction::Typed => self.composer.input(key),
                ApprovalAction::Answer { option_id, reason } => {
                    self.answer_approval(option_id, reason)
                }
            }
            return;
        }
        if let Some(picker) = &mut self.picker {
            match picker.handle_key(key) {
                PickerAction::None => {}
                PickerAction::Closed => self.picker = None,
                PickerAction::Chosen(value) => {
                    let kind = picker.kind;
                    self.picker = None;
                    self.choose(kind, value);
                }
            }
            return;
        }
        if self.swarm.is_some() {
            self.swarm_key(key);
            return;
        }
        if self.menu_key(key) {
            return;
        }
        self.composer_key(key);
        self.after_edit();
    }

    /// Sends the answer to the front prompt. Without a connection the prompt stays
    /// (and says so) rather than the answer being dropped; an answer the daemon never
    /// got is reported by [`AppEvent::AnswerLost`].
    fn answer_approval(&mut self, option_id: String, reason: Option<String>) {
        let Some(connection) = &self.connection else {
            self.status.hint =
                Some("not connected to the daemon: answer again once reconnected".into());
            return;
        };
        let Some(approval) = self.approvals.pop_front() else { return };
        let report = Some((approval.title().to_owned(), self.events.clone()));
        client::answer_permission(connection, approval.id, Some((option_id, reason)), report);
        if let Some(next) = self.approvals.front_mut() {
            next.shown_now();
        }
    }

    /// A key typed before the prompt could be seen: an edit for the composer, and nothing
    /// else (an Enter meant to send must not answer the prompt, nor send the draft).
    fn key_before_prompt_seen(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // Shift/Alt/Ctrl+Enter is a new line, not a send.
        let plain_enter = key.code == KeyCode::Enter
            && !key
                .modifiers
                .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT | KeyModifiers::CONTROL);
        let edit = match key.code {
            KeyCode::Char('w' | 'j' | 'h' | 'u') => true,
            KeyCode::Char(_) => !ctrl,
            KeyCode::Enter => !plain_enter,
            KeyCode::Backspace
            | KeyCode::Delete
            | KeyCode::Left
            | KeyCode::Right
            | KeyCode::Up
            | KeyCode::Down
            | KeyCode::Home
            | KeyCode::End => true,
            _ => false,
        };
        if plain_enter {
            self.status.hint = Some(ENTER_DROPPED.into());
        } else if edit {
            if let Some(approval) = self.approvals.front_mut() {
                approval.typed_elsewhere();
            }
            self.composer_key(key);
            self.after_edit();
        }
    }

    fn ctrl_c(&mut self) {
        let armed = self.quit_armed.is_some_and(|at| at.elapsed() < QUIT_WINDOW);
        if armed {
            self.should_quit = true;
            return;
        }
        if self.turn.is_some() {
            self.interrupt();
        } else if self.picker.is_some() || self.swarm.is_some() {
            self.picker = None;
            self.swarm = None;
        } else {
            self.composer.clear();
        }
        self.quit_armed = Some(Instant::now());
        self.status.hint = Some("press ctrl+c again to quit".into());
    }

    /// Keys the open menu takes; false when there is no menu or the key is not for it.
    fn menu_key(&mut self, key: KeyEvent) -> bool {
        let Some(menu) = self.menu() else {
            self.menu_selected = 0;
            return false;
        };
        let count = match &menu {
            Menu::Slash(items) => items.len(),
            Menu::Mention(files) => files.len(),
        };
        let plain = key.modifiers.difference(KeyModifiers::SHIFT).is_empty();
        match key.code {
            KeyCode::Up if plain => {
                self.menu_selected = self.menu_selected.checked_sub(1).unwrap_or(count - 1);
                true
            }
            KeyCode::Down if plain => {
                self.menu_selected = (self.menu_selected + 1) % count;
                true
            }
            KeyCode::Esc => {
                self.menu_dismissed = Some(self.composer.text());
                true
            }
            KeyCode::Tab | KeyCode::Enter if plain => {
                let selected = self.menu_selected.min(count - 1);
                self.menu_selected = 0;
                match menu {
                    Menu::Slash(items) => {
                        let Some(item) = items.get(selected) else { return false };
                        let typed = self.composer.text();
                        let exact = items.iter().any(|item| format!("/{}", item.name) == typed);
                        if key.code == KeyCode::Enter {
                            // Enter runs the highlighted command (or the one typed in full).
                            let name =
                                if exact { typed.clone() } else { format!("/{}", item.name) };
                            self.composer.take();
                            self.run_slash(&name);
                        } else {
                            self.composer.set_text(&format!("/{} ", item.name));
                        }
                    }
                    Menu::Mention(files) => {
                        if let Some(file) = files.get(selected) {
                            self.composer.replace_current_word(&format!("@{file} "));
                        }
                    }
                }
                true
            }
            _ => false,
        }
    }

    fn composer_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        match key.code {
            KeyCode::Enter if shift || alt || ctrl => self.composer.insert_newline(),
            KeyCode::Char('j') if ctrl => self.composer.insert_newline(),
            KeyCode::Enter => self.submit(),
            KeyCode::Tab if self.turn.is_some() && !self.composer.text().trim().is_empty() => {
                let prompt = self.composer.take();
                self.steer(prompt);
            }
            KeyCode::Esc => {
                // Two Escs read together arrive as one Alt+Esc.
                let twice = alt || self.last_esc.take().is_some_and(|at| at.elapsed() < DOUBLE_ESC);
                if self.turn.is_some() {
                    self.interrupt();
                } else if self.compacting {
                    if let (Some(connection), Some(id)) = (&self.connection, self.session_id()) {
                        crate::client::cancel(connection, id);
                    }
                } else if self.transcript.is_scrolled() {
                    self.transcript.scroll_to_bottom();
                } else if twice && self.composer.is_empty() {
                    self.start_rewind();
                } else {
                    self.last_esc = Some(Instant::now());
                }
            }
            KeyCode::Up if !ctrl && self.composer.cursor_on_first_line() => {
                if !self.composer.history_previous() {
                    self.composer.input(key);
                }
            }
            KeyCode::Down if !ctrl && self.composer.cursor_on_last_line() => {
                if !self.composer.history_next() {
                    self.composer.input(key);
                }
            }
            KeyCode::PageUp => {
                let page = self.transcript.page();
                self.transcript.scroll_up(page);
            }
            KeyCode::PageDown => {
                let page = self.transcript.page();
                self.transcript.scroll_down(page);
            }
            KeyCode::Char('o') if ctrl => self.transcript.toggle_expanded(),
            KeyCode::Char('d') if ctrl && self.composer.is_empty() => self.should_quit = true,
            _ => self.composer.input(key),
        }
    }

    /// After the text changed: list files for a first `@`, reset dismissed menus.
    fn after_edit(&mut self) {
        let text = self.composer.text();
        if self.menu_dismissed.as_deref().is_some_and(|dismissed| dismissed != text) {
            self.menu_dismissed = None;
        }
        let mentioning =
            self.composer.current_word().is_some_and(|(_, word)| word.starts_with('@'));
        if mentioning && self.files_stale() {
            self.list_files();
        }
    }

    /// Whether the `@` list is missing, of another directory, or older than
    /// [`FILES_FRESH`] (files come and go while the agent works).
    fn files_stale(&self) -> bool {
        match &self.files_listed {
            Some((cwd, at)) => *cwd != self.session_cwd || at.elapsed() > FILES_FRESH,
            None => true,
        }
    }

    /// Lists the session directory's files in the background (the old list, if of the
    /// same directory, is used until the new one arrives).
    pub(crate) fn list_files(&mut self) {
        if self.listing_files {
            return;
        }
        self.listing_files = true;
        let cwd = self.session_cwd.clone();
        let events = self.events.clone();
        tokio::task::spawn_blocking(move || {
            let files = mention::list_files(&cwd);
            let _ = events.blocking_send(AppEvent::FilesListed { cwd, files });
        });
    }

    fn submit(&mut self) {
        if self.composer.text().trim().is_empty() {
            return;
        }
        let prompt = self.composer.take();
        self.transcript.scroll_to_bottom();
        if prompt.text.trim_start().starts_with('/') && self.run_slash(prompt.text.trim()) {
            return;
        }
        self.send_prompt(prompt);
    }
}

#[cfg(test)]
mod tests;
