//! One model response as it streams in, and what the turn loop does next with it.

use crate::AgentEvent;
use crate::session::EventSink;
use kestrel_model::{FinishReason, StreamEvent, ToolCall};
use kestrel_protocol::StopReason;

/// What one model request led to.
pub(super) enum Step {
    Answer(String),
    ToolCalls(Vec<ToolCall>),
    Stopped {
        reason: StopReason,
        text: String,
        error: Option<String>,
    },
    /// The provider refused the request as longer than the context window, before any
    /// of a response arrived: compact and try once more.
    ContextExceeded(String),
    /// The provider could not process an image of the request (its message), before any
    /// of a response arrived: drop the newest images and try once more.
    ImageRefused(String),
}

impl Step {
    pub(super) fn stopped(reason: StopReason, error: Option<String>) -> Self {
        Step::Stopped { reason, text: String::new(), error }
    }
}

/// A response as it streams in.
pub(super) struct Response {
    pub(super) text_item: String,
    pub(super) reasoning_item: String,
    pub(super) text: String,
    pub(super) reasoning: String,
    pub(super) reasoning_parts: Vec<serde_json::Value>,
    pub(super) calls: Vec<ToolCall>,
    pub(super) usage: Option<kestrel_model::TokenUsage>,
    pub(super) finish: Option<FinishReason>,
}

impl Response {
    pub(super) fn new(text_item: String, reasoning_item: String) -> Self {
        Self {
            text_item,
            reasoning_item,
            text: String::new(),
            reasoning: String::new(),
            reasoning_parts: Vec::new(),
            calls: Vec::new(),
            usage: None,
            finish: None,
        }
    }

    /// Nothing of a response arrived (usage aside).
    pub(super) fn is_empty(&self) -> bool {
        self.text.is_empty()
            && self.reasoning.is_empty()
            && self.reasoning_parts.is_empty()
            && self.calls.is_empty()
    }

    /// One part as it came; several as an array (the model clients accept both).
    pub(super) fn reasoning_opaque(&self) -> Option<serde_json::Value> {
        match self.reasoning_parts.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many => Some(serde_json::Value::Array(many.to_vec())),
        }
    }

    pub(super) async fn absorb(
        &mut self,
        event: StreamEvent,
        sink: &dyn EventSink,
    ) -> Option<FinishReason> {
        match event {
            StreamEvent::TextDelta(delta) => {
                self.text.push_str(&delta);
                sink.emit(AgentEvent::TextDelta { item_id: self.text_item.clone(), delta }).await;
            }
            StreamEvent::ReasoningDelta(delta) => {
                self.reasoning.push_str(&delta);
                sink.emit(AgentEvent::ReasoningDelta {
                    item_id: self.reasoning_item.clone(),
                    delta,
                })
                .await;
            }
            StreamEvent::ReasoningCompleted(reasoning) => {
                if self.reasoning.is_empty() {
                    self.reasoning = reasoning.text;
                }
                // A response may carry several reasoning parts (interleaved thinking,
                // several Responses reasoning items): all go back, in order.
                if let Some(opaque) = reasoning.opaque {
                    self.reasoning_parts.push(opaque);
                }
            }
            StreamEvent::ToolCallStarted { .. } | StreamEvent::ToolCallArgumentsDelta { .. } => {}
            StreamEvent::ToolCallCompleted { call, .. } => self.calls.push(call),
            StreamEvent::Usage(usage) => self.usage = Some(usage),
            StreamEvent::Completed { finish_reason } => return Some(finish_reason),
        }
        None
    }
}
