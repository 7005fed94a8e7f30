//! Compaction planning, pure: which record items a summary replaces and which stay
//! verbatim, the transcript the model summarises, and the prompts it gets.
//!
//! The conversation a session sends is its newest `compaction` item's summary, then the
//! items it kept (record indices `replaces_through + 1` up to the compaction item), then
//! everything after the compaction item (see `History::replay`). A new compaction
//! replaces a prefix of that conversation, cut at a step boundary (a user message, or
//! the start of a model response after tool results) so every tool call keeps its result.

use crate::context::text_tokens;
use kestrel_protocol::{RecordEntry, RecordItem};

/// At most this many user turns stay verbatim (the current one and the one before).
const KEEP_TURNS: usize = 2;
/// At most this many model responses stay verbatim.
const KEEP_RESPONSES: usize = 6;
/// Tool calls and results longer than this are cut (head and tail) in the transcript.
const TRANSCRIPT_ITEM_CHARS: usize = 2_000;

/// The system prompt of a summarising request.
pub(crate) const SUMMARY_SYSTEM: &str = "You write handoff summaries of coding-agent \
sessions. Another instance of the agent continues the work from your summary alone, so keep \
every fact it needs and nothing else. You never call tools.";

/// What the model is asked after the transcript.
const SUMMARY_INSTRUCTIONS: &str = "Summarise the conversation above for the agent that \
continues it. Include: the user's requests and goals (quote exact requirements), decisions \
made and why, files read or changed and their current state, commands run and their important \
results, errors and how they were resolved, and what remains to be done. Say what any image \
(`[image: TYPE]` in the transcript) showed, as far as the conversation tells. Use short \
sections and bullet points.";

/// A compaction to run: what to summarise and where the summary ends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CompactionPlan {
    /// Record index (0-based, header excluded) of the last item the summary replaces;
    /// the items after it stay verbatim.
    pub(crate) replaces_through: u64,
    /// The user message of the summarising request: the earlier summary, the transcript
    /// of the replaced items and the instructions.
    pub(crate) request: String,
    /// The user's request of the current turn when the summary replaces it: it is added
    /// to the summary word for word.
    pub(crate) current_request: Option<String>,
    /// A line for each image the replaced items carried (their `[image: TYPE]`
    /// placeholders): the images themselves are gone after the compaction.
    pub(crate) images: Vec<String>,
}

impl CompactionPlan {
    /// The summary to record: the model's, plus a note of the images it replaced and
    /// the current request verbatim.
    pub(crate) fn summary(&self, model_summary: &str) -> String {
        let mut summary = model_summary.trim().to_string();
        if !self.images.is_empty() {
            summary.push_str(
                "\n\nImages in the summarised part of the conversation (no longer visible: \
                 read or fetch them again if they matter):",
            );
            for image in &self.images {
                summary.push_str(&format!("\n- {image}"));
            }
        }
        if let Some(request) = &self.current_request {
            summary.push_str(&format!("\n\nThe user's current request, verbatim:\n\n{request}"));
        }
        summary
    }
}

/// Plans a compaction of the conversation `entries` (a whole record's items) holds.
/// `keep_tokens` bounds what stays verbatim; `transcript_chars` bounds the transcript
/// (its oldest items are left out beyond it).
///
/// Fails, saying why, when nothing can be replaced: the conversation is a single step.
pub(crate) fn plan(
    entries: &[RecordEntry],
    keep_tokens: u64,
    transcript_chars: usize,
) -> Result<CompactionPlan, String> {
    let window = LiveWindow::of(entries);
    let live = &window.items;
    let Some(cut) = choose_cut(entries, live, keep_tokens) else {
        return Err("there is nothing to compact yet: the model has not answered since the \
                    last compaction"
            .into());
    };
    let first_kept = live.get(cut).copied().unwrap_or(entries.len());
    let current_turn = live.iter().rposition(|&i| is_user(&entries[i].item));
    let current_request = current_turn.filter(|&position| position < cut).and_then(|position| {
        let RecordItem::UserMessage { text } = &entries[live[position]].item else { return None };
        Some(text.clone())
    });
    let transcript: Vec<String> =
        live[..cut].iter().filter_map(|&i| transcript_entry(&entries[i].item)).collect();
    let request = summary_request(window.summary, &transcript, transcript_chars);
    let images = live[..cut].iter().flat_map(|&i| image_notes(entries, &entries[i].item)).collect();
    Ok(CompactionPlan {
        replaces_through: u64::try_from(first_kept).unwrap_or(u64::MAX).saturating_sub(1),
        request,
        current_request,
        images,
    })
}

/// A line for each image placeholder (`[image: TYPE]`) of a user message or tool result.
fn image_notes(entries: &[RecordEntry], item: &RecordItem) -> Vec<String> {
    let (text, source) = match item {
        RecordItem::UserMessage { text } => (text, "sent by the user".to_string()),
        RecordItem::ToolResult { id, output, .. } => {
            let name = entries.iter().find_map(|entry| {
                let RecordItem::ToolCall { id: call, name, arguments } = &entry.item else {
                    return None;
                };
                (call == id).then(|| format!("`{name}` {}", one_line(arguments)))
            });
            let source = match name {
                Some(name) => format!("returned by {name} (call {id})"),
                None => format!("returned by call {id}"),
            };
            (output, source)
        }
        RecordItem::AssistantMessage { .. }
        | RecordItem::ToolCall { .. }
        | RecordItem::Usage { .. }
        | RecordItem::TurnStarted {}
        | RecordItem::TurnCompleted { .. }
        | RecordItem::Compaction { .. }
        | RecordItem::Notice { .. }
        | RecordItem::Checkpoint { .. } => return Vec::new(),
    };
    text.match_indices("[image: ")
        .filter_map(|(at, start)| {
            let rest = &text[at + start.len()..];
            let end = rest.find(']').filter(|end| *end <= 100)?;
            Some(format!("an image ({}) {source}", &rest[..end]))
        })
        .collect()
}

/// Tool arguments in a one-line note: at most 120 characters.
fn one_line(arguments: &str) -> String {
    let line = arguments.replace('\n', " ");
    if line.chars().count() <= 120 {
        return line;
    }
    format!("{}…", line.chars().take(119).collect::<String>())
}

/// The conversation the session sends now, as record indices.
struct LiveWindow<'a> {
    /// The newest compaction's summary.
    summary: Option<&'a str>,
    /// Conversation items (messages, tool calls and results) after it, in order.
    items: Vec<usize>,
}

impl<'a> LiveWindow<'a> {
    fn of(entries: &'a [RecordEntry]) -> Self {
        let newest = entries.iter().rposition(|e| matches!(e.item, RecordItem::Compaction { .. }));
        let (summary, kept_from) = match newest.map(|index| (index, &entries[index].item)) {
            Some((index, RecordItem::Compaction { summary, replaces_through })) => {
                let kept = usize::try_from(*replaces_through).map_or(index, |r| r + 1);
                (Some((summary.as_str(), index)), kept.min(index))
            }
            Some(_) | None => (None, 0),
        };
        let items =
            (kept_from..entries.len()).filter(|&i| is_conversation(&entries[i].item)).collect();
        Self { summary: summary.map(|(text, _)| text), items }
    }
}

/// The position in `live` of the first item to keep (`live.len()`: keep nothing), or
/// `None` when there is no model response to summarise. Prefers a turn boundary; falls
/// back to a step boundary in the newest turn; at worst summarises everything (a step
/// too big to keep, such as a huge tool result, is what filled the context).
fn choose_cut(entries: &[RecordEntry], live: &[usize], keep_tokens: u64) -> Option<usize> {
    let is_response = |p: usize| is_boundary(entries, live, p) && !is_user_at(entries, live, p);
    let first_response = (0..live.len()).find(|&p| is_response(p))?;
    let boundaries: Vec<usize> =
        (first_response + 1..live.len()).filter(|&p| is_boundary(entries, live, p)).collect();
    let tail = |p: usize| -> (u64, usize, usize) {
        let items = &live[p..];
        let tokens = items.iter().map(|&i| item_tokens(&entries[i].item)).sum();
        let turns = items.iter().filter(|&&i| is_user(&entries[i].item)).count();
        let responses = (p..live.len()).filter(|&q| is_response(q)).count();
        (tokens, turns, responses)
    };
    let fits = |p: usize| {
        let (tokens, turns, responses) = tail(p);
        tokens <= keep_tokens && turns <= KEEP_TURNS && responses <= KEEP_RESPONSES
    };
    let turn_start = boundaries.iter().copied().find(|&p| is_user_at(entries, live, p) && fits(p));
    let newest_turn = live.iter().rposition(|&i| is_user(&entries[i].item)).unwrap_or(0);
    let in_newest_turn = boundaries.iter().copied().find(|&p| p >= newest_turn && fits(p));
    Some(turn_start.or(in_newest_turn).unwrap_or(live.len()))
}

/// A step starts at a user message or at a model response (its text, or its first tool
/// call when it has no text).
fn is_boundary(entries: &[RecordEntry], live: &[usize], position: usize) -> bool {
    match &entries[live[position]].item {
        RecordItem::UserMessage { .. } | RecordItem::AssistantMessage { .. } => true,
        RecordItem::ToolCall { .. } => {
            position == 0
                || !matches!(
                    entries[live[position - 1]].item,
                    RecordItem::AssistantMessage { .. } | RecordItem::ToolCall { .. }
                )
        }
        RecordItem::ToolResult { .. }
        | RecordItem::Usage { .. }
        | RecordItem::TurnStarted {}
        | RecordItem::TurnCompleted { .. }
        | RecordItem::Compaction { .. }
        | RecordItem::Notice { .. }
        | RecordItem::Checkpoint { .. } => false,
    }
}

fn is_user_at(entries: &[RecordEntry], live: &[usize], position: usize) -> bool {
    is_user(&entries[live[position]].item)
}

fn is_user(item: &RecordItem) -> bool {
    matches!(item, RecordItem::UserMessage { .. })
}

fn is_conversation(item: &RecordItem) -> bool {
    match item {
        RecordItem::UserMessage { .. }
        | RecordItem::AssistantMessage { .. }
        | RecordItem::ToolCall { .. }
        | RecordItem::ToolResult { .. } => true,
        RecordItem::Usage { .. }
        | RecordItem::TurnStarted {}
        | RecordItem::TurnCompleted { .. }
        | RecordItem::Compaction { .. }
        | RecordItem::Notice { .. }
        | RecordItem::Checkpoint { .. } => false,
    }
}

/// Estimated tokens an item adds to the conversation.
fn item_tokens(item: &RecordItem) -> u64 {
    match item {
        RecordItem::UserMessage { text } => text_tokens(text),
        RecordItem::AssistantMessage { text, reasoning, .. } => {
            text_tokens(text) + reasoning.as_deref().map_or(0, text_tokens)
        }
        RecordItem::ToolCall { name, arguments, .. } => text_tokens(name) + text_tokens(arguments),
        RecordItem::ToolResult { output, .. } => text_tokens(output),
        RecordItem::Usage { .. }
        | RecordItem::TurnStarted {}
        | RecordItem::TurnCompleted { .. }
        | RecordItem::Compaction { .. }
        | RecordItem::Notice { .. }
        | RecordItem::Checkpoint { .. } => 0,
    }
}

/// One item of the transcript, or `None` for items that say nothing (empty text).
fn transcript_entry(item: &RecordItem) -> Option<String> {
    match item {
        RecordItem::UserMessage { text } => Some(format!("## User\n\n{text}")),
        RecordItem::AssistantMessage { text, .. } => {
            (!text.trim().is_empty()).then(|| format!("## Assistant\n\n{text}"))
        }
        RecordItem::ToolCall { id, name, arguments } => {
            Some(format!("## Tool call `{name}` ({id})\n\n{}", cut_middle(arguments)))
        }
        RecordItem::ToolResult { id, output, is_error, .. } => {
            let failed = if *is_error { ", failed" } else { "" };
            Some(format!("## Tool result ({id}{failed})\n\n{}", cut_middle(output)))
        }
        RecordItem::Usage { .. }
        | RecordItem::TurnStarted {}
        | RecordItem::TurnCompleted { .. }
        | RecordItem::Compaction { .. }
        | RecordItem::Notice { .. }
        | RecordItem::Checkpoint { .. } => None,
    }
}

/// The summarising request's text: the earlier summary, as many of the newest
/// transcript items as fit in `max_chars`, then the instructions.
fn summary_request(summary: Option<&str>, transcript: &[String], max_chars: usize) -> String {
    let mut budget = max_chars.saturating_sub(summary.map_or(0, str::len));
    let mut start = transcript.len();
    while start > 0 && transcript[start - 1].len() < budget {
        budget -= transcript[start - 1].len();
        start -= 1;
    }
    let mut text = String::new();
    if let Some(summary) = summary {
        text.push_str("# Summary of the conversation before this transcript\n\n");
        text.push_str(summary);
        text.push_str("\n\n");
    }
    text.push_str("# Transcript\n\n");
    if start > 0 {
        text.push_str(&format!("[{start} earlier items left out: they did not fit]\n\n"));
    }
    text.push_str(&transcript[start..].join("\n\n"));
    text.push_str("\n\n# Your task\n\n");
    text.push_str(SUMMARY_INSTRUCTIONS);
    text
}

/// Long text keeps its head and tail, with a note of what was cut.
fn cut_middle(text: &str) -> String {
    let count = text.chars().count();
    if count <= TRANSCRIPT_ITEM_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(TRANSCRIPT_ITEM_CHARS * 3 / 4).collect();
    let tail: String = text.chars().skip(count - TRANSCRIPT_ITEM_CHARS / 4).collect();
    let cut = count - head.chars().count() - tail.chars().count();
    format!("{head}\n[... {cut} characters cut ...]\n{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_protocol::{StopReason, Timestamp};

    fn entry(item: RecordItem) -> RecordEntry {
        RecordEntry { ts: Timestamp::now(), item }
    }

    fn user(text: &str) -> RecordItem {
        RecordItem::UserMessage { text: text.into() }
    }

    fn answer(text: &str) -> RecordItem {
        RecordItem::AssistantMessage { text: text.into(), reasoning: None, reasoning_opaque: None }
    }

    fn call(id: &str) -> RecordItem {
        RecordItem::ToolCall { id: id.into(), name: "shell".into(), arguments: "{}".into() }
    }

    fn result(id: &str, output: &str) -> RecordItem {
        RecordItem::ToolResult {
            id: id.into(),
            output: output.into(),
            is_error: false,
            duration_ms: 1,
        }
    }

    fn turn(entries: &mut Vec<RecordEntry>, prompt: &str, reply: &str) {
        entries.push(entry(RecordItem::TurnStarted {}));
        entries.push(entry(user(prompt)));
        entries.push(entry(answer(reply)));
        entries.push(entry(RecordItem::TurnCompleted {
            stop_reason: StopReason::EndTurn,
            error: None,
        }));
    }

    #[test]
    fn whole_turns_are_kept_and_older_ones_summarised() {
        let mut entries = Vec::new();
        turn(&mut entries, "first", "one");
        turn(&mut entries, "second", "two");
        turn(&mut entries, "third", "three");
        entries.push(entry(RecordItem::TurnStarted {}));
        entries.push(entry(user("fourth")));
        let plan = plan(&entries, 10_000, 100_000).unwrap();
        // Kept: the third turn (user message at index 9) and the current prompt.
        assert_eq!(plan.replaces_through, 8);
        assert!(plan.request.contains("## User\n\nfirst") && plan.request.contains("two"));
        assert!(!plan.request.contains("third") && !plan.request.contains("fourth"));
        assert_eq!(plan.current_request, None);
    }

    #[test]
    fn a_long_single_turn_is_cut_between_steps_and_keeps_its_request_verbatim() {
        let mut entries = vec![entry(RecordItem::TurnStarted {}), entry(user("fix the build"))];
        for n in 0..10 {
            let id = format!("c{n}");
            entries.push(entry(call(&id)));
            entries.push(entry(result(&id, &"x".repeat(400))));
        }
        let plan = plan(&entries, 10_000, 100_000).unwrap();
        // Six responses stay: calls c4..c9; c4's call is at index 2 + 4 * 2.
        assert_eq!(plan.replaces_through, 9);
        assert_eq!(plan.current_request.as_deref(), Some("fix the build"));
        assert!(plan.summary("did things").ends_with("verbatim:\n\nfix the build"));
    }

    #[test]
    fn the_token_budget_shrinks_what_is_kept() {
        let mut entries = vec![entry(user("go"))];
        for n in 0..4 {
            let id = format!("c{n}");
            entries.push(entry(call(&id)));
            entries.push(entry(result(&id, &"y".repeat(4_000))));
        }
        // Each step is ~1000 tokens: only the last fits in 1500.
        let plan = plan(&entries, 1_500, 100_000).unwrap();
        assert_eq!(plan.replaces_through, 6);
    }

    #[test]
    fn a_second_compaction_summarises_the_first_summary_and_what_it_kept() {
        let mut entries = Vec::new();
        turn(&mut entries, "first", "one");
        turn(&mut entries, "second", "two");
        entries.push(entry(RecordItem::Compaction { summary: "S1".into(), replaces_through: 3 }));
        turn(&mut entries, "third", "three");
        turn(&mut entries, "fourth", "four");
        let plan = plan(&entries, 10_000, 100_000).unwrap();
        assert!(plan.request.starts_with("# Summary of the conversation before"));
        assert!(plan.request.contains("S1") && plan.request.contains("second"));
        assert!(!plan.request.contains("first") && !plan.request.contains("third"));
        // Kept from the third turn's user message (index 10) on.
        assert_eq!(plan.replaces_through, 9);
    }

    #[test]
    fn without_a_model_response_there_is_nothing_to_compact() {
        let entries = vec![entry(user("hello"))];
        assert!(plan(&entries, 10, 1_000).unwrap_err().contains("nothing to compact"));
        assert!(plan(&[], 10, 1_000).is_err());
    }

    #[test]
    fn a_step_too_big_to_keep_is_summarised_with_everything_else() {
        let entries = vec![
            entry(user("read the log")),
            entry(call("c1")),
            entry(result("c1", &"z".repeat(40_000))),
        ];
        let plan = plan(&entries, 1_000, 100_000).unwrap();
        assert_eq!(plan.replaces_through, 2);
        assert_eq!(plan.current_request.as_deref(), Some("read the log"));
        assert!(plan.request.contains("characters cut"));
    }

    #[test]
    fn images_of_the_replaced_items_are_noted_in_the_summary() {
        let mut entries = Vec::new();
        entries.push(entry(RecordItem::TurnStarted {}));
        entries.push(entry(user("look at this [image: image/jpeg]")));
        entries.push(entry(RecordItem::ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"shot.png"}"#.into(),
        }));
        // A long result whose placeholder the transcript's cut would drop.
        let output = format!("{}[image: image/png]{}", "x".repeat(3_000), "y".repeat(3_000));
        entries.push(entry(result("c1", &output)));
        entries.push(entry(answer("it is a cat")));
        turn(&mut entries, "next", "ok");
        turn(&mut entries, "and next", "ok");
        let plan = plan(&entries, 0, 100_000).unwrap();
        let summary = plan.summary("They looked at a picture.");
        assert!(summary.starts_with("They looked at a picture."), "{summary}");
        assert!(summary.contains("an image (image/jpeg) sent by the user"), "{summary}");
        assert!(
            summary.contains(
                r#"an image (image/png) returned by `read_file` {"path":"shot.png"} (call c1)"#
            ),
            "{summary}"
        );
    }

    #[test]
    fn the_transcript_leaves_out_its_oldest_items_and_cuts_long_ones() {
        let items = vec!["a".repeat(50), "b".repeat(50), "c".repeat(50)];
        let text = summary_request(None, &items, 120);
        assert!(text.contains("[1 earlier items left out") && !text.contains("aaa"));
        let long = cut_middle(&"z".repeat(10_000));
        assert!(long.len() < 2_100 && long.contains("characters cut"));
    }
}
