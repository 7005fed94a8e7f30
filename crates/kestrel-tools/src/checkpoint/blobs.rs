//! Saved file contents, named by their SHA-256 (so a content saved twice is stored
//! once): `blobs/ab/cdef...` under a session's checkpoint directory, private to the
//! user. A blob is written to a temporary name and renamed, so it is whole or absent.

use ring::digest::SHA256;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// One session's blob directory.
#[derive(Debug, Clone)]
pub(crate) struct BlobStore {
    root: PathBuf,
}

impl BlobStore {
    pub(crate) fn new(session_dir: &Path) -> Self {
        Self { root: session_dir.join("blobs") }
    }

    fn path(&self, hash: &str) -> PathBuf {
        let (shard, rest) = hash.split_at(2.min(hash.len()));
        self.root.join(shard).join(rest)
    }

    /// Whether `hash` is stored.
    pub(crate) fn contains(&self, hash: &str) -> bool {
        self.path(hash).is_file()
    }

    /// Stores `bytes`, returning their hash.
    pub(crate) fn put(&self, bytes: &[u8]) -> io::Result<String> {
        let hash = sha256(bytes);
        if !self.contains(&hash) {
            self.write(&hash, |file| file.write_all(bytes))?;
        }
        Ok(hash)
    }

    /// The content stored as `hash`.
    pub(crate) fn get(&self, hash: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.path(hash))
    }

    fn write(&self, hash: &str, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
        let temp = self.temp_path()?;
        let mut file = private_file(&temp)?;
        if let Err(error) = fill(&mut file).and_then(|()| file.sync_all()) {
            let _ = std::fs::remove_file(&temp);
            return Err(error);
        }
        self.settle(&temp, hash)
    }

    fn temp_path(&self) -> io::Result<PathBuf> {
        create_private_dir(&self.root)?;
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(self.root.join(format!(".tmp-{}-{n}", std::process::id())))
    }

    fn settle(&self, temp: &Path, hash: &str) -> io::Result<()> {
        let path = self.path(hash);
        if let Some(parent) = path.parent() {
            create_private_dir(parent)?;
        }
        std::fs::rename(temp, &path)
    }
}

fn private_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Creates `path` and its missing parents, private (0700) on Unix.
pub(crate) fn create_private_dir(path: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// SHA-256 of `bytes` in lowercase hex.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&SHA256, bytes).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
