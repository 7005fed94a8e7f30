//! The daemon's log, `$KESTREL_HOME/logs/daemon.log`: one timestamped line per event.
//! The daemon's stdio is /dev/null, so this file is where its story is told. Never
//! holds message contents (prompts, keys): only methods, ids and states.

use kestrel_protocol::Timestamp;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

/// An append-only log file; writes that fail are dropped (logging must not fail the daemon).
#[derive(Debug)]
pub(crate) struct DaemonLog {
    file: Option<Mutex<File>>,
}

impl DaemonLog {
    /// Opens (creating, 0600) `path` for appending; a log that cannot be opened is silent.
    pub(crate) fn open(path: &Path) -> Self {
        let mut options = std::fs::OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        Self { file: options.open(path).ok().map(Mutex::new) }
    }

    pub(crate) fn line(&self, text: impl AsRef<str>) {
        let Some(file) = &self.file else { return };
        let line = format!("{} [{}] {}\n", Timestamp::now(), std::process::id(), text.as_ref());
        if let Ok(mut file) = file.lock() {
            let _ = file.write_all(line.as_bytes());
        }
    }
}
