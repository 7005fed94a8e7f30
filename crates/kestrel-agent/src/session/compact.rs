//! Compacting a session's conversation: the older part is summarised by the model (a
//! request with no tools), a `compaction` item records the summary and the last item it
//! replaces, and the conversation goes on from the summary plus the items kept verbatim
//! (`History::replay`, as a resume would rebuild it). Plans come from `crate::compaction`.

use super::Session;
use crate::compaction::{self, CompactionPlan, SUMMARY_SYSTEM};
use crate::history::History;
use crate::session::EventSink;
use crate::{AgentError, AgentEvent};
use kestrel_model::{ContentPart, Message, ModelError, ModelRequest, StreamEvent};
use kestrel_protocol::{Notice, NoticeKind, RecordEntry, RecordItem, Usage};
use tokio_util::sync::CancellationToken;

/// What stays verbatim is at most this share of the context window...
const KEEP_SHARE: f64 = 0.2;
/// ...and the transcript to summarise at most this share (four characters a token).
const TRANSCRIPT_SHARE: f64 = 0.5;
/// The longest summary asked for.
const SUMMARY_MAX_TOKENS: u64 = 8_192;

/// What a compaction did.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionReport {
    /// Whether a `compaction` item was written and the conversation replaced.
    pub compacted: bool,
    /// Why nothing was compacted (nothing to summarise yet, the summary request failed).
    pub reason: Option<String>,
    /// The estimated context before and after, in tokens.
    pub tokens_before: u64,
    pub tokens_after: u64,
}

impl Session {
    /// Compacts the conversation now (`/compact`, `_kestrel/session/compact`), between
    /// turns. What the summary request spends is recorded like any request. A
    /// compaction that cannot be done (nothing to summarise yet, the model failed) is a
    /// report with `compacted: false` and the reason; `Err` means the record could not
    /// be written.
    pub async fn compact(
        &mut self,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<CompactionReport, AgentError> {
        let mut usage = Usage::default();
        let report = self.compact_history(sink, cancel, &mut usage).await?;
        self.total_usage.add(&usage);
        Ok(report)
    }

    /// Plans, summarises and records a compaction; adds the summary request's usage to
    /// `usage`. Whatever the outcome, the next one waits until the conversation grows.
    pub(super) async fn compact_history(
        &mut self,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
        usage: &mut Usage,
    ) -> Result<CompactionReport, AgentError> {
        let before = self.context_tokens();
        let not_done = |reason: String| CompactionReport {
            compacted: false,
            reason: Some(reason),
            tokens_before: before,
            tokens_after: before,
        };
        let entries = match self.record_entries() {
            Ok(entries) => entries,
            Err(reason) => return Ok(not_done(reason)),
        };
        let window = self.settings.profile.context_window as f64;
        let keep_tokens = (window * KEEP_SHARE.min(self.settings.compact_at / 2.0)) as u64;
        let transcript_chars = (window * TRANSCRIPT_SHARE * 4.0) as usize;
        let plan = match compaction::plan(&entries, keep_tokens, transcript_chars) {
            Ok(plan) => plan,
            Err(reason) => {
                self.gauge.compacted(self.history.len());
                return Ok(not_done(reason));
            }
        };
        let summary = match self.summarise(&plan, sink, cancel, usage).await? {
            Ok(summary) => summary,
            Err(reason) => {
                self.gauge.compacted(self.history.len());
                if !cancel.is_cancelled() {
                    let message = format!("the conversation could not be compacted: {reason}");
                    self.notify(NoticeKind::Error, message, sink).await?;
                }
                return Ok(not_done(reason));
            }
        };
        let item = RecordItem::Compaction {
            summary: plan.summary(&summary),
            replaces_through: plan.replaces_through,
        };
        self.write(item.clone())?;
        let mut entries = entries;
        entries.push(RecordEntry::now(item));
        self.history = History::replay(&entries);
        self.gauge.compacted(self.history.len());
        let after = self.context_tokens();
        let message = format!(
            "the conversation was compacted: about {} → {} tokens of context",
            thousands(before),
            thousands(after)
        );
        self.notify(NoticeKind::Info, message, sink).await?;
        sink.emit(AgentEvent::Compacted { tokens_before: before, tokens_after: after }).await;
        Ok(CompactionReport {
            compacted: true,
            reason: None,
            tokens_before: before,
            tokens_after: after,
        })
    }

    /// The record's items as written so far. Fails (with the reason) when they cannot
    /// be read or counted: `replaces_through` is an item index.
    fn record_entries(&self) -> Result<Vec<RecordEntry>, String> {
        let replay = kestrel_store::read_record(self.record.path())
            .map_err(|error| format!("the record cannot be read: {error}"))?;
        if replay.skipped > 0 {
            return Err("the record has lines this Kestrel cannot read, so its items cannot be \
                        counted"
                .into());
        }
        Ok(replay.entries)
    }

    /// The summarising request (no tools) and its answer; its usage is recorded. The
    /// inner `Err` says why there is no summary.
    async fn summarise(
        &mut self,
        plan: &CompactionPlan,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
        usage: &mut Usage,
    ) -> Result<Result<String, String>, AgentError> {
        let max_output = self
            .settings
            .profile
            .max_output_tokens
            .unwrap_or(SUMMARY_MAX_TOKENS)
            .min(SUMMARY_MAX_TOKENS);
        let request = ModelRequest {
            model: self.settings.model.clone(),
            system: SUMMARY_SYSTEM.to_string(),
            messages: vec![Message::User {
                content: vec![ContentPart::Text(plan.request.clone())],
            }],
            tools: Vec::new(),
            reasoning: None,
            max_output_tokens: u32::try_from(max_output).ok(),
            cache_key: None,
        };
        let mut stream = match self.client.stream(&request, cancel).await {
            Ok(stream) => stream,
            Err(ModelError::Cancelled) => return Ok(Err("cancelled".into())),
            Err(error) => return Ok(Err(format!("the summary request failed: {error}"))),
        };
        let mut text = String::new();
        let mut tokens = None;
        let failure = loop {
            let next = tokio::select! {
                next = stream.next() => next,
                () = cancel.cancelled() => break Some("cancelled".to_string()),
            };
            match next {
                Some(Ok(StreamEvent::TextDelta(delta))) => text.push_str(&delta),
                Some(Ok(StreamEvent::Usage(reported))) => tokens = Some(reported),
                Some(Ok(
                    StreamEvent::ReasoningDelta(_)
                    | StreamEvent::ReasoningCompleted(_)
                    | StreamEvent::ToolCallStarted { .. }
                    | StreamEvent::ToolCallArgumentsDelta { .. }
                    | StreamEvent::ToolCallCompleted { .. }
                    | StreamEvent::Completed { .. },
                )) => {}
                Some(Err(error)) => break Some(format!("the summary request failed: {error}")),
                None => break None,
            }
        };
        if let Some(tokens) = tokens {
            let spent = Usage {
                input_tokens: tokens.input_tokens,
                cached_input_tokens: tokens.cached_input_tokens,
                output_tokens: tokens.output_tokens,
                reasoning_tokens: tokens.reasoning_tokens,
                cost: self.settings.profile.cost(&tokens),
            };
            usage.add(&spent);
            self.write(RecordItem::Usage { usage: spent })?;
            sink.emit(AgentEvent::Usage(spent)).await;
        }
        Ok(match failure {
            Some(reason) => Err(reason),
            None if text.trim().is_empty() => Err("the model returned an empty summary".into()),
            None => Ok(text),
        })
    }

    async fn notify(
        &mut self,
        kind: NoticeKind,
        message: String,
        sink: &dyn EventSink,
    ) -> Result<(), AgentError> {
        let notice = Notice { kind, message, model: None, mode: None };
        self.write(RecordItem::Notice { notice: notice.clone() })?;
        sink.emit(AgentEvent::Notice(notice)).await;
        Ok(())
    }
}

/// `12.3k`, or the number itself below a thousand.
fn thousands(tokens: u64) -> String {
    if tokens < 1_000 { tokens.to_string() } else { format!("{:.1}k", tokens as f64 / 1e3) }
}
