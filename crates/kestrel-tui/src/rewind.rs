//! Esc Esc: edit an earlier message. The user picks one of the session's messages; the
//! session is forked (the store copies the record up to just before that message), the
//! fork is opened, and the message is put back in the composer to be edited and sent.
//! The original session stays as it was.

use crate::app::App;
use crate::cell::NoticeLevel;
use crate::event::AppEvent;
use crate::picker::{Picker, PickerItem, PickerKind};
use kestrel_protocol::{RecordItem, SessionId};
use kestrel_store::{KestrelHome, SessionIndex};
use std::path::PathBuf;

/// A user message of the record and where it is.
#[derive(Debug, Clone)]
pub(crate) struct EditableMessage {
    /// Where the fork ends: the item index of its turn's `turn_started` (the fork keeps
    /// the items before it).
    pub(crate) index: u64,
    pub(crate) text: String,
}

/// A fork made to edit a message.
#[derive(Debug, Clone)]
pub(crate) struct Fork {
    pub(crate) session_id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) text: String,
}

impl App {
    /// Lists the session's messages to choose one to edit.
    pub(crate) fn start_rewind(&mut self) {
        let Some(id) = self.session_id().map(str::to_owned) else {
            self.notice(NoticeLevel::Info, "no messages to edit yet");
            return;
        };
        if self.turn.is_some() {
            return;
        }
        let home = self.home.clone();
        let events = self.events.clone();
        tokio::task::spawn_blocking(move || {
            let result = editable_messages(&home, &id);
            let _ = events.blocking_send(AppEvent::EditableMessages(result));
        });
    }

    pub(crate) fn editable_messages_listed(
        &mut self,
        result: Result<Vec<EditableMessage>, String>,
    ) {
        let messages = match result {
            Ok(messages) if messages.is_empty() => {
                self.notice(NoticeLevel::Info, "no messages to edit yet");
                return;
            }
            Ok(messages) => messages,
            Err(message) => {
                self.notice(NoticeLevel::Error, format!("cannot list the messages: {message}"));
                return;
            }
        };
        let count = messages.len();
        let items = messages
            .into_iter()
            .enumerate()
            .rev()
            .map(|(number, message)| PickerItem {
                label: message.text.lines().next().unwrap_or_default().to_owned(),
                detail: format!("message {} of {count}", number + 1),
                value: format!("{}\n{}", message.index, message.text),
                depth: 0,
            })
            .collect();
        self.picker = Some(Picker::new(
            PickerKind::Rewind,
            "Edit an earlier message (the session is forked there)",
            items,
            None,
        ));
    }

    /// Forks the session before the chosen message.
    pub(crate) fn rewind_to(&mut self, value: &str) {
        let Some((index, text)) = value.split_once('\n') else { return };
        let (Ok(index), Some(id)) = (index.parse::<u64>(), self.session_id().map(str::to_owned))
        else {
            return;
        };
        let text = text.to_owned();
        let home = self.home.clone();
        let events = self.events.clone();
        tokio::task::spawn_blocking(move || {
            let result = kestrel_store::fork(&home, &SessionId::from_string(id), Some(index))
                .map(|header| Fork {
                    session_id: header.id.as_str().to_owned(),
                    cwd: PathBuf::from(header.cwd),
                    text,
                })
                .map_err(|error| error.to_string());
            let _ = events.blocking_send(AppEvent::Forked(result));
        });
    }

    /// Opens the fork with the message back in the composer.
    pub(crate) fn forked(&mut self, result: Result<Fork, String>) {
        match result {
            Ok(fork) => {
                self.switch_to_session(fork.session_id, fork.cwd);
                self.composer.set_text(&fork.text);
            }
            Err(message) => self.notice(NoticeLevel::Error, format!("cannot fork: {message}")),
        }
    }
}

fn editable_messages(home: &KestrelHome, id: &str) -> Result<Vec<EditableMessage>, String> {
    let summary = SessionIndex::find(home, id).map_err(|error| error.to_string())?;
    let replay = kestrel_store::read_record(&summary.path).map_err(|error| error.to_string())?;
    if replay.skipped > 0 {
        return Err(
            "the record has lines this version cannot read; fork it with `kestrel fork`".into()
        );
    }
    let entries = &replay.entries;
    Ok(entries
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| match &entry.item {
            RecordItem::UserMessage { text } => {
                // The fork ends before the turn the message starts: a kept `turn_started`
                // would open the fork with "the previous turn was interrupted".
                let start = match index.checked_sub(1).map(|before| &entries[before].item) {
                    Some(RecordItem::TurnStarted {}) => index - 1,
                    _ => index,
                };
                Some(EditableMessage {
                    index: u64::try_from(start).unwrap_or(u64::MAX),
                    text: text.clone(),
                })
            }
            _ => None,
        })
        .collect())
}
