//! Reading a session record back: a streaming, line-by-line parse (a 50 MB record is
//! never held as one string, and no work is repeated per line). A record's items are its
//! complete non-blank lines after the header; a torn last line (no newline: its write
//! never finished) is ignored, and lines this reader cannot use are counted, not fatal.

use crate::StoreError;
use crate::activity::{RecordActivity, item_kind};
use kestrel_protocol::{
    RECORD_VERSION, RecordEntry, RecordHeader, RecordHeaderLine, RecordItem, Timestamp,
};
use serde::Deserialize;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// A record as read back: its header and the items this reader understood.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The first line: who, where, which model, forked from what.
    pub header: RecordHeader,
    /// The items in order. Their index equals the item index used by `fork --at` and
    /// `replaces_through` unless `skipped` is non-zero.
    pub entries: Vec<RecordEntry>,
    /// Complete lines that were not usable items: an unknown item type (a newer
    /// Kestrel wrote it) or a known type with the wrong shape.
    pub skipped: usize,
    /// Whether the file ended with a partly written line, which was ignored.
    pub torn_tail: bool,
}

impl Replay {
    /// How many item lines the record holds: the ones understood plus the skipped ones.
    pub fn item_count(&self) -> u64 {
        u64::try_from(self.entries.len() + self.skipped).unwrap_or(u64::MAX)
    }

    /// The entries from the newest `compaction` item (which carries the summary) to the
    /// end; all of them if the record was never compacted. A resume also needs the items
    /// that compaction kept (indices `replaces_through + 1` up to it): see
    /// `kestrel_agent::History::replay` and docs/compaction.md.
    pub fn from_compaction(&self) -> &[RecordEntry] {
        let start = self
            .entries
            .iter()
            .rposition(|entry| matches!(entry.item, RecordItem::Compaction { .. }))
            .unwrap_or(0);
        &self.entries[start..]
    }

    /// The text of the first user message, the session's label in listings.
    pub fn first_prompt(&self) -> Option<&str> {
        self.entries.iter().find_map(|entry| user_message_text(&entry.item))
    }
}

/// Reads the record at `path`.
///
/// Fails when the file cannot be read or its first line is not a complete session
/// header of a version this Kestrel understands; the error names the file.
pub fn read_record(path: &Path) -> Result<Replay, StoreError> {
    let file =
        File::open(path).map_err(|source| StoreError::io("open the record", path, source))?;
    let read = read_from(BufReader::with_capacity(64 * 1024, file), path)?;
    Ok(read.replay)
}

/// A whole record read back, with what the index learns from it.
pub(crate) struct ReadRecord {
    pub(crate) replay: Replay,
    /// The length in bytes of its complete lines (where a torn tail begins).
    pub(crate) complete_len: u64,
    pub(crate) activity: RecordActivity,
}

/// Reads a whole record from `reader`.
pub(crate) fn read_from<R: BufRead>(reader: R, path: &Path) -> Result<ReadRecord, StoreError> {
    let mut lines = RecordLines::new(reader, path);
    let header = lines.header()?;
    let mut activity = RecordActivity::new(&header);
    let mut replay = Replay { header, entries: Vec::new(), skipped: 0, torn_tail: false };
    while let Some(line) = lines.next_line()? {
        match line {
            RawLine::Item(bytes) => match serde_json::from_slice::<RecordEntry>(bytes) {
                Ok(entry) => {
                    activity.note(item_kind(&entry.item), entry.ts, Some(&entry.item));
                    replay.entries.push(entry);
                }
                Err(_) => {
                    replay.skipped += 1;
                    match serde_json::from_slice::<ItemHead>(bytes) {
                        Ok(head) => activity.note(&head.kind, head.ts, None),
                        Err(_) => activity.skip(),
                    }
                }
            },
            RawLine::Torn => replay.torn_tail = true,
        }
    }
    Ok(ReadRecord { replay, complete_len: lines.complete_len(), activity })
}

/// The type and time of a record item, without the rest of it.
#[derive(Deserialize)]
pub(crate) struct ItemHead<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) kind: std::borrow::Cow<'a, str>,
    pub(crate) ts: Timestamp,
}

/// The text of a user message item, `None` for any other item.
pub(crate) fn user_message_text(item: &RecordItem) -> Option<&str> {
    if let RecordItem::UserMessage { text } = item { Some(text) } else { None }
}

/// One line after the header, as raw bytes (newline stripped).
pub(crate) enum RawLine<'a> {
    /// A complete line: an item, understood or not.
    Item(&'a [u8]),
    /// The file's last line had no newline: a write that never finished.
    Torn,
}

/// A line splitter over a record that reuses one buffer and tracks how many bytes of
/// complete lines it has passed.
pub(crate) struct RecordLines<R> {
    reader: R,
    path: PathBuf,
    buffer: Vec<u8>,
    complete_len: u64,
}

impl<R: BufRead> RecordLines<R> {
    pub(crate) fn new(reader: R, path: &Path) -> Self {
        Self { reader, path: path.to_path_buf(), buffer: Vec::new(), complete_len: 0 }
    }

    /// Reads and checks the header line; must be called once, first.
    pub(crate) fn header(&mut self) -> Result<RecordHeader, StoreError> {
        let path = self.path.clone();
        let invalid = |reason: String| StoreError::InvalidHeader { path: path.clone(), reason };
        if !self.read_raw()? {
            return Err(invalid("the file is empty".into()));
        }
        let Some(line) = self.buffer.strip_suffix(b"\n") else {
            return Err(invalid("its header line is incomplete".into()));
        };
        let header = serde_json::from_slice::<RecordHeaderLine>(line)
            .map_err(|error| invalid(format!("bad header line: {error}")))?
            .header;
        if header.version > RECORD_VERSION {
            return Err(invalid(format!(
                "it was written by a newer Kestrel (record version {}, this one reads up to {RECORD_VERSION}): upgrade kestrel",
                header.version
            )));
        }
        self.complete_len += self.buffer.len() as u64;
        Ok(header)
    }

    /// The next item line, skipping blank ones; `None` at the end of the file.
    pub(crate) fn next_line(&mut self) -> Result<Option<RawLine<'_>>, StoreError> {
        loop {
            if !self.read_raw()? {
                return Ok(None);
            }
            let Some(line) = self.buffer.strip_suffix(b"\n") else {
                return Ok(Some(RawLine::Torn));
            };
            self.complete_len += self.buffer.len() as u64;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // Re-borrow the stored line after the length bookkeeping.
            let len = line.len();
            return Ok(Some(RawLine::Item(&self.buffer[..len])));
        }
    }

    /// Bytes of complete lines read so far (the header included).
    pub(crate) fn complete_len(&self) -> u64 {
        self.complete_len
    }

    /// Reads one line (with its newline, if any) into the buffer; false at end of file.
    fn read_raw(&mut self) -> Result<bool, StoreError> {
        self.buffer.clear();
        let read = self
            .reader
            .read_until(b'\n', &mut self.buffer)
            .map_err(|source| StoreError::io("read the record", &self.path, source))?;
        Ok(read > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    const HEADER: &str = r#"{"type":"session","id":"s1","version":1,"created_at":"2026-01-02T03:04:05.000Z","cwd":"/w","provider":"openai","model":"gpt-5"}"#;

    fn read(text: &str) -> Result<(Replay, u64), StoreError> {
        read_from(Cursor::new(text.as_bytes().to_vec()), Path::new("/r.jsonl"))
            .map(|read| (read.replay, read.complete_len))
    }

    fn user(text: &str) -> String {
        format!(r#"{{"ts":"2026-01-02T03:04:06.000Z","type":"user_message","text":"{text}"}}"#)
    }

    #[test]
    fn reads_header_and_items() {
        let text = format!("{HEADER}\n{}\n{}\n", user("a"), user("b"));
        let (replay, len) = read(&text).unwrap();
        assert_eq!(replay.header.id.as_str(), "s1");
        assert_eq!(replay.entries.len(), 2);
        assert_eq!((replay.skipped, replay.torn_tail), (0, false));
        assert_eq!(len, text.len() as u64);
        assert_eq!(replay.first_prompt(), Some("a"));
    }

    #[test]
    fn torn_tail_is_ignored_and_not_in_complete_length() {
        let complete = format!("{HEADER}\n{}\n", user("a"));
        let text = format!("{complete}{{\"ts\":\"2026-01-02T03:0");
        let (replay, len) = read(&text).unwrap();
        assert_eq!(replay.entries.len(), 1);
        assert!(replay.torn_tail);
        assert_eq!(replay.skipped, 0);
        assert_eq!(len, complete.len() as u64);
    }

    #[test]
    fn unknown_types_and_wrong_shapes_are_skipped_and_counted() {
        let unknown = r#"{"ts":"2026-01-02T03:04:06.000Z","type":"hologram","x":1}"#;
        let wrong_shape = r#"{"ts":"2026-01-02T03:04:06.000Z","type":"tool_result","id":7}"#;
        let text = format!("{HEADER}\n{unknown}\n{}\n{wrong_shape}\nnot json\n\n", user("a"));
        let (replay, _) = read(&text).unwrap();
        assert_eq!(replay.entries.len(), 1);
        assert_eq!(replay.skipped, 3);
        assert_eq!(replay.item_count(), 4);
    }

    #[test]
    fn missing_or_bad_header_is_an_error_naming_the_file() {
        for text in ["", "{\"type\":\"session\"", "{\"type\":\"user_message\",\"text\":\"x\"}\n"] {
            let error = read(text).unwrap_err();
            assert!(matches!(error, StoreError::InvalidHeader { .. }), "{error}");
            assert!(error.to_string().contains("/r.jsonl"), "{error}");
        }
    }

    #[test]
    fn newer_record_version_is_refused_with_the_fix() {
        let text = HEADER.replace("\"version\":1", "\"version\":99") + "\n";
        let error = read(&text).unwrap_err();
        assert!(error.to_string().contains("upgrade kestrel"), "{error}");
    }

    #[test]
    fn replay_starts_at_the_newest_compaction() {
        let compaction = |n: u64| {
            format!(
                r#"{{"ts":"2026-01-02T03:04:06.000Z","type":"compaction","summary":"s{n}","replaces_through":{n}}}"#
            )
        };
        let text = format!(
            "{HEADER}\n{}\n{}\n{}\n{}\n{}\n",
            user("a"),
            compaction(0),
            user("b"),
            compaction(2),
            user("c")
        );
        let (replay, _) = read(&text).unwrap();
        let tail = replay.from_compaction();
        assert_eq!(tail.len(), 2);
        assert!(matches!(tail[0].item, RecordItem::Compaction { replaces_through: 2, .. }));

        let (plain, _) = read(&format!("{HEADER}\n{}\n", user("a"))).unwrap();
        assert_eq!(plain.from_compaction().len(), 1);
    }
}
