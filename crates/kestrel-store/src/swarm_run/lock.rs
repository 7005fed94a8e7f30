//! The orchestrator's lock on a run: an exclusive `flock` on `lock` (the store's one
//! mechanism, as for session records), held while a [`RunLock`] lives and released by
//! the kernel when its process dies, so a killed orchestrator never leaves a run locked.
//! The holder's pid is written inside for the message a second taker gets.

use super::SwarmRunDir;
use crate::StoreError;
use crate::file_lock;
use crate::paths;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A probe ([`SwarmRunDir::is_locked`]) holds a shared lock for a moment: a taker tries
/// this many times, this far apart, before it says another orchestrator runs the run.
const LOCK_TRIES: u32 = 20;
const LOCK_RETRY: Duration = Duration::from_millis(5);

/// The run's lock, held until dropped.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    path: PathBuf,
}

impl RunLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl SwarmRunDir {
    /// Takes the run's lock without waiting (beyond a probe's moment) and writes this
    /// process's pid into it. One orchestrator per run: `run`, `resume` and `retry` hold
    /// it for as long as they schedule.
    ///
    /// Fails with [`StoreError::RunLocked`] (with the holder's pid when it could be read)
    /// when another orchestrator holds it, or when the lock file cannot be opened,
    /// locked or written.
    pub fn lock(&self) -> Result<RunLock, StoreError> {
        let path = self.lock_file();
        let mut file = paths::private_file_options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| StoreError::io("open the run's lock", &path, source))?;
        for attempt in 0..LOCK_TRIES {
            if file_lock::try_lock_exclusive(&file, &path)? {
                let pid = format!("{}\n", std::process::id());
                file.set_len(0)
                    .and_then(|()| file.seek(SeekFrom::Start(0)))
                    .and_then(|_| file.write_all(pid.as_bytes()))
                    .map_err(|source| StoreError::io("write the pid into", &path, source))?;
                return Ok(RunLock { _file: file, path });
            }
            if attempt + 1 < LOCK_TRIES {
                std::thread::sleep(LOCK_RETRY);
            }
        }
        let pid = std::fs::read_to_string(&path).ok().and_then(|text| text.trim().parse().ok());
        Err(StoreError::RunLocked { run: self.run.clone(), pid, path })
    }

    /// Whether an orchestrator holds the run's lock now (in this process or another): a
    /// run not finished and not locked is `interrupted`. Takes a shared lock for a moment
    /// and writes nothing, so it works on a run directory it cannot write.
    pub fn is_locked(&self) -> bool {
        file_lock::is_locked_exclusively(&self.lock_file())
    }
}
