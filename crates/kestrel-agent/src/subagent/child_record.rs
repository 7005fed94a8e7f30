//! Following a child session's record from outside: the parent reads the lines the
//! child's worker appends (it never takes the record's lock) until the child's first
//! turn is complete. Only complete lines are read, so a line being written is picked up
//! on the next look. A record that no process holds (its worker's lock, ARCHITECTURE §5)
//! for longer than a restart takes means the child's worker is gone for good (given up
//! on by the daemon, killed with no restart): the turn ends as interrupted.

use super::{CANCEL_GRACE, ChildOutcome, START_TIMEOUT};
use kestrel_protocol::{RecordEntry, RecordItem, SessionId, StopReason, Usage};
use kestrel_store::{KestrelHome, SessionIndex};
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often a followed record is looked at.
const POLL: Duration = Duration::from_millis(100);
/// How often a quiet record is checked for a writer. Each check holds a shared lock for
/// an instant, so it is rare: a worker that (re)opens the record at that very instant
/// fails and is restarted.
const WRITER_CHECK: Duration = Duration::from_secs(1);
/// How long a started turn's record may have no writer before the child is given up on:
/// longer than the daemon takes to restart a crashed worker.
const ORPHAN_GRACE: Duration = Duration::from_secs(15);

/// A child's record and what its first turn has shown so far.
pub(crate) struct ChildRecord {
    id: SessionId,
    path: PathBuf,
    /// Bytes of complete lines read (the header included).
    offset: u64,
    started: bool,
    final_text: String,
    usage: Usage,
    requests: u32,
    ended: Option<(StopReason, Option<String>)>,
    /// How long the record may have no writer before the child counts as gone.
    orphan_grace: Duration,
}

impl ChildRecord {
    /// Finds the record of session `id` (through the index). Fails with a message when
    /// there is none.
    pub(crate) fn locate(home: &KestrelHome, id: &SessionId) -> Result<Self, String> {
        let summary = SessionIndex::find(home, id.as_str())
            .map_err(|error| format!("cannot find the record of session {id}: {error}"))?;
        Ok(Self {
            id: id.clone(),
            path: summary.path,
            offset: 0,
            started: false,
            final_text: String::new(),
            usage: Usage::default(),
            requests: 0,
            ended: None,
            orphan_grace: ORPHAN_GRACE,
        })
    }

    /// Reads what was appended since the last look; the outcome once the turn has ended.
    pub(crate) fn poll(&mut self) -> Result<Option<ChildOutcome>, String> {
        if self.ended.is_none() {
            self.read_new_lines()
                .map_err(|error| format!("cannot read {}: {error}", self.path.display()))?;
        }
        Ok(self.ended.clone().map(|(stop_reason, error)| self.outcome(stop_reason, error)))
    }

    /// What the turn has shown so far, ended with `stop_reason`: for a child given up on.
    pub(crate) fn outcome(&self, stop_reason: StopReason, error: Option<String>) -> ChildOutcome {
        ChildOutcome {
            session_id: self.id.clone(),
            stop_reason,
            final_text: self.final_text.clone(),
            error,
            usage: self.usage,
            requests: self.requests,
        }
    }

    /// Follows the record until the turn ends. A cancel calls `on_cancel` once, then
    /// waits a short grace for the child to record its end; after it, or when the turn
    /// never starts within the start timeout, the child is given up on. A started turn
    /// whose record has had no writer for the orphan grace ends as interrupted.
    pub(crate) async fn follow(
        &mut self,
        cancel: &CancellationToken,
        on_cancel: impl AsyncFnOnce(),
    ) -> Result<ChildOutcome, String> {
        let started_at = Instant::now();
        let mut on_cancel = Some(on_cancel);
        let mut cancelled_at: Option<Instant> = None;
        let mut last_check = Instant::now();
        let mut writerless_since: Option<Instant> = None;
        loop {
            let offset = self.offset;
            if let Some(outcome) = self.poll()? {
                return Ok(outcome);
            }
            if self.offset != offset {
                last_check = Instant::now();
                writerless_since = None;
            } else if self.started && last_check.elapsed() >= WRITER_CHECK {
                last_check = Instant::now();
                if self.has_writer() {
                    writerless_since = None;
                } else if writerless_since.get_or_insert(last_check).elapsed() >= self.orphan_grace
                {
                    let error = "the subagent's worker is gone (nothing has held its record \
                        for a while) and its turn never ended"
                        .to_string();
                    return Ok(self.outcome(StopReason::Interrupted, Some(error)));
                }
            }
            if let Some(at) = cancelled_at {
                if at.elapsed() >= CANCEL_GRACE {
                    let error = "cancelled; the subagent did not stop in time".to_string();
                    return Ok(self.outcome(StopReason::Cancelled, Some(error)));
                }
            } else if !self.started && started_at.elapsed() >= START_TIMEOUT {
                return Err(format!(
                    "it did not start its turn within {} s",
                    START_TIMEOUT.as_secs()
                ));
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = cancel.cancelled(), if cancelled_at.is_none() => {
                    cancelled_at = Some(Instant::now());
                    if let Some(on_cancel) = on_cancel.take() {
                        on_cancel().await;
                    }
                }
            }
        }
    }

    /// Whether a worker holds the record's lock. Unknown (an error) counts as yes.
    fn has_writer(&self) -> bool {
        let Ok(file) = std::fs::File::open(&self.path) else { return true };
        match file.try_lock_shared() {
            // Closing the file right away releases the probe's lock.
            Ok(()) => false,
            Err(std::fs::TryLockError::WouldBlock | std::fs::TryLockError::Error(_)) => true,
        }
    }

    fn read_new_lines(&mut self) -> std::io::Result<()> {
        let mut file = std::fs::File::open(&self.path)?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut reader = BufReader::new(file);
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = reader.read_until(b'\n', &mut line)?;
            if read == 0 || line.last() != Some(&b'\n') {
                return Ok(());
            }
            let first = self.offset == 0;
            self.offset += u64::try_from(read).unwrap_or(u64::MAX);
            // The header and lines this Kestrel cannot read say nothing about the turn.
            if first {
                continue;
            }
            if let Ok(entry) = serde_json::from_slice::<RecordEntry>(&line) {
                self.absorb(entry.item);
                if self.ended.is_some() {
                    return Ok(());
                }
            }
        }
    }

    fn absorb(&mut self, item: RecordItem) {
        match item {
            RecordItem::TurnStarted {} => self.started = true,
            RecordItem::AssistantMessage { text, .. } if !text.trim().is_empty() => {
                self.final_text = text;
            }
            RecordItem::Usage { usage } => {
                self.usage.add(&usage);
                self.requests += 1;
            }
            RecordItem::TurnCompleted { stop_reason, error } if self.started => {
                self.ended = Some((stop_reason, error));
            }
            RecordItem::UserMessage { .. }
            | RecordItem::AssistantMessage { .. }
            | RecordItem::ToolCall { .. }
            | RecordItem::ToolResult { .. }
            | RecordItem::TurnCompleted { .. }
            | RecordItem::Compaction { .. }
            | RecordItem::Notice { .. }
            | RecordItem::Checkpoint { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_protocol::{RECORD_VERSION, RecordHeader, Timestamp};
    use kestrel_store::SessionRecord;

    /// A new subagent's record in `home`.
    fn child_session(home: &KestrelHome) -> (SessionId, SessionRecord) {
        let id = SessionId::new();
        let header = RecordHeader {
            id: id.clone(),
            version: RECORD_VERSION,
            created_at: Timestamp::now(),
            cwd: "/w".into(),
            provider: "p".into(),
            model: "m".into(),
            parent_id: Some(SessionId::new()),
            forked_from: None,
            swarm: None,
            repository: None,
        };
        (id, SessionRecord::create(home, header).unwrap())
    }

    fn append(record: &mut SessionRecord, item: RecordItem) {
        record.append(&RecordEntry::now(item)).unwrap();
    }

    #[tokio::test]
    async fn follows_a_record_as_it_grows_until_the_turn_ends() {
        let home_dir = tempfile::tempdir().unwrap();
        let home = KestrelHome::at(home_dir.path());
        let (id, mut record) = child_session(&home);
        let mut child = ChildRecord::locate(&home, &id).unwrap();
        assert_eq!(child.poll().unwrap(), None);
        append(&mut record, RecordItem::TurnStarted {});
        append(&mut record, RecordItem::UserMessage { text: "go".into() });
        let message = |text: &str| RecordItem::AssistantMessage {
            text: text.into(),
            reasoning: None,
            reasoning_opaque: None,
        };
        append(&mut record, message("looking"));
        let usage = Usage { input_tokens: 10, output_tokens: 5, cost: 0.5, ..Usage::default() };
        append(&mut record, RecordItem::Usage { usage });
        assert_eq!(child.poll().unwrap(), None);
        append(&mut record, message("the answer"));
        append(&mut record, RecordItem::Usage { usage });
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let end = RecordItem::TurnCompleted { stop_reason: StopReason::EndTurn, error: None };
            append(&mut record, end);
            record
        });
        let outcome = child.follow(&CancellationToken::new(), async || {}).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::EndTurn);
        assert_eq!(outcome.final_text, "the answer");
        assert_eq!(
            (outcome.requests, outcome.usage.input_tokens, outcome.usage.cost),
            (2, 20, 1.0)
        );
        drop(writer.await.unwrap());
    }

    #[tokio::test]
    async fn a_started_turn_whose_worker_is_gone_ends_as_interrupted() {
        let home_dir = tempfile::tempdir().unwrap();
        let home = KestrelHome::at(home_dir.path());
        let (id, mut record) = child_session(&home);
        append(&mut record, RecordItem::TurnStarted {});
        let mut child = ChildRecord::locate(&home, &id).unwrap();
        child.orphan_grace = Duration::from_millis(300);
        // While the worker holds the record, the child is waited for.
        let held = tokio::time::timeout(
            Duration::from_millis(2_500),
            child.follow(&CancellationToken::new(), async || {}),
        )
        .await;
        assert!(held.is_err(), "gave up on a child whose worker is alive: {held:?}");
        // The worker dies (its lock goes with it) without ending the turn.
        drop(record);
        let outcome = tokio::time::timeout(
            Duration::from_secs(10),
            child.follow(&CancellationToken::new(), async || {}),
        )
        .await
        .expect("the parent stops waiting for a child whose worker is gone")
        .unwrap();
        assert_eq!(outcome.stop_reason, StopReason::Interrupted);
        assert!(outcome.error.unwrap().contains("worker is gone"));
    }

    #[test]
    fn an_unknown_session_is_a_clear_error() {
        let home_dir = tempfile::tempdir().unwrap();
        let home = KestrelHome::at(home_dir.path());
        let error = ChildRecord::locate(&home, &SessionId::from_string("nope")).err().unwrap();
        assert!(error.contains("cannot find the record of session nope"), "{error}");
    }
}
