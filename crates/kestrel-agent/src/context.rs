//! How full the model's context is. The provider reports the input tokens of each request;
//! what the conversation gained since is estimated at four characters a token. Before the
//! first report (a new or resumed session, or right after a compaction) everything is
//! estimated.

use kestrel_model::{ContentPart, Message};

/// The estimate's exchange rate: characters per token.
const CHARS_PER_TOKEN: u64 = 4;

/// What an image is counted as (providers charge roughly this for a screenshot).
const IMAGE_TOKENS: u64 = 1_000;

/// Estimated tokens of a text.
pub(crate) fn text_tokens(text: &str) -> u64 {
    let chars = u64::try_from(text.chars().count()).unwrap_or(u64::MAX);
    chars.div_ceil(CHARS_PER_TOKEN)
}

/// Estimated tokens of one message as sent to the model.
pub(crate) fn message_tokens(message: &Message) -> u64 {
    match message {
        Message::User { content } => content
            .iter()
            .map(|part| match part {
                ContentPart::Text(text) => text_tokens(text),
                ContentPart::Image { .. } => IMAGE_TOKENS,
            })
            .sum(),
        Message::Assistant { text, reasoning, tool_calls } => {
            let reasoning = reasoning.as_ref().map_or(0, |r| text_tokens(&r.text));
            let calls: u64 = tool_calls
                .iter()
                .map(|call| text_tokens(&call.name) + text_tokens(&call.arguments))
                .sum();
            text_tokens(text) + reasoning + calls
        }
        Message::ToolResult { content, .. } => text_tokens(content),
    }
}

/// Estimated tokens of several messages.
pub(crate) fn messages_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(message_tokens).sum()
}

/// The session's running measure of its context.
#[derive(Debug, Clone, Default)]
pub(crate) struct ContextGauge {
    /// The input tokens the provider reported for the last request, and how many
    /// messages of the history that request carried.
    reported: Option<(u64, usize)>,
    /// The history's length right after the last compaction: nothing to compact again
    /// until it grows.
    compacted_at: Option<usize>,
}

impl ContextGauge {
    /// A request that carried `messages_sent` messages reported `input_tokens`.
    pub(crate) fn reported(&mut self, input_tokens: u64, messages_sent: usize) {
        self.reported = Some((input_tokens, messages_sent));
    }

    /// The history was rebuilt (compaction): the last report no longer applies.
    pub(crate) fn compacted(&mut self, history_len: usize) {
        self.reported = None;
        self.compacted_at = Some(history_len);
    }

    /// Whether the history grew since the last compaction (always true before one).
    pub(crate) fn grew_since_compaction(&self, history_len: usize) -> bool {
        self.compacted_at.is_none_or(|len| history_len > len)
    }

    /// Tokens the next request would fill: the last report plus what came after it, or
    /// (with no usable report) `fixed()` (system prompt, tool definitions) plus every
    /// message.
    pub(crate) fn estimate(&self, fixed: impl FnOnce() -> u64, messages: &[Message]) -> u64 {
        match self.reported {
            Some((input, sent)) if sent <= messages.len() => {
                input.saturating_add(messages_tokens(&messages[sent..]))
            }
            Some(_) | None => fixed().saturating_add(messages_tokens(messages)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message::User { content: vec![ContentPart::Text(text.into())] }
    }

    #[test]
    fn the_last_report_plus_an_estimate_of_what_came_after() {
        let messages = vec![user(&"a".repeat(400)), user(&"b".repeat(40))];
        let mut gauge = ContextGauge::default();
        assert_eq!(gauge.estimate(|| 10, &messages), 10 + 100 + 10);
        gauge.reported(5_000, 1);
        assert_eq!(gauge.estimate(|| 10, &messages), 5_000 + 10);
        gauge.compacted(1);
        assert_eq!(gauge.estimate(|| 10, &messages[..1]), 10 + 100);
        assert!(!gauge.grew_since_compaction(1));
        assert!(gauge.grew_since_compaction(2));
    }

    #[test]
    fn images_and_tool_calls_count() {
        let image = Message::User {
            content: vec![ContentPart::Image { media_type: "image/png".into(), data: "x".into() }],
        };
        assert_eq!(message_tokens(&image), IMAGE_TOKENS);
        let call = Message::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![kestrel_model::ToolCall {
                id: "c".into(),
                name: "grep".into(),
                arguments: "12345678".into(),
            }],
        };
        assert_eq!(message_tokens(&call), 1 + 2);
    }
}
