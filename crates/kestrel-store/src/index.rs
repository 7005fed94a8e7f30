//! The session index, `sessions/index.jsonl`: one small JSON line per event (a session
//! created, its first prompt, its usage after a model request, its activity), appended
//! with single O_APPEND writes so concurrent workers never interleave. Listing merges
//! the lines by id and never opens a record; the index is a cache of the records and
//! can always be rebuilt from them.
//!
//! It is kept small: once it holds more than [`COMPACT_LINES_PER_SESSION`] lines per
//! session, a listing rewrites it as one merged line per session (a temporary file
//! renamed over it). Appenders hold a shared lock on `sessions/index.lock` while they
//! open and write the index, and a rewrite holds it exclusively while it reads what it
//! rewrites and renames: a line appended meanwhile waits for the rename and goes to the
//! new file, so none is lost.
//!
//! A rewrite starts the file with [`MARKER`]. An index without it was not written by a
//! rewrite of this version: by one from before `updated_at` was kept, or deleted and
//! created anew by a worker's next append (holding only what was appended since), or
//! emptied; a listing rebuilds it from the records, once (lines appended meanwhile kept).
//!
//! A session's `updated_at` is the time of its last activity: the `ts` of the record
//! item behind the latest line that carries one. Which items write such a line is the
//! `activity` module's rule, the same one a rebuild applies to the records, so a
//! rebuilt index agrees with the live one.
//!
//! A session's `usage` is what it spent itself: the sum of its record's `usage` items,
//! leaving out those a fork copied from its source. Each usage line carries that running
//! total (the latest line wins, so a lost line is repaired by the next). A listing adds
//! each session's descendants (sessions whose `parent_id` leads to it) into `total_usage`,
//! so a parent's total includes its subagents' without either record being read.

use crate::StoreError;
use crate::activity::RecordActivity;
use crate::paths::{self, KestrelHome};
use crate::replay::{ItemHead, RawLine, RecordLines};
use kestrel_protocol::{RecordEntry, RecordHeader, SessionId, Timestamp, Usage};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// First prompts are cut to this many characters in the index: it is a label.
const FIRST_PROMPT_CHARS: usize = 200;

/// A listing compacts an index of more lines than this per session...
const COMPACT_LINES_PER_SESSION: usize = 4;
/// ...and of at least this many lines (a small index is cheap as it is).
const COMPACT_MIN_LINES: usize = 256;

/// The first line of an index a rewrite wrote (older versions skip it: it has no `id`).
const MARKER: &str = r#"{"kestrel_index":1}"#;

/// At most this many candidates are named in an ambiguous-prefix error.
const MAX_CANDIDATES: usize = 10;

/// What a listing shows about one session (also `kestrel sessions --json`'s lines).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    pub id: SessionId,
    pub created_at: Timestamp,
    /// The session's last activity (its last prompt, model request, finished turn...);
    /// its creation time until then. Listings are sorted by it, most recent first.
    pub updated_at: Timestamp,
    pub cwd: String,
    pub model: String,
    pub provider: String,
    /// The session that spawned this one (subagents).
    pub parent_id: Option<SessionId>,
    /// The first user message, cut to a label's length; `None` before the first prompt.
    pub first_prompt: Option<String>,
    /// The record file (absolute; the index itself stores it relative to the home).
    pub path: PathBuf,
    /// Tokens and cost of this session's own model requests (a fork's copied items
    /// excluded), as of its last finished turn.
    pub usage: Usage,
    /// `usage` plus that of every session descended from this one (its subagents and
    /// theirs), as far as the listing knows them.
    pub total_usage: Usage,
}

/// Queries over the session index of one home.
#[derive(Debug, Clone, Copy)]
pub struct SessionIndex;

impl SessionIndex {
    /// All sessions, most recently active first, from the index alone (records are not opened, so a
    /// listed record may since have been deleted). A missing, unreadable or unmarked index
    /// (see the module docs) is rebuilt from the records; if the rebuilt index cannot be
    /// written, the listing is still returned.
    ///
    /// Fails only when the index is unusable and the sessions directory cannot be scanned.
    pub fn list(home: &KestrelHome) -> Result<Vec<SessionSummary>, StoreError> {
        match IndexContents::read(&home.index_file(), 0) {
            // Not a rewrite's (see the module docs): rebuilt, or read as it is if the
            // records cannot be scanned.
            Ok(contents) if !contents.marked => scan_and_rebuild(home, || {})
                .map(|(summaries, _written)| summaries)
                .or_else(|_| Ok(contents.into_summaries(home))),
            Ok(contents) if contents.needs_compaction() => {
                compact_index(home).or_else(|_| Ok(contents.into_summaries(home)))
            }
            Ok(contents) => Ok(contents.into_summaries(home)),
            // Missing or unreadable: replaced.
            Err(_) => scan_and_rebuild(home, || {}).map(|(summaries, _written)| summaries),
        }
    }

    /// Rewrites the index from the records (replacing it atomically; lines appended
    /// while the records are read are kept) and returns the sessions, most recently
    /// active first. Unreadable records are left out.
    ///
    /// Fails when the sessions directory cannot be scanned or the index written.
    pub fn rebuild(home: &KestrelHome) -> Result<Vec<SessionSummary>, StoreError> {
        rebuild_index(home)
    }

    /// The session whose id is `query` or, failing that, the only one whose id starts
    /// with it. Sessions missing from the index are found by scanning the records.
    ///
    /// Fails with [`StoreError::SessionNotFound`] (naming the query) or
    /// [`StoreError::AmbiguousSession`] (listing the candidates).
    pub fn find(home: &KestrelHome, query: &str) -> Result<SessionSummary, StoreError> {
        let not_found = || StoreError::SessionNotFound { query: query.to_owned() };
        if query.is_empty() {
            return Err(not_found());
        }
        match pick(Self::list(home)?, query)? {
            Some(summary) => Ok(summary),
            None => pick(scan_records(home)?, query)?.ok_or_else(not_found),
        }
    }

    /// The most recently active top-level session (subagent sessions are left out), in
    /// `cwd` when given: what `--last` resumes.
    ///
    /// Fails with [`StoreError::NoSessions`] when there is none, or as
    /// [`SessionIndex::list`] does.
    pub fn latest(home: &KestrelHome, cwd: Option<&Path>) -> Result<SessionSummary, StoreError> {
        Self::list(home)?
            .into_iter()
            .find(|summary| {
                summary.parent_id.is_none() && cwd.is_none_or(|cwd| Path::new(&summary.cwd) == cwd)
            })
            .ok_or_else(|| StoreError::NoSessions { cwd: cwd.map(Path::to_path_buf) })
    }
}

/// [`scan_and_rebuild`], failing when the index could not be written.
fn rebuild_index(home: &KestrelHome) -> Result<Vec<SessionSummary>, StoreError> {
    let (summaries, written) = scan_and_rebuild(home, || {})?;
    written.map(|()| summaries)
}

/// The records scanned, then (under the exclusive lock) what was appended to the index
/// meanwhile merged over them, written in place of the index. Fails only when the
/// records cannot be scanned; whether the index was written is the second part.
/// `after_scan` runs between the two (tests append there).
fn scan_and_rebuild(
    home: &KestrelHome,
    after_scan: impl FnOnce(),
) -> Result<(Vec<SessionSummary>, Result<(), StoreError>), StoreError> {
    let index_path = home.index_file();
    // Held open until the lock is taken, so its inode cannot be reused by then: if the
    // path still names it, what lies past `start` was appended during the scan.
    let before = File::open(&index_path).ok();
    let start = before.as_ref().and_then(|file| file.metadata().ok()).map_or(0, |m| m.len());
    let tail = before.as_ref().and_then(|file| tail_before(file, start));
    let (summaries, failed) = scan_records_noting_failures(home)?;
    after_scan();
    let sessions_dir = home.sessions_dir();
    if summaries.is_empty() && !sessions_dir.exists() {
        return Ok((summaries, Ok(())));
    }
    let mut contents = IndexContents::default();
    for summary in summaries.iter().rev() {
        contents.merge_line(IndexLine::from_summary(home, summary));
    }
    let written = paths::ensure_dir(&sessions_dir).and_then(|()| {
        let _lock = lock_index(home, LockKind::Exclusive)?;
        // Lines appended while the records were read are newer than what these said. A
        // file renamed over the index meanwhile (a compaction) or created since (it was
        // missing) is read whole.
        let same = before.as_ref().is_some_and(|file| {
            let old = file.metadata();
            let now = std::fs::metadata(&index_path);
            matches!((old, now), (Ok(old), Ok(now)) if same_file(&old, &now))
                && tail.is_some()
                && tail == tail_before(file, start)
        });
        match IndexContents::read(&index_path, if same { start } else { 0 }) {
            Ok(appended) => contents.merge(appended),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            // Replacing the index now would lose what was appended.
            Err(source) => {
                return Err(StoreError::io("read the session index", &index_path, source));
            }
        }
        // A session the scan did not find and whose creation was not appended since has
        // an unreadable record: it cannot be listed.
        contents.sessions.retain(|_, line| line.created_at.is_some());
        // With a record that could not be read for now, the index is written unmarked:
        // the next listing tries again, rather than hiding that session for good.
        contents.replace(home, !failed)
    });
    Ok((contents.into_summaries(home), written))
}

/// Whether `now` (the index path's metadata) is the file `old` was read from (where
/// inodes are not known, the tail decides alone).
fn same_file(old: &std::fs::Metadata, now: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        old.dev() == now.dev() && old.ino() == now.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (old, now);
        true
    }
}

/// Up to the last 64 bytes before `start` in `file`: the same after the scan, unless the
/// file was emptied and refilled meanwhile (then it is read from its start). `None` when
/// they cannot be read (or where positional reads are not known).
fn tail_before(file: &File, start: u64) -> Option<Vec<u8>> {
    let from = start.saturating_sub(64);
    let mut tail = vec![0u8; usize::try_from(start - from).ok()?];
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(&mut tail, from).ok()?;
        Some(tail)
    }
    #[cfg(not(unix))]
    {
        let _ = (file, &mut tail);
        None
    }
}

/// Rewrites the index as one merged line per session. Read under the exclusive lock,
/// so no append falls between the read and the rename.
fn compact_index(home: &KestrelHome) -> Result<Vec<SessionSummary>, StoreError> {
    let index_path = home.index_file();
    let lock = lock_index(home, LockKind::Exclusive)?;
    let contents = IndexContents::read(&index_path, 0)
        .map_err(|source| StoreError::io("read the session index", &index_path, source))?;
    if !contents.marked {
        // Deleted (or emptied) and created anew since the listing read it: marking what
        // it holds now would hide the sessions it lost for good.
        drop(lock);
        return rebuild_index(home);
    }
    contents.replace(home, true)?;
    Ok(contents.into_summaries(home))
}

/// How [`lock_index`] locks.
#[derive(Debug, Clone, Copy)]
enum LockKind {
    /// Appending a line: many at once.
    Shared,
    /// Rewriting the index: alone.
    Exclusive,
}

/// Locks `sessions/index.lock` (created if needed) until the returned file is dropped.
/// The sessions directory must exist. The lock is readable by all (flock needs no
/// write access), so one left by another user (`sudo kestrel`) still locks.
fn lock_index(home: &KestrelHome, kind: LockKind) -> Result<File, StoreError> {
    let path = home.sessions_dir().join("index.lock");
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o644);
    let file = options
        .open(&path)
        .or_else(|_| File::open(&path))
        .map_err(|source| StoreError::io("open the index lock", &path, source))?;
    let locked = match kind {
        LockKind::Shared => file.lock_shared(),
        LockKind::Exclusive => file.lock(),
    };
    locked.map_err(|source| StoreError::io("lock the session index", &path, source))?;
    Ok(file)
}

/// The index's lines merged by session, and how many lines that took.
#[derive(Debug, Default)]
struct IndexContents {
    sessions: HashMap<SessionId, IndexLine>,
    lines: usize,
    /// It starts with [`MARKER`] (read from its start).
    marked: bool,
}

impl IndexContents {
    /// Reads and merges the index at `path` from byte `from` on; any I/O error (a
    /// missing file included) is returned so the caller can rebuild. Lines that do not
    /// parse (a torn last line, or one cut by `from`) are skipped.
    fn read(path: &Path, from: u64) -> std::io::Result<Self> {
        let mut file = File::open(path)?;
        if from > 0 {
            file.seek(SeekFrom::Start(from))?;
        }
        let mut reader = BufReader::with_capacity(64 * 1024, file);
        let mut contents = Self::default();
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            if reader.read_until(b'\n', &mut buffer)? == 0 {
                break;
            }
            if from == 0 && contents.lines == 0 && !contents.marked && is_marker(&buffer) {
                contents.marked = true;
                continue;
            }
            contents.lines += 1;
            // One UTF-8 check per line; parsing from a `str` then skips it for every string.
            let Ok(text) = std::str::from_utf8(&buffer) else { continue };
            let Ok(line) = serde_json::from_str::<IndexLine>(text) else { continue };
            contents.merge_line(line);
        }
        Ok(contents)
    }

    fn merge_line(&mut self, line: IndexLine) {
        match self.sessions.get_mut(&line.id) {
            Some(existing) => existing.merge(line),
            None => {
                self.sessions.insert(line.id.clone(), line);
            }
        }
    }

    /// `later`'s lines over these.
    fn merge(&mut self, later: IndexContents) {
        self.lines += later.lines;
        for line in later.sessions.into_values() {
            self.merge_line(line);
        }
    }

    /// Many more lines than sessions: worth rewriting as one line each.
    fn needs_compaction(&self) -> bool {
        self.lines >= COMPACT_MIN_LINES
            && self.lines > COMPACT_LINES_PER_SESSION * self.sessions.len().max(1)
    }

    /// Writes one line per session to a temporary file renamed over the index (the
    /// caller holds the exclusive lock), after the marker if `marked`.
    fn replace(&self, home: &KestrelHome, marked: bool) -> Result<(), StoreError> {
        let mut text = if marked { format!("{MARKER}\n").into_bytes() } else { Vec::new() };
        // A removed session's record is gone: nothing is left to say of it.
        for line in self.sessions.values().filter(|line| !line.removed) {
            text.extend(encode_line(line)?);
        }
        let index_path = home.index_file();
        paths::replace_file(&index_path, &text)
            .map_err(|source| StoreError::io("rewrite the session index", &index_path, source))
    }

    fn into_summaries(self, home: &KestrelHome) -> Vec<SessionSummary> {
        let mut summaries: Vec<_> =
            self.sessions.into_values().filter_map(|line| line.into_summary(home)).collect();
        sort_most_recent_first(&mut summaries);
        add_descendant_usage(&mut summaries);
        summaries
    }
}

fn is_marker(line: &[u8]) -> bool {
    line.strip_suffix(b"\n").unwrap_or(line) == MARKER.as_bytes()
}

/// Notes a newly created session in the index.
pub(crate) fn record_created(
    home: &KestrelHome,
    header: &RecordHeader,
    path: &Path,
) -> Result<(), StoreError> {
    append_line(
        home,
        &IndexLine {
            id: header.id.clone(),
            created_at: Some(header.created_at),
            cwd: Some(header.cwd.clone()),
            model: Some(header.model.clone()),
            provider: Some(header.provider.clone()),
            parent_id: header.parent_id.clone(),
            path: Some(home.relative(path).to_string_lossy().into_owned()),
            first_prompt: None,
            usage: None,
            // Said from the start: a session listed before its first activity shows this.
            updated_at: Some(header.created_at),
            removed: false,
        },
    )
}

/// What one index line says about a session besides its id: each part is optional.
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexUpdate {
    /// The session's first prompt (its label).
    pub(crate) first_prompt: Option<String>,
    /// Its own usage so far (all turns).
    pub(crate) usage: Option<Usage>,
    /// The time of its latest activity.
    pub(crate) updated_at: Option<Timestamp>,
}

/// Notes what `update` says of session `id` in the index, in one line.
pub(crate) fn record_update(
    home: &KestrelHome,
    id: &SessionId,
    update: IndexUpdate,
) -> Result<(), StoreError> {
    let mut line = IndexLine::bare(id.clone());
    line.first_prompt = update.first_prompt.as_deref().map(label);
    line.usage = update.usage;
    line.updated_at = update.updated_at;
    append_line(home, &line)
}

/// Notes that session `id` was removed: listings leave it out from then on.
pub(crate) fn record_removed(home: &KestrelHome, id: &SessionId) -> Result<(), StoreError> {
    let mut line = IndexLine::bare(id.clone());
    line.removed = true;
    append_line(home, &line)
}

/// Every record file under `sessions/YYYY/MM/DD/`.
pub(crate) fn record_files(home: &KestrelHome) -> Result<Vec<PathBuf>, StoreError> {
    let mut files = Vec::new();
    collect_records(&home.sessions_dir(), 0, &mut files)?;
    Ok(files)
}

/// One index line; every field but the id is optional so events can carry only what
/// they are about. Unknown fields (from a later Kestrel) are ignored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IndexLine {
    id: SessionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_id: Option<SessionId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    first_prompt: Option<String>,
    /// The session's own usage so far: the latest line replaces earlier ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    /// The session's latest activity: the latest time wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<Timestamp>,
    /// The session was removed (`kestrel sessions rm`): it is listed no more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    removed: bool,
}

impl IndexLine {
    fn bare(id: SessionId) -> Self {
        Self {
            id,
            created_at: None,
            cwd: None,
            model: None,
            provider: None,
            parent_id: None,
            path: None,
            first_prompt: None,
            usage: None,
            updated_at: None,
            removed: false,
        }
    }

    fn from_summary(home: &KestrelHome, summary: &SessionSummary) -> Self {
        Self {
            id: summary.id.clone(),
            created_at: Some(summary.created_at),
            cwd: Some(summary.cwd.clone()),
            model: Some(summary.model.clone()),
            provider: Some(summary.provider.clone()),
            parent_id: summary.parent_id.clone(),
            path: Some(home.relative(&summary.path).to_string_lossy().into_owned()),
            first_prompt: summary.first_prompt.clone(),
            usage: (summary.usage != Usage::default()).then_some(summary.usage),
            updated_at: Some(summary.updated_at),
            removed: false,
        }
    }

    /// Later lines fill in or replace what earlier ones said.
    fn merge(&mut self, later: IndexLine) {
        let IndexLine {
            id: _,
            created_at,
            cwd,
            model,
            provider,
            parent_id,
            path,
            first_prompt,
            usage,
            updated_at,
            removed,
        } = later;
        self.created_at = created_at.or(self.created_at);
        self.cwd = cwd.or(self.cwd.take());
        self.model = model.or(self.model.take());
        self.provider = provider.or(self.provider.take());
        self.parent_id = parent_id.or(self.parent_id.take());
        self.path = path.or(self.path.take());
        self.first_prompt = first_prompt.or(self.first_prompt.take());
        self.usage = usage.or(self.usage);
        self.updated_at = self.updated_at.max(updated_at);
        self.removed |= removed;
    }

    /// A summary once the creation line has been seen; `None` for orphaned events.
    fn into_summary(self, home: &KestrelHome) -> Option<SessionSummary> {
        if self.removed {
            return None;
        }
        let created_at = self.created_at?;
        Some(SessionSummary {
            id: self.id,
            created_at,
            updated_at: self.updated_at.map_or(created_at, |updated| updated.max(created_at)),
            cwd: self.cwd?,
            model: self.model?,
            provider: self.provider?,
            parent_id: self.parent_id,
            first_prompt: self.first_prompt,
            path: home.root().join(self.path?),
            usage: self.usage.unwrap_or_default(),
            total_usage: Usage::default(),
        })
    }
}

fn encode_line(line: &IndexLine) -> Result<Vec<u8>, StoreError> {
    let mut bytes = serde_json::to_vec(line)
        .map_err(|source| StoreError::Encode { id: line.id.to_string(), source })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// One `write_all` of one line to the O_APPEND index, opened and written under the
/// shared lock (so a rewrite never renames it away between the two).
fn append_line(home: &KestrelHome, line: &IndexLine) -> Result<(), StoreError> {
    let bytes = encode_line(line)?;
    let sessions_dir = home.sessions_dir();
    paths::ensure_dir(&sessions_dir)?;
    let index_path = home.index_file();
    // Without the lock (unusable: say a directory in its place) the line is appended
    // all the same: a rewrite at that moment could lose it, never more than that.
    let _lock = lock_index(home, LockKind::Shared).ok();
    let mut file = paths::open_shared_append(&index_path)?;
    file.write_all(&bytes)
        .and_then(|()| file.flush())
        .map_err(|source| StoreError::io("append to the session index", &index_path, source))
}

/// Summaries of every readable record, from their headers and first user messages.
fn scan_records(home: &KestrelHome) -> Result<Vec<SessionSummary>, StoreError> {
    scan_records_noting_failures(home).map(|(summaries, _)| summaries)
}

/// [`scan_records`], and whether a record could not be read for a reason that passes
/// (too many open files, no memory, an I/O error). A record that cannot be read for good
/// (not ours to read, a bad header) or was deleted meanwhile is only left out: retrying
/// it would rescan every record on every listing.
fn scan_records_noting_failures(
    home: &KestrelHome,
) -> Result<(Vec<SessionSummary>, bool), StoreError> {
    let mut failed = false;
    let mut summaries = Vec::new();
    for path in record_files(home)? {
        match summarize_record(&path) {
            Ok(summary) => summaries.push(summary),
            Err(StoreError::Io { source, .. }) if passing(&source) => failed = true,
            Err(_) => {}
        }
    }
    sort_most_recent_first(&mut summaries);
    add_descendant_usage(&mut summaries);
    Ok((summaries, failed))
}

/// An I/O error that may not happen again: EIO, ENOMEM, ENFILE, EMFILE (Linux numbers).
fn passing(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(5 | 12 | 23 | 24))
}

pub(crate) fn summarize_record(path: &Path) -> Result<SessionSummary, StoreError> {
    let file =
        File::open(path).map_err(|source| StoreError::io("open the record", path, source))?;
    let mut lines = RecordLines::new(BufReader::new(file), path);
    let header = lines.header()?;
    // The rule a reopening writer applies (`RecordActivity`), parsing whole only the
    // lines it wants: most are other items.
    let mut activity = RecordActivity::new(&header);
    while let Some(RawLine::Item(bytes)) = lines.next_line()? {
        let Ok(head) = serde_json::from_slice::<ItemHead>(bytes) else {
            activity.skip();
            continue;
        };
        let entry = if activity.wants(&head.kind) {
            serde_json::from_slice::<RecordEntry>(bytes).ok()
        } else {
            None
        };
        activity.note(&head.kind, head.ts, entry.as_ref().map(|entry| &entry.item));
    }
    Ok(SessionSummary {
        id: header.id,
        created_at: header.created_at,
        updated_at: activity.clock().noted(),
        cwd: header.cwd,
        model: header.model,
        provider: header.provider,
        parent_id: header.parent_id,
        first_prompt: activity.first_prompt().map(label),
        path: path.to_path_buf(),
        usage: activity.usage(),
        total_usage: Usage::default(),
    })
}

/// Walks `sessions/` three directory levels down (`YYYY/MM/DD`) for `*.jsonl` files.
fn collect_records(dir: &Path, depth: usize, files: &mut Vec<PathBuf>) -> Result<(), StoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(StoreError::io("list", dir, source)),
    };
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::io("list", dir, source))?;
        let path = entry.path();
        if depth < 3 {
            // A directory that cannot be read fails the scan: a rebuild that left its
            // sessions out would write an index that hides them for good.
            if path.is_dir() {
                collect_records(&path, depth + 1, files)?;
            }
        } else if path.extension().is_some_and(|extension| extension == "jsonl") && path.is_file() {
            files.push(path);
        }
    }
    Ok(())
}

fn pick(summaries: Vec<SessionSummary>, query: &str) -> Result<Option<SessionSummary>, StoreError> {
    let mut matching: Vec<_> =
        summaries.into_iter().filter(|summary| summary.id.as_str().starts_with(query)).collect();
    if let Some(exact) = matching.iter().position(|summary| summary.id.as_str() == query) {
        return Ok(Some(matching.swap_remove(exact)));
    }
    if matching.len() > 1 {
        let mut candidates: Vec<String> =
            matching.iter().take(MAX_CANDIDATES).map(|summary| summary.id.to_string()).collect();
        if matching.len() > MAX_CANDIDATES {
            candidates.push(format!("and {} more", matching.len() - MAX_CANDIDATES));
        }
        return Err(StoreError::AmbiguousSession { query: query.to_owned(), candidates });
    }
    Ok(matching.pop())
}

/// Most recently active first (what a session picker shows on top); ties by creation.
fn sort_most_recent_first(summaries: &mut [SessionSummary]) {
    // Ids are unique, so an unstable sort gives the same order without a scratch copy.
    summaries.sort_unstable_by(|a, b| {
        (b.updated_at, b.created_at, &b.id).cmp(&(a.updated_at, a.created_at, &a.id))
    });
}

/// Sets every `total_usage` to the session's own usage plus its descendants'. A cycle of
/// parent ids (a corrupt index) is cut where it closes.
fn add_descendant_usage(summaries: &mut [SessionSummary]) {
    let mut totals: Vec<Usage> = summaries.iter().map(|summary| summary.usage).collect();
    // Most sessions have no parent: they need neither the id map nor a walk.
    if summaries.iter().any(|summary| summary.parent_id.is_some()) {
        let position: HashMap<&SessionId, usize> =
            summaries.iter().enumerate().map(|(at, summary)| (&summary.id, at)).collect();
        add_to_ancestors(summaries, &position, &mut totals);
    }
    for (summary, total) in summaries.iter_mut().zip(totals) {
        summary.total_usage = total;
    }
}

/// Adds each session's own usage to the totals of all its ancestors.
fn add_to_ancestors(
    summaries: &[SessionSummary],
    position: &HashMap<&SessionId, usize>,
    totals: &mut [Usage],
) {
    for (at, summary) in summaries.iter().enumerate() {
        let Some(first) = summary.parent_id.as_ref().and_then(|id| position.get(id)).copied()
        else {
            continue;
        };
        let mut seen = HashSet::from([at]);
        let mut parent = Some(first);
        while let Some(ancestor) = parent {
            if !seen.insert(ancestor) {
                break;
            }
            totals[ancestor].add(&summary.usage);
            parent =
                summaries[ancestor].parent_id.as_ref().and_then(|id| position.get(id)).copied();
        }
    }
}

/// A prompt trimmed and cut to a label's length.
fn label(text: &str) -> String {
    let trimmed = text.trim();
    match trimmed.char_indices().nth(FIRST_PROMPT_CHARS) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_owned(),
    }
}

#[cfg(test)]
mod tests;
