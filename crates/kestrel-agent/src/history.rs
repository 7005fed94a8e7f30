//! The conversation as the model sees it, rebuilt from record items. Resume replays a
//! record through [`History::replay`], so a resumed session sends the same messages the
//! original would have.

use kestrel_model::{ContentPart, Message, Reasoning, ToolCall};
use kestrel_protocol::{RecordEntry, RecordItem};

/// Model messages built from record items, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    messages: Vec<Message>,
}

impl History {
    /// The conversation a record holds: from its newest `compaction` item, that item's
    /// summary, then the items it kept verbatim (indices `replaces_through + 1` up to the
    /// compaction item, older compaction items among them skipped), then every item after
    /// it. A record never compacted is replayed whole.
    pub fn replay(entries: &[RecordEntry]) -> History {
        let mut history = History::default();
        let newest = entries.iter().rposition(|e| matches!(e.item, RecordItem::Compaction { .. }));
        let Some(index) = newest else {
            for entry in entries {
                history.apply(&entry.item);
            }
            return history;
        };
        let compaction = &entries[index].item;
        let RecordItem::Compaction { replaces_through, .. } = compaction else {
            return history;
        };
        history.apply(compaction);
        let kept_from = usize::try_from(*replaces_through).map_or(index, |r| r.saturating_add(1));
        let kept = entries[kept_from.min(index)..index]
            .iter()
            .filter(|entry| !matches!(entry.item, RecordItem::Compaction { .. }))
            // A kept range never starts with a result whose call was summarised; a record
            // whose indices are off (unreadable lines) must not produce one either.
            .skip_while(|entry| matches!(entry.item, RecordItem::ToolResult { .. }));
        for entry in kept.chain(&entries[index + 1..]) {
            history.apply(&entry.item);
        }
        history
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The messages, to replace images by notes in place (the image budget, an image a
    /// provider could not process).
    pub(crate) fn messages_mut(&mut self) -> &mut [Message] {
        &mut self.messages
    }

    /// How many messages the conversation has.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
    }

    /// Adds what a record item means to the conversation; items that are not
    /// conversation (usage, notices, turn markers) change nothing.
    pub fn apply(&mut self, item: &RecordItem) {
        match item {
            RecordItem::UserMessage { text } => {
                self.messages.push(Message::User { content: vec![ContentPart::Text(text.clone())] })
            }
            RecordItem::AssistantMessage { text, reasoning, reasoning_opaque } => {
                let reasoning =
                    (reasoning.is_some() || reasoning_opaque.is_some()).then(|| Reasoning {
                        text: reasoning.clone().unwrap_or_default(),
                        opaque: reasoning_opaque.clone(),
                    });
                self.messages.push(Message::Assistant {
                    text: text.clone(),
                    reasoning,
                    tool_calls: Vec::new(),
                });
            }
            RecordItem::ToolCall { id, name, arguments } => {
                let call =
                    ToolCall { id: id.clone(), name: name.clone(), arguments: arguments.clone() };
                // Calls belong to the assistant message just before them.
                match self.messages.last_mut() {
                    Some(Message::Assistant { tool_calls, .. }) => tool_calls.push(call),
                    Some(Message::User { .. } | Message::ToolResult { .. }) | None => {
                        self.messages.push(Message::Assistant {
                            text: String::new(),
                            reasoning: None,
                            tool_calls: vec![call],
                        })
                    }
                }
            }
            RecordItem::ToolResult { id, output, is_error, .. } => {
                self.messages.push(Message::ToolResult {
                    call_id: id.clone(),
                    content: output.clone(),
                    is_error: *is_error,
                })
            }
            RecordItem::Compaction { summary, .. } => {
                self.messages.clear();
                self.messages.push(Message::User {
                    content: vec![ContentPart::Text(format!(
                        "This conversation was compacted. Summary of what came before:\n\n{summary}"
                    ))],
                });
            }
            RecordItem::Usage { .. }
            | RecordItem::TurnStarted {}
            | RecordItem::TurnCompleted { .. }
            | RecordItem::Notice { .. }
            | RecordItem::Checkpoint { .. } => {}
        }
    }

    /// Tool calls of the last assistant message that have no result yet.
    pub fn unanswered_calls(&self) -> Vec<ToolCall> {
        let Some(position) =
            self.messages.iter().rposition(|m| matches!(m, Message::Assistant { .. }))
        else {
            return Vec::new();
        };
        let Message::Assistant { tool_calls, .. } = &self.messages[position] else {
            return Vec::new();
        };
        let answered: Vec<&str> = self.messages[position + 1..]
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult { call_id, .. } => Some(call_id.as_str()),
                Message::User { .. } | Message::Assistant { .. } => None,
            })
            .collect();
        tool_calls.iter().filter(|call| !answered.contains(&call.id.as_str())).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_protocol::Timestamp;

    fn entry(item: RecordItem) -> RecordEntry {
        RecordEntry { ts: Timestamp::now(), item }
    }

    fn user(text: &str) -> RecordEntry {
        entry(RecordItem::UserMessage { text: text.into() })
    }

    fn texts(history: &History) -> Vec<String> {
        history
            .messages()
            .iter()
            .map(|message| match message {
                Message::User { content } => match &content[0] {
                    ContentPart::Text(text) => text.clone(),
                    ContentPart::Image { .. } => "image".into(),
                },
                Message::Assistant { text, .. } => text.clone(),
                Message::ToolResult { content, .. } => content.clone(),
            })
            .collect()
    }

    #[test]
    fn replay_starts_with_the_newest_summary_then_the_kept_items_then_the_rest() {
        let entries = vec![
            user("a"),                                                                   // 0
            user("b"),                                                                   // 1
            entry(RecordItem::Compaction { summary: "S1".into(), replaces_through: 0 }), // 2
            user("c"),                                                                   // 3
            user("d"),                                                                   // 4
            entry(RecordItem::Compaction { summary: "S2".into(), replaces_through: 3 }), // 5
            user("e"),                                                                   // 6
        ];
        let replayed = texts(&History::replay(&entries));
        assert_eq!(replayed.len(), 3);
        assert!(replayed[0].contains("compacted") && replayed[0].ends_with("S2"));
        assert_eq!(replayed[1..], ["d", "e"]);

        // The older summary's kept items may stay too: the older item itself is skipped.
        let mut keep_more = entries.clone();
        keep_more[5] = entry(RecordItem::Compaction { summary: "S2".into(), replaces_through: 0 });
        let replayed = texts(&History::replay(&keep_more));
        assert_eq!(replayed[1..], ["b", "c", "d", "e"]);
    }

    #[test]
    fn a_record_never_compacted_is_replayed_whole() {
        let entries = vec![user("a"), user("b")];
        assert_eq!(texts(&History::replay(&entries)), ["a", "b"]);
    }
}
