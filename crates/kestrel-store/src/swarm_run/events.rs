//! `events.jsonl`: one [`SwarmEntry`] per line, each appended with one write and synced
//! (the events are what a resume rebuilds the run from). Reading is streaming and
//! forgiving: a torn last line is left out, an event type from a newer Kestrel is skipped,
//! and a corrupt line is skipped but counted.

use super::SwarmRunDir;
use crate::StoreError;
use crate::paths;
use kestrel_protocol::swarm::{SwarmEntry, SwarmEvent};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::OnceLock;

/// A run's events as read back.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventLog {
    /// The events understood, in order.
    pub entries: Vec<SwarmEntry>,
    pub skipped: SkippedEvents,
    /// The last line had no newline (a write cut short): it was left out.
    pub torn_tail: bool,
}

/// Complete lines of `events.jsonl` that were not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SkippedEvents {
    /// Events of a type this Kestrel does not know (a newer one wrote them).
    pub unknown: usize,
    /// Lines that are not events at all (cut short by a crash, or damaged).
    pub corrupt: usize,
    /// The 1-based number of the first corrupt line, for a message.
    pub first_corrupt_line: Option<u64>,
}

impl SwarmRunDir {
    /// Appends `entry` to `events.jsonl` (created 0600 if needed) as one write of a whole
    /// line to the O_APPEND file, then syncs it to disk (`fdatasync`): an event the
    /// orchestrator acted on must survive a power cut. Appends need no lock (`kestrel
    /// swarm cancel` appends beside the orchestrator). A torn last line left by a crash
    /// is ended first, so it cannot swallow this one.
    ///
    /// Fails, with the file named, when the line cannot be written or synced: the caller
    /// must stop the run rather than act on an event it did not record.
    pub fn append(&self, entry: &SwarmEntry) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(entry).map_err(|error| StoreError::EncodeRun {
            run: self.run.clone(),
            what: "event",
            message: error.to_string(),
        })?;
        line.push(b'\n');
        let path = self.events_file();
        let path = path.as_path();
        let io_error = |action| move |source| StoreError::io(action, path, source);
        let mut file = paths::private_file_options()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io_error("open for appending"))?;
        if !ends_with_newline(&mut file).map_err(io_error("read the end of"))? {
            line.insert(0, b'\n');
        }
        file.write_all(&line).map_err(io_error("append an event to"))?;
        file.sync_data().map_err(io_error("sync"))
    }

    /// Every event of the run, read line by line; a run with no events yet has none.
    ///
    /// Fails only when `events.jsonl` exists but cannot be read.
    pub fn events(&self) -> Result<EventLog, StoreError> {
        let path = self.events_file();
        match File::open(&path) {
            Ok(file) => read_events(BufReader::with_capacity(64 * 1024, file), &path),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(EventLog::default()),
            Err(source) => Err(StoreError::io("open the run's events", path, source)),
        }
    }
}

/// Whether `file` is empty or ends with `\n`.
fn ends_with_newline(file: &mut File) -> std::io::Result<bool> {
    if file.metadata()?.len() == 0 {
        return Ok(true);
    }
    // Reads only: appends go to the end whatever the position.
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

pub(super) fn read_events<R: BufRead>(mut reader: R, path: &Path) -> Result<EventLog, StoreError> {
    let mut log = EventLog::default();
    let mut buffer = Vec::new();
    let mut number: u64 = 0;
    loop {
        buffer.clear();
        let read = reader
            .read_until(b'\n', &mut buffer)
            .map_err(|source| StoreError::io("read the run's events", path, source))?;
        if read == 0 {
            break;
        }
        number += 1;
        let Some(line) = buffer.strip_suffix(b"\n") else {
            log.torn_tail = true;
            break;
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // One UTF-8 check per line; parsing from a `str` then skips it for every string.
        let parsed = std::str::from_utf8(line)
            .ok()
            .map(|text| (text, serde_json::from_str::<SwarmEntry>(text)));
        match parsed {
            Some((_, Ok(entry))) => log.entries.push(entry),
            Some((text, Err(_))) if is_unknown_type(text) => log.skipped.unknown += 1,
            Some((_, Err(_))) | None => {
                log.skipped.corrupt += 1;
                log.skipped.first_corrupt_line.get_or_insert(number);
            }
        }
    }
    Ok(log)
}

/// A JSON object with `ts` and a `type` no [`SwarmEvent`] has: a newer Kestrel's event.
/// (A known type with broken fields is corrupt, not unknown.)
fn is_unknown_type(text: &str) -> bool {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(rename = "ts")]
        _ts: kestrel_protocol::Timestamp,
    }
    serde_json::from_str::<Head>(text)
        .is_ok_and(|head| !known_event_types().contains(&head.kind.as_ref()))
}

/// The `type` of every event this Kestrel knows, from [`SwarmEvent`]'s own deserializer
/// so the list cannot drift from the enum: it is given a `type` no variant has, and its
/// "unknown variant" error carries the names it expected.
pub(super) fn known_event_types() -> &'static [&'static str] {
    static KNOWN: OnceLock<&'static [&'static str]> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let probe = serde::de::value::MapDeserializer::<_, VariantsProbe>::new(std::iter::once((
            "type", "",
        )));
        match SwarmEvent::deserialize(probe) {
            Err(VariantsProbe(Some(expected))) => expected,
            Ok(_) | Err(VariantsProbe(None)) => &[],
        }
    })
}

/// A deserializer error that keeps the variant names an "unknown variant" error lists.
#[derive(Debug)]
struct VariantsProbe(Option<&'static [&'static str]>);

impl fmt::Display for VariantsProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("variant probe")
    }
}

impl std::error::Error for VariantsProbe {}

impl serde::de::Error for VariantsProbe {
    fn custom<T: fmt::Display>(_message: T) -> Self {
        VariantsProbe(None)
    }

    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        VariantsProbe(Some(expected))
    }
}
