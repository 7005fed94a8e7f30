//! Which record items note a session's last activity in the index. One rule, used by
//! the record's writer (which appends an index line for a noted item) and by a rebuild
//! of the index from the records (which takes the last noted item's time), so a rebuilt
//! index says what the live one said.
//!
//! Always noted: the first user message (the session's label) and a model request that
//! adds to the session's own usage. Turn boundaries and items written between turns
//! (user messages, finished turns, compactions, notices, checkpoints such as an undo's)
//! are noted when the last noted activity is at least [`QUIET_MILLIS`] old; anything
//! else when it is [`ACTIVITY_STEP_MILLIS`] old. So a turn writes about one line per
//! model request, and a long one still moves its session up the list.

use crate::replay::user_message_text;
use kestrel_protocol::{RecordHeader, RecordItem, Timestamp, Usage};

/// A boundary item this soon after the last noted activity writes no index line.
pub(crate) const QUIET_MILLIS: i64 = 1_000;

/// Items that are not boundaries note activity at most this often (milliseconds).
pub(crate) const ACTIVITY_STEP_MILLIS: i64 = 60_000;

/// How much an item says about the session's activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activity {
    /// The index must hear of it (the first prompt, new usage).
    Forced,
    /// A turn boundary, or an item written between turns.
    Boundary,
    /// An item inside a turn (answers, tool calls and results).
    Inside,
}

impl Activity {
    /// The activity of `item` given whether it is forced (a first prompt or new usage:
    /// only the writer or the scan knows).
    pub(crate) fn of(item: &RecordItem, forced: bool) -> Self {
        if forced {
            return Activity::Forced;
        }
        Self::of_kind(item_kind(item))
    }

    /// The activity of an item of type `kind` (its record `type`) that is not forced.
    pub(crate) fn of_kind(kind: &str) -> Self {
        match kind {
            "user_message" | "usage" | "turn_completed" | "compaction" | "notice"
            | "checkpoint" => Activity::Boundary,
            _ => Activity::Inside,
        }
    }
}

/// The record `type` of an item.
pub(crate) fn item_kind(item: &RecordItem) -> &'static str {
    match item {
        RecordItem::UserMessage { .. } => "user_message",
        RecordItem::AssistantMessage { .. } => "assistant_message",
        RecordItem::ToolCall { .. } => "tool_call",
        RecordItem::ToolResult { .. } => "tool_result",
        RecordItem::Usage { .. } => "usage",
        RecordItem::TurnStarted {} => "turn_started",
        RecordItem::TurnCompleted { .. } => "turn_completed",
        RecordItem::Compaction { .. } => "compaction",
        RecordItem::Notice { .. } => "notice",
        RecordItem::Checkpoint { .. } => "checkpoint",
    }
}

/// The last noted activity of one session, and the rule for the next item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ActivityClock {
    noted: Timestamp,
}

impl ActivityClock {
    /// A session's clock at its creation (the creation stands for activity).
    pub(crate) fn new(created_at: Timestamp) -> Self {
        Self { noted: created_at }
    }

    /// Whether an item at `ts` of `activity` is noted; the clock moves to it if so
    /// (never backwards: a fork's copied items are older than the fork).
    pub(crate) fn note(&mut self, ts: Timestamp, activity: Activity) -> bool {
        let age = ts.millis - self.noted.millis;
        let noted = match activity {
            Activity::Forced => true,
            Activity::Boundary => age >= QUIET_MILLIS,
            Activity::Inside => age >= ACTIVITY_STEP_MILLIS,
        };
        if noted {
            self.noted = self.noted.max(ts);
        }
        noted
    }

    /// The time of the last noted activity.
    pub(crate) fn noted(&self) -> Timestamp {
        self.noted
    }
}

/// What the index learns from a record read line by line: its first prompt, its own
/// usage (a fork's copied items left out) and its last noted activity. The one reading
/// of a record for the index: a rebuild (which parses whole only the lines it
/// [`wants`](Self::wants)) and a writer reopening the record both use it, so they agree.
#[derive(Debug, Clone)]
pub(crate) struct RecordActivity {
    clock: ActivityClock,
    /// Items a fork copied from its source: their usage is not this session's.
    copied: u64,
    /// The position of the next item line.
    position: u64,
    first_prompt: Option<String>,
    usage: Usage,
}

impl RecordActivity {
    pub(crate) fn new(header: &RecordHeader) -> Self {
        Self {
            clock: ActivityClock::new(header.created_at),
            copied: header.forked_from.as_ref().map_or(0, |fork| fork.items),
            position: 0,
            first_prompt: None,
            usage: Usage::default(),
        }
    }

    /// Whether the next line, of type `kind`, must be parsed whole to be noted: the
    /// first prompt, and usage the session spent itself.
    pub(crate) fn wants(&self, kind: &str) -> bool {
        (self.first_prompt.is_none() && kind == "user_message")
            || (self.position >= self.copied && kind == "usage")
    }

    /// Notes the next item line: its `type` and time, with the item itself when it was
    /// parsed (`None`: not wanted, or not understood, e.g. a newer Kestrel's type).
    pub(crate) fn note(&mut self, kind: &str, ts: Timestamp, item: Option<&RecordItem>) {
        let mut forced = false;
        if self.wants(kind) {
            match item {
                Some(RecordItem::Usage { usage }) => {
                    self.usage.add(usage);
                    forced = *usage != Usage::default();
                }
                Some(item) => {
                    if let Some(text) = user_message_text(item) {
                        self.first_prompt = Some(text.to_owned());
                        forced = true;
                    }
                }
                None => {}
            }
        }
        let activity = if forced { Activity::Forced } else { Activity::of_kind(kind) };
        self.clock.note(ts, activity);
        self.position += 1;
    }

    /// A line with no readable type or time: it holds a position and notes nothing.
    pub(crate) fn skip(&mut self) {
        self.position += 1;
    }

    pub(crate) fn clock(&self) -> ActivityClock {
        self.clock
    }

    /// The first user message, whole.
    pub(crate) fn first_prompt(&self) -> Option<&str> {
        self.first_prompt.as_deref()
    }

    pub(crate) fn usage(&self) -> Usage {
        self.usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(millis: i64) -> Timestamp {
        Timestamp { millis }
    }

    #[test]
    fn boundaries_within_a_second_of_the_last_note_are_not_noted() {
        let mut clock = ActivityClock::new(at(0));
        assert!(clock.note(at(5_000), Activity::Forced));
        assert!(!clock.note(at(5_400), Activity::Boundary));
        assert!(clock.note(at(6_000), Activity::Boundary));
        assert!(!clock.note(at(30_000), Activity::Inside));
        assert!(clock.note(at(66_000), Activity::Inside));
        assert_eq!(clock.noted(), at(66_000));
    }

    #[test]
    fn forced_items_are_always_noted_and_the_clock_never_goes_back() {
        let mut clock = ActivityClock::new(at(10_000));
        assert!(clock.note(at(1_000), Activity::Forced));
        assert_eq!(clock.noted(), at(10_000));
    }
}
