//! Session records that travel between machines (a swarm's role sessions on a cluster,
//! ARCHITECTURE §10): a record read whole to be shipped, and a shipped record written
//! into this home — replacing an older copy of the same session — and noted in the index.

use crate::StoreError;
use crate::index::{self, IndexUpdate};
use crate::paths::{self, KestrelHome};
use crate::record::{self, lock, record_path, validate_id};
use kestrel_protocol::{RecordHeader, RecordHeaderLine, SessionId};
use std::io::{ErrorKind, Write};

/// The whole record of session `id`, as its file holds it.
pub fn export_record(home: &KestrelHome, id: &SessionId) -> Result<Vec<u8>, StoreError> {
    validate_id(id)?;
    let path = record::locate(home, id)?;
    std::fs::read(&path).map_err(|source| StoreError::io("read the record", path, source))
}

/// Writes `bytes` — a whole record, header first — as its session's record in this
/// home and notes it in the index. A copy that exists already is replaced (the record
/// shipped back after another turn is the longer one); one that a writer holds open is
/// not touched ([`StoreError::Locked`]). Returns the record's header.
pub fn import_record(home: &KestrelHome, bytes: &[u8]) -> Result<RecordHeader, StoreError> {
    let first = bytes.split(|byte| *byte == b'\n').next().unwrap_or_default();
    let header = serde_json::from_slice::<RecordHeaderLine>(first)
        .map_err(|error| StoreError::InvalidHeader {
            path: home.sessions_dir(),
            reason: format!("the shipped record's first line is not a session header: {error}"),
        })?
        .header;
    validate_id(&header.id)?;
    let existing = record::locate(home, &header.id).ok();
    let path = existing.clone().unwrap_or_else(|| record_path(home, &header));
    if let Some(parent) = path.parent() {
        paths::ensure_dir(parent)?;
    }
    let file = match paths::private_file_options().write(true).create(true).open(&path) {
        Ok(file) => file,
        Err(source) if source.kind() == ErrorKind::NotFound => {
            return Err(StoreError::io("create the record", path, source));
        }
        Err(source) => return Err(StoreError::io("open the record", path, source)),
    };
    lock(&file, &header.id, &path)?;
    // Written beside it and renamed over it: a reader sees the old copy or the new one,
    // never a half-written one.
    let temporary = path.with_extension("jsonl.import");
    let written = paths::private_file_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temporary)
        .and_then(|mut copy| copy.write_all(bytes).and_then(|()| copy.sync_data()))
        .and_then(|()| std::fs::rename(&temporary, &path));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(StoreError::io("write the record", &path, source));
    }
    drop(file);
    if existing.is_none() {
        index::record_created(home, &header, &path)?;
    }
    // What the index says of it is what a rebuild would say.
    let summary = index::summarize_record(&path)?;
    let update = IndexUpdate {
        first_prompt: summary.first_prompt,
        usage: Some(summary.usage),
        updated_at: Some(summary.updated_at),
    };
    index::record_update(home, &header.id, update)?;
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SessionIndex, SessionRecord};
    use kestrel_protocol::{RECORD_VERSION, RecordEntry, RecordItem, Timestamp, Usage};

    fn header(id: &str) -> RecordHeader {
        RecordHeader {
            id: SessionId::from_string(id),
            version: RECORD_VERSION,
            created_at: Timestamp::now(),
            cwd: "/w".into(),
            provider: "p".into(),
            model: "m".into(),
            parent_id: None,
            forked_from: None,
            swarm: None,
            repository: None,
        }
    }

    fn usage(cost: f64) -> RecordEntry {
        let usage = Usage { input_tokens: 10, output_tokens: 2, cost, ..Usage::default() };
        RecordEntry { ts: Timestamp::now(), item: RecordItem::Usage { usage } }
    }

    #[test]
    fn a_record_shipped_to_another_home_is_listed_and_replaced_by_a_longer_copy() {
        let (node, here) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (node, here) = (KestrelHome::at(node.path()), KestrelHome::at(here.path()));
        let id = SessionId::from_string("s-1");
        let mut record = SessionRecord::create(&node, header("s-1")).unwrap();
        record.append(&usage(0.5)).unwrap();
        let first = export_record(&node, &id).unwrap();
        import_record(&here, &first).unwrap();
        let listed = SessionIndex::find(&here, "s-1").unwrap();
        assert_eq!(listed.usage.cost, 0.5);
        record.append(&usage(0.25)).unwrap();
        drop(record);
        import_record(&here, &export_record(&node, &id).unwrap()).unwrap();
        assert_eq!(SessionIndex::find(&here, "s-1").unwrap().usage.cost, 0.75);
        assert_eq!(export_record(&here, &id).unwrap(), export_record(&node, &id).unwrap());
        assert_eq!(SessionIndex::list(&here).unwrap().len(), 1);
    }

    #[test]
    fn a_copy_open_in_a_writer_is_not_replaced_and_garbage_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let home = KestrelHome::at(home.path());
        let record = SessionRecord::create(&home, header("s-2")).unwrap();
        let bytes = export_record(&home, &SessionId::from_string("s-2")).unwrap();
        let error = import_record(&home, &bytes).unwrap_err();
        assert!(matches!(error, StoreError::Locked { .. }), "{error}");
        drop(record);
        let error = import_record(&home, b"not json\n").unwrap_err();
        assert!(error.to_string().contains("not a session header"), "{error}");
        let mut bad = header("../evil");
        bad.cwd = "/w".into();
        let line = serde_json::to_vec(&RecordHeaderLine { header: bad }).unwrap();
        let error = import_record(&home, &line).unwrap_err();
        assert!(matches!(error, StoreError::InvalidSessionId { .. }), "{error}");
    }
}
