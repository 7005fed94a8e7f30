//! The conversation as the model sees it, rebuilt from record items. Resume replays a
//! record through `History::apply`, so a resumed session sends the same messages the
//! original would have.

use kestrel_model::{ContentPart, Message, Reasoning, ToolCall};
use kestrel_protocol::RecordItem;

/// Model messages built from record items, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    messages: Vec<Message>,
}

impl History {
    pub fn messages(&self) -> &[Message] {
        &self.messages
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
