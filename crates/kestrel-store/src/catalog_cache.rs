//! The model catalog's cache, `cache/catalog.json`: the last catalog fetched, with the
//! URL it came from and when. A write goes to a temporary file that is renamed over the
//! cache while holding an exclusive lock on `cache/catalog.lock`, so a reader (which takes
//! no lock) sees the old catalog or the new one, never a mix, and two writers never
//! interleave. The store does not know the catalog's shape: callers bring their own type.

use crate::StoreError;
use crate::paths::{self, KestrelHome};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fs::{File, TryLockError};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a writer waits for another one to finish before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(5);
const LOCK_POLL: Duration = Duration::from_millis(20);
/// Temporary files start with this, so orphans of a killed writer can be recognised.
const TEMP_PREFIX: &str = ".catalog.json.";

/// Why the catalog cache could not be read or written. Never fatal to a caller: the
/// catalog falls back to the snapshot bundled in the binary.
#[derive(Debug, thiserror::Error)]
pub enum CatalogCacheError {
    /// A file system operation failed; `action` says what was being done to `path`.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The cache exists but is not a cache this Kestrel can read (a torn disk, an edit
    /// by hand); the next refresh replaces it.
    #[error("the model catalog cache {} is unreadable ({reason}); it will be replaced by the next refresh", path.display())]
    Corrupt { path: PathBuf, reason: String },

    /// Another process held the write lock for longer than a write takes.
    #[error("the model catalog cache is locked by another process ({}); try again", path.display())]
    Busy { path: PathBuf },

    /// The `cache/` directory could not be created.
    #[error(transparent)]
    Store(#[from] StoreError),

    /// The catalog could not be serialised.
    #[error("cannot encode the model catalog for the cache: {0}")]
    Encode(#[source] serde_json::Error),
}

/// What the cache holds: a catalog and where and when it was fetched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedCatalog<T> {
    /// The URL the catalog was fetched from; a cache of another URL is stale.
    pub url: String,
    /// When it was fetched, in seconds since the Unix epoch.
    pub fetched_at: u64,
    pub catalog: T,
}

impl<T> CachedCatalog<T> {
    /// A catalog fetched from `url` just now.
    pub fn fetched_now(url: impl Into<String>, catalog: T) -> Self {
        let fetched_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Self { url: url.into(), fetched_at, catalog }
    }

    /// How long ago it was fetched (zero for a time in the future: a skewed clock).
    pub fn age(&self) -> Duration {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Duration::from_secs(now.saturating_sub(self.fetched_at))
    }
}

/// The catalog cache of one home.
#[derive(Debug, Clone)]
pub struct CatalogCache {
    dir: PathBuf,
}

impl CatalogCache {
    /// The cache under `home`'s `cache/` directory. Nothing is created until a write.
    pub fn new(home: &KestrelHome) -> Self {
        Self { dir: home.cache_dir() }
    }

    /// `cache/catalog.json`.
    pub fn path(&self) -> PathBuf {
        self.dir.join("catalog.json")
    }

    /// `cache/catalog.lock`, held by writers.
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join("catalog.lock")
    }

    /// The cached catalog; `None` when there is none yet.
    ///
    /// Fails with [`CatalogCacheError::Corrupt`] when the file is not a cache of `T`,
    /// and [`CatalogCacheError::Io`] when it cannot be read.
    pub fn read<T: DeserializeOwned>(&self) -> Result<Option<CachedCatalog<T>>, CatalogCacheError> {
        let path = self.path();
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(CatalogCacheError::Io { action: "read", path, source }),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| CatalogCacheError::Corrupt { path, reason: error.to_string() })
    }

    /// Replaces the cache with `entry`: the `cache/` directory is created (0700), the
    /// file written 0600 to a temporary name, synced and renamed over the cache, all
    /// under the write lock. Temporary files a killed writer left behind are removed.
    ///
    /// Fails with [`CatalogCacheError::Busy`] when another writer holds the lock for
    /// more than a few seconds, or [`CatalogCacheError::Io`] / `Encode`.
    pub fn write<T: Serialize>(&self, entry: &CachedCatalog<T>) -> Result<(), CatalogCacheError> {
        let bytes = serde_json::to_vec(entry).map_err(CatalogCacheError::Encode)?;
        paths::ensure_dir(&self.dir)?;
        let lock = self.lock()?;
        remove_orphans(&self.dir);
        let result = self.replace(&bytes);
        drop(lock);
        result
    }

    /// Takes the write lock, waiting a bounded time for another writer.
    fn lock(&self) -> Result<File, CatalogCacheError> {
        let path = self.lock_path();
        let file = paths::private_file_options()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| CatalogCacheError::Io {
                action: "open",
                path: path.clone(),
                source,
            })?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(LOCK_POLL);
                }
                Err(TryLockError::WouldBlock) => return Err(CatalogCacheError::Busy { path }),
                Err(TryLockError::Error(source)) => {
                    return Err(CatalogCacheError::Io { action: "lock", path, source });
                }
            }
        }
    }

    fn replace(&self, bytes: &[u8]) -> Result<(), CatalogCacheError> {
        // Unique per process and per call, so concurrent writers never share a file.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let serial = WRITES.fetch_add(1, Ordering::Relaxed);
        let temporary = self.dir.join(format!("{TEMP_PREFIX}{}.{serial}.tmp", std::process::id()));
        let path = self.path();
        let result = paths::private_file_options()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
            .and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(source) = result {
            let _ = std::fs::remove_file(&temporary);
            return Err(CatalogCacheError::Io { action: "write", path, source });
        }
        Ok(())
    }
}

/// Removes temporary files of writers that died mid-write. Called with the lock held,
/// when no other writer can be between creating and renaming its file.
fn remove_orphans(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(TEMP_PREFIX) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_counts_from_the_fetch_and_never_goes_negative() {
        let mut entry = CachedCatalog::fetched_now("u", ());
        assert!(entry.age() < Duration::from_secs(5));
        entry.fetched_at -= 3600;
        assert!(entry.age() >= Duration::from_secs(3600));
        entry.fetched_at = u64::MAX;
        assert_eq!(entry.age(), Duration::ZERO);
    }
}
