//! Writing a session record (ARCHITECTURE §5): `sessions/YYYY/MM/DD/<id>.jsonl`, append
//! only, one JSON object per line. The writer holds an exclusive lock on the file for its
//! whole life, so two writers are impossible; each item is one `write` of a whole line
//! to an O_APPEND file, so a crash leaves at most a torn last line, which readers skip
//! and the next writer truncates away.

use crate::StoreError;
use crate::activity::{Activity, ActivityClock};
use crate::file_lock;
use crate::index::{self, IndexUpdate, SessionIndex};
use crate::paths::{self, KestrelHome};
use crate::replay::{self, RawLine, RecordLines, Replay};
use kestrel_protocol::{
    ForkedFrom, RECORD_VERSION, RecordEntry, RecordHeader, RecordHeaderLine, RecordItem, SessionId,
    Timestamp, Usage,
};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, ErrorKind, Write};
use std::path::{Path, PathBuf};

/// The open, locked writer of one session's record. Dropping it releases the lock.
#[derive(Debug)]
pub struct SessionRecord {
    file: File,
    path: PathBuf,
    header: RecordHeader,
    home: KestrelHome,
    items_written: u64,
    first_prompt_indexed: bool,
    /// The session's own usage: its `usage` items, a fork's copied ones excluded.
    usage: Usage,
    /// The usage the index last heard of.
    usage_indexed: Usage,
    /// The latest activity the index heard of (as far as this writer knows).
    activity: ActivityClock,
}

impl SessionRecord {
    /// Creates the record of a new session: directories 0700, the file 0600 (created
    /// with that mode), locked, with `header` as its first line, and adds the session to
    /// the index.
    ///
    /// Fails when the id is not a valid file name, a record with this id exists, the
    /// file cannot be created or locked, or the index cannot be written (the record is
    /// then removed again, so no unlisted session is left behind).
    pub fn create(home: &KestrelHome, header: RecordHeader) -> Result<Self, StoreError> {
        validate_id(&header.id)?;
        let path = record_path(home, &header);
        if let Some(parent) = path.parent() {
            paths::ensure_dir(parent)?;
        }
        let file = match paths::private_file_options().append(true).create_new(true).open(&path) {
            Ok(file) => file,
            Err(source) if source.kind() == ErrorKind::AlreadyExists => {
                return Err(StoreError::SessionExists { id: header.id.to_string(), path });
            }
            Err(source) => return Err(StoreError::io("create the record", path, source)),
        };
        lock(&file, &header.id, &path)?;
        let created_at = header.created_at;
        let mut record = Self {
            file,
            path,
            header,
            home: home.clone(),
            items_written: 0,
            first_prompt_indexed: false,
            usage: Usage::default(),
            usage_indexed: Usage::default(),
            // The creation line stands for activity at creation.
            activity: ActivityClock::new(created_at),
        };
        let header_line = RecordHeaderLine { header: record.header.clone() };
        let written = record.encode(&header_line).and_then(|line| record.write_line(&line));
        let indexed =
            written.and_then(|()| index::record_created(home, &record.header, &record.path));
        if let Err(error) = indexed {
            // Best effort: the error that matters is the one returned.
            let _ = std::fs::remove_file(&record.path);
            return Err(error);
        }
        Ok(record)
    }

    /// Opens an existing session's record to continue it (resume, or a worker restarted
    /// after a crash): takes the lock, reads the record, and cuts away a torn last line
    /// so the next item starts on a line of its own.
    ///
    /// Fails with [`StoreError::Locked`] when another writer holds it,
    /// [`StoreError::SessionNotFound`] when no record has this id, and
    /// [`StoreError::InvalidHeader`] when the file is not a record of this session.
    pub fn open(home: &KestrelHome, id: &SessionId) -> Result<(Self, Replay), StoreError> {
        validate_id(id)?;
        let path = locate(home, id)?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|source| StoreError::io("open the record", &path, source))?;
        lock(&file, id, &path)?;
        let replay::ReadRecord { replay, complete_len, activity } =
            replay::read_from(BufReader::with_capacity(64 * 1024, &file), &path)?;
        if replay.header.id != *id {
            return Err(StoreError::InvalidHeader {
                path,
                reason: format!("its header names session {}, not {id}", replay.header.id),
            });
        }
        if replay.torn_tail {
            file.set_len(complete_len).map_err(|source| {
                StoreError::io("truncate the torn last line of", &path, source)
            })?;
        }
        let usage = activity.usage();
        let record = Self {
            file,
            path,
            header: replay.header.clone(),
            home: home.clone(),
            items_written: replay.item_count(),
            first_prompt_indexed: activity.first_prompt().is_some(),
            usage,
            // What an earlier writer noted, as far as the record tells (the rule that
            // rebuilds the index from it).
            usage_indexed: usage,
            activity: activity.clock(),
        };
        Ok((record, replay))
    }

    /// Appends one item as a single write of a whole line, then flushes. The index
    /// hears of it too, in at most one line, when the activity rule (the `activity`
    /// module) notes it: the first user message as the session's label, each model
    /// request's usage total so far (also mid-turn: a session killed mid-turn spent it
    /// all the same), and the item's time as the session's last activity. Index updates
    /// are best effort (the item itself is already recorded, and the index is
    /// rebuildable).
    ///
    /// Fails when the line cannot be written.
    pub fn append(&mut self, entry: &RecordEntry) -> Result<(), StoreError> {
        let line = self.encode(entry)?;
        self.write_line(&line)?;
        self.items_written += 1;
        let mut update = IndexUpdate::default();
        if let RecordItem::Usage { usage } = &entry.item {
            self.usage.add(usage);
        }
        if let Some(text) = replay::user_message_text(&entry.item)
            && !self.first_prompt_indexed
        {
            self.first_prompt_indexed = true;
            update.first_prompt = Some(text.to_owned());
        }
        if self.usage != self.usage_indexed {
            update.usage = Some(self.usage);
        }
        let forced = update.first_prompt.is_some() || update.usage.is_some();
        let mut clock = self.activity;
        if clock.note(entry.ts, Activity::of(&entry.item, forced)) {
            update.updated_at = Some(entry.ts);
            let usage = update.usage;
            if index::record_update(&self.home, &self.header.id, update).is_ok() {
                self.activity = clock;
                if let Some(usage) = usage {
                    self.usage_indexed = usage;
                }
            }
        }
        Ok(())
    }

    /// Tokens and cost of this session's own model requests so far (previous processes
    /// included; items a fork copied from its source excluded).
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Forces written items to disk (`fdatasync`), e.g. at the end of a turn. Not needed
    /// per item: a completed `write` already survives a crash of the process.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(|source| StoreError::io("sync", &self.path, source))
    }

    /// How many items the record holds (those read on open included): the index the
    /// next item will have.
    pub fn items_written(&self) -> u64 {
        self.items_written
    }

    /// The record file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The session this record belongs to.
    pub fn id(&self) -> &SessionId {
        &self.header.id
    }

    /// The record's header (its first line).
    pub fn header(&self) -> &RecordHeader {
        &self.header
    }

    fn encode<T: serde::Serialize>(&self, value: &T) -> Result<Vec<u8>, StoreError> {
        let mut line = serde_json::to_vec(value)
            .map_err(|source| StoreError::Encode { id: self.header.id.to_string(), source })?;
        line.push(b'\n');
        Ok(line)
    }

    /// One `write_all` of complete lines to the O_APPEND file, then a flush.
    fn write_line(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.file
            .write_all(bytes)
            .and_then(|()| self.file.flush())
            .map_err(|source| StoreError::io("append to the record", &self.path, source))
    }
}

/// Forks session `source` into a new session holding copies of its items `0..at` (all
/// of them when `at` is `None`), verbatim, with a header that has a fresh id, the time
/// now, `forked_from` set, and the source's cwd, provider and model. Only reads the
/// source (no lock needed); a torn last line there is ignored.
///
/// Returns the new session's header. Fails when the source cannot be found or read, or
/// `at` is past its last item ([`StoreError::ForkOutOfRange`]).
pub fn fork(
    home: &KestrelHome,
    source: &SessionId,
    at: Option<u64>,
) -> Result<RecordHeader, StoreError> {
    validate_id(source)?;
    let path = locate(home, source)?;
    let file =
        File::open(&path).map_err(|source| StoreError::io("open the record", &path, source))?;
    let mut lines = RecordLines::new(BufReader::with_capacity(64 * 1024, file), &path);
    let source_header = lines.header()?;
    let mut copied = Vec::new();
    let mut count: u64 = 0;
    let mut first_prompt = None;
    while at.is_none_or(|at| count < at) {
        let Some(line) = lines.next_line()? else { break };
        let RawLine::Item(bytes) = line else { break };
        copied.extend_from_slice(bytes);
        copied.push(b'\n');
        count += 1;
        if first_prompt.is_none()
            && let Ok(entry) = serde_json::from_slice::<RecordEntry>(bytes)
        {
            first_prompt = replay::user_message_text(&entry.item).map(str::to_owned);
        }
    }
    if let Some(at) = at
        && at > count
    {
        return Err(StoreError::ForkOutOfRange { id: source.to_string(), at, items: count });
    }
    let header = RecordHeader {
        id: SessionId::new(),
        version: RECORD_VERSION,
        created_at: Timestamp::now(),
        cwd: source_header.cwd,
        provider: source_header.provider,
        model: source_header.model,
        parent_id: None,
        forked_from: Some(ForkedFrom { session_id: source.clone(), items: count }),
        // A fork is the user's own session, not a role of the run.
        swarm: None,
        // The same line of work: the repository its source trusted, not one made since.
        repository: source_header.repository,
    };
    let mut record = SessionRecord::create(home, header.clone())?;
    record.write_line(&copied)?;
    record.items_written = count;
    if let Some(text) = first_prompt {
        record.first_prompt_indexed = true;
        let update = IndexUpdate { first_prompt: Some(text), ..IndexUpdate::default() };
        let _ = index::record_update(home, &header.id, update);
    }
    Ok(header)
}

/// The header of session `id`'s record, read without taking its lock (a subagent reads
/// its running parent's). Fails as [`SessionRecord::open`] does, but never on a lock.
pub fn read_header(home: &KestrelHome, id: &SessionId) -> Result<RecordHeader, StoreError> {
    validate_id(id)?;
    let path = locate(home, id)?;
    let file =
        File::open(&path).map_err(|source| StoreError::io("open the record", &path, source))?;
    let header = RecordLines::new(BufReader::new(file), &path).header()?;
    if header.id != *id {
        return Err(StoreError::InvalidHeader {
            reason: format!("its header names session {}, not {id}", header.id),
            path,
        });
    }
    Ok(header)
}

/// `sessions/YYYY/MM/DD/<id>.jsonl`, dated by the header's `created_at` in UTC.
pub(crate) fn record_path(home: &KestrelHome, header: &RecordHeader) -> PathBuf {
    let (year, month, day) = header.created_at.date();
    home.sessions_dir()
        .join(format!("{year:04}"))
        .join(format!("{month:02}"))
        .join(format!("{day:02}"))
        .join(format!("{}.jsonl", header.id))
}

/// Finds a session's record file: through the index, else by scanning the dated
/// directories (the index may be stale or missing).
pub(crate) fn locate(home: &KestrelHome, id: &SessionId) -> Result<PathBuf, StoreError> {
    let listed = SessionIndex::list(home)?.into_iter().find(|summary| summary.id == *id);
    if let Some(summary) = listed
        && summary.path.is_file()
    {
        return Ok(summary.path);
    }
    let file_name = format!("{id}.jsonl");
    index::record_files(home)?
        .into_iter()
        .find(|path| path.file_name().is_some_and(|name| *name == *file_name))
        .ok_or_else(|| StoreError::SessionNotFound { query: id.to_string() })
}

/// Ids become file names: only a conservative character set, no leading dot.
pub(crate) fn validate_id(id: &SessionId) -> Result<(), StoreError> {
    let text = id.as_str();
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if text.is_empty() || text.starts_with('.') || !text.chars().all(allowed) {
        return Err(StoreError::InvalidSessionId { id: text.to_owned() });
    }
    Ok(())
}

pub(crate) fn lock(file: &File, id: &SessionId, path: &Path) -> Result<(), StoreError> {
    match file_lock::try_lock_exclusive(file, path)? {
        true => Ok(()),
        false => Err(StoreError::Locked { id: id.to_string(), path: path.to_path_buf() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_are_not_plain_file_names_are_refused() {
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            let error = validate_id(&SessionId::from_string(bad)).unwrap_err();
            assert!(matches!(error, StoreError::InvalidSessionId { .. }), "{bad}: {error}");
        }
        validate_id(&SessionId::new()).unwrap();
    }

    #[test]
    fn record_path_is_dated_in_utc() {
        let header = RecordHeader {
            id: SessionId::from_string("abc"),
            version: RECORD_VERSION,
            created_at: Timestamp::parse("2026-03-04T23:59:59.999Z").unwrap(),
            cwd: "/w".into(),
            provider: "p".into(),
            model: "m".into(),
            parent_id: None,
            forked_from: None,
            swarm: None,
            repository: None,
        };
        let path = record_path(&KestrelHome::at("/k"), &header);
        assert_eq!(path, PathBuf::from("/k/sessions/2026/03/04/abc.jsonl"));
    }
}
