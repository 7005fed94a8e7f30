//! Writes the kernel keeps inside the workspace. A checked path may be changed by a
//! sandboxed command between the check and the write (a directory swapped for a
//! symlink to elsewhere), so the file tools never write by path: the parent directory
//! is opened relative to a descriptor of the workspace with `openat2(RESOLVE_BENEATH)`
//! (or, where the kernel lacks it, one component at a time refusing every symlink),
//! and the file is read, replaced (temporary file + `renameat`) or removed through
//! that directory's descriptor. The path's symlinks are resolved once, before the
//! open, and the open itself refuses every symlink (`RESOLVE_NO_SYMLINKS`): one met
//! then was swapped in after the resolution. Outside a workspace (`yolo`, the CLI) the
//! same operations work on an unconfined parent.

use std::ffi::{CString, OsStr};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{Beneath, normalize, resolve_existing};

/// `struct open_how` of openat2(2) (libc's is `non_exhaustive`).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Set once openat2 answered ENOSYS: the component walk is used from then on.
static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

/// A file named in a directory held open: every operation goes through the
/// directory's descriptor, so renaming or relinking the path's ancestors afterwards
/// cannot redirect it.
#[derive(Debug)]
pub(crate) struct Place {
    directory: OwnedFd,
    name: CString,
    /// Where the file is (symlinks resolved when it was opened), for messages and diffs.
    path: PathBuf,
    /// Opened beneath a workspace: a file without write permission is refused.
    confined: bool,
}

/// A regular file's bytes and permission bits, as read through a [`Place`].
#[derive(Debug)]
pub(crate) struct Content {
    pub bytes: Vec<u8>,
    pub mode: u32,
}

impl Place {
    /// Opens the directory that will hold `path`. With `beneath`, symlinks of the
    /// path are followed only while they stay beneath its directory: otherwise the
    /// error says the path "resolves outside" it. With `create`, missing parent
    /// directories are made (each one inside the already-confined parent) and pushed to
    /// `created`. A symlink as the last component is followed once here, so replacing
    /// the file writes where the link pointed at the time of the check. A pinned
    /// directory must still be the one pinned (see [`WorkspacePin`](super::WorkspacePin)).
    pub(crate) fn open(
        beneath: Option<Beneath<'_>>,
        path: &Path,
        create: bool,
        created: &mut Vec<PathBuf>,
    ) -> io::Result<Self> {
        let target = resolve_existing(&normalize(path));
        Self::open_resolved(beneath, path, target, create, created)
    }

    /// Like [`Place::open`] without creating anything and without following a symlink
    /// as the last component: for removing the entry itself.
    pub(crate) fn open_entry(beneath: Option<Beneath<'_>>, path: &Path) -> io::Result<Self> {
        let path_normal = normalize(path);
        let target = match (path_normal.parent(), path_normal.file_name()) {
            (Some(parent), Some(name)) => resolve_existing(parent).join(name),
            _ => path_normal.clone(),
        };
        Self::open_resolved(beneath, path, target, false, &mut Vec::new())
    }

    /// Opens the directory holding `path` (absolute) refusing every symlink on the way
    /// from `/`, so what is read, replaced or removed there is the entry the path names
    /// lexically, never one a swapped-in directory symlink leads to (ELOOP/ENOTDIR for a
    /// symlink). With `create`, missing directories are made inside their parent's
    /// descriptor. The last component is not followed. For checkpoints and undo.
    pub(crate) fn open_no_symlinks(path: &Path, create: bool) -> io::Result<Self> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} names no file", path.display()),
            ));
        };
        let names = absolute_names(parent, path)?;
        let mut directory = open_directory(Path::new("/"))?;
        for index in 0..names.len() {
            directory = match walk_without_symlinks(&directory, &names[index..=index]) {
                Err(error) if error.kind() == io::ErrorKind::NotFound && create => {
                    // SAFETY: a live descriptor and a NUL-terminated name.
                    let done = unsafe {
                        libc::mkdirat(directory.as_raw_fd(), names[index].as_ptr(), 0o777)
                    };
                    if done != 0 {
                        let error = io::Error::last_os_error();
                        if error.kind() != io::ErrorKind::AlreadyExists {
                            return Err(error);
                        }
                    }
                    walk_without_symlinks(&directory, &names[index..=index])?
                }
                other => other?,
            };
        }
        Ok(Self { directory, name: c_name(name)?, path: path.to_path_buf(), confined: false })
    }

    /// The entry's own status (a symlink is not followed); `None` when nothing is there.
    pub(crate) fn entry_status(&self) -> io::Result<Option<libc::stat>> {
        // SAFETY: an all-zero stat is a valid value for the kernel to overwrite.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a live descriptor, a NUL-terminated name and a writable stat.
        let done = unsafe {
            libc::fstatat(
                self.directory.as_raw_fd(),
                self.name.as_ptr(),
                &mut stat,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if done != 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::NotFound { Ok(None) } else { Err(error) };
        }
        Ok(Some(stat))
    }

    /// Where the entry, a symlink, points.
    pub(crate) fn read_link(&self) -> io::Result<PathBuf> {
        let mut buffer = vec![0u8; libc::PATH_MAX as usize + 1];
        // SAFETY: a live descriptor, a NUL-terminated name and a buffer of the size passed.
        let read = unsafe {
            libc::readlinkat(
                self.directory.as_raw_fd(),
                self.name.as_ptr(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
            )
        };
        let read = usize::try_from(read).map_err(|_| io::Error::last_os_error())?;
        buffer.truncate(read);
        Ok(PathBuf::from(OsStr::from_bytes(&buffer)))
    }

    /// Creates the entry as a symlink to `target` (nothing may be there).
    pub(crate) fn make_symlink(&self, target: &Path) -> io::Result<()> {
        let target = c_name(target.as_os_str())?;
        // SAFETY: two NUL-terminated names and a live descriptor.
        let done = unsafe {
            libc::symlinkat(target.as_ptr(), self.directory.as_raw_fd(), self.name.as_ptr())
        };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn open_resolved(
        beneath: Option<Beneath<'_>>,
        path: &Path,
        target: PathBuf,
        create: bool,
        created: &mut Vec<PathBuf>,
    ) -> io::Result<Self> {
        let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} names no file", path.display()),
            ));
        };
        let name = c_name(name)?;
        let directory = match beneath {
            None => open_unconfined(parent, create, created)?,
            Some(beneath) => {
                let root_path = resolve_existing(&normalize(beneath.directory()));
                let Ok(relative) = parent.strip_prefix(&root_path) else {
                    return Err(outside(path, &target, beneath.named(&root_path)));
                };
                let root = open_resolved_directory(&root_path)?;
                if let Some(pin) = beneath.pin()
                    && !pin.names(&root)?
                {
                    return Err(beneath.changed(&root_path));
                }
                let directory = open_beneath(&root, &root_path, relative, create, created)
                    .map_err(|error| explain(error, path, beneath.named(&root_path)))?;
                refuse_unseen_guarded(&directory, path, &root_path)?;
                directory
            }
        };
        Ok(Self { directory, name, path: target, confined: beneath.is_some() })
    }

    /// Where the file is, symlinks resolved.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's content, `None` when it does not exist. A directory fails with
    /// `IsADirectory`, anything else that is not a regular file with `InvalidInput`.
    pub(crate) fn read(&self) -> io::Result<Option<Content>> {
        let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let fd = match self.openat(&self.name, flags, 0) {
            Ok(fd) => fd,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "it was replaced by a symlink while the tool ran",
                ));
            }
            Err(error) => return Err(error),
        };
        let mut file = File::from(fd);
        let metadata = file.metadata()?;
        if metadata.is_dir() {
            return Err(io::Error::from(io::ErrorKind::IsADirectory));
        }
        if !metadata.is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
        file.read_to_end(&mut bytes)?;
        Ok(Some(Content { bytes, mode: metadata.permissions().mode() & 0o7777 }))
    }

    /// Writes `content` to a new temporary file in the same directory and renames it
    /// over the file, so a reader sees the old or the new file, never half of one.
    /// `mode`: permission bits to give it (the old file's); `None` for the defaults.
    /// A file with more than one hard link is rewritten in place instead (truncated and
    /// written through its descriptor), so the links keep sharing it. Beneath a
    /// workspace, a file without write permission fails with `PermissionDenied`.
    pub(crate) fn replace(&self, content: &[u8], mode: Option<u32>) -> io::Result<()> {
        if let Some(status) = self.entry_status()?
            && status.st_mode & libc::S_IFMT == libc::S_IFREG
        {
            if self.confined && !self.writable(&status) {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "it has no write permission (mode {:o}); change its mode first",
                        status.st_mode & 0o7777
                    ),
                ));
            }
            if status.st_nlink > 1 {
                return self.rewrite_in_place(&status, content, mode);
            }
        }
        let temporary = self.write_temporary(content, mode)?;
        let result = self.rename(&temporary);
        if result.is_err() {
            // Best effort: the temporary file is ours and useless now.
            let _ = self.unlink(&temporary, 0);
        }
        result
    }

    fn writable(&self, status: &libc::stat) -> bool {
        // SAFETY: a live descriptor and a NUL-terminated name.
        let access = unsafe {
            libc::faccessat(
                self.directory.as_raw_fd(),
                self.name.as_ptr(),
                libc::W_OK,
                libc::AT_EACCESS,
            )
        };
        // root passes access(2) for any mode: the bits still say "do not write".
        access == 0 && status.st_mode & 0o222 != 0
    }

    fn rewrite_in_place(
        &self,
        status: &libc::stat,
        content: &[u8],
        mode: Option<u32>,
    ) -> io::Result<()> {
        let flags = libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let file = File::from(self.openat(&self.name, flags, 0)?);
        let metadata = file.metadata()?;
        if !metadata.is_file() || metadata.ino() != status.st_ino || metadata.dev() != status.st_dev
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "it was replaced while the tool ran",
            ));
        }
        let mut file = file;
        file.set_len(0)?;
        file.write_all(content)?;
        if let Some(mode) = mode {
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        file.sync_all()
    }

    /// A new file in the directory holding `content`, under a fixed-length name (any
    /// file name fits beside it). The content is written to an unnamed `O_TMPFILE`
    /// first and only then linked, so a kill leaves no half-written file; where the
    /// file system lacks `O_TMPFILE` (or `/proc` is missing) a named file is used.
    fn write_temporary(&self, content: &[u8], mode: Option<u32>) -> io::Result<CString> {
        let flags = libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC;
        if let Ok(fd) = self.openat(&c_name(OsStr::new("."))?, flags, 0o666) {
            let mut file = File::from(fd);
            fill(&mut file, content, mode)?;
            let proc_path = c_name(OsStr::new(&format!("/proc/self/fd/{}", file.as_raw_fd())))?;
            loop {
                let temporary = temporary_name()?;
                // SAFETY: two NUL-terminated names and a live descriptor.
                let done = unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        proc_path.as_ptr(),
                        self.directory.as_raw_fd(),
                        temporary.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                };
                if done == 0 {
                    return Ok(temporary);
                }
                let error = io::Error::last_os_error();
                match error.kind() {
                    io::ErrorKind::AlreadyExists => continue,
                    io::ErrorKind::NotFound => break,
                    _ => return Err(error),
                }
            }
        }
        loop {
            let temporary = temporary_name()?;
            let flags =
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW;
            let fd = match self.openat(&temporary, flags, 0o666) {
                Ok(fd) => fd,
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            };
            let mut file = File::from(fd);
            if let Err(error) = fill(&mut file, content, mode) {
                // Best effort: the temporary file is ours and useless now.
                let _ = self.unlink(&temporary, 0);
                return Err(error);
            }
            return Ok(temporary);
        }
    }

    /// Removes the file (a symlink itself, not its target).
    pub(crate) fn remove_file(&self) -> io::Result<()> {
        self.unlink(&self.name, 0)
    }

    /// Removes the directory, which must be empty.
    pub(crate) fn remove_directory(&self) -> io::Result<()> {
        self.unlink(&self.name, libc::AT_REMOVEDIR)
    }

    fn openat(
        &self,
        name: &CString,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> io::Result<OwnedFd> {
        openat(&self.directory, name, flags, mode)
    }

    fn rename(&self, from: &CString) -> io::Result<()> {
        let directory = self.directory.as_raw_fd();
        // SAFETY: a live descriptor and two NUL-terminated names.
        let done =
            unsafe { libc::renameat(directory, from.as_ptr(), directory, self.name.as_ptr()) };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn unlink(&self, name: &CString, flags: libc::c_int) -> io::Result<()> {
        // SAFETY: a live descriptor and a NUL-terminated name.
        let done = unsafe { libc::unlinkat(self.directory.as_raw_fd(), name.as_ptr(), flags) };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

fn fill(file: &mut File, content: &[u8], mode: Option<u32>) -> io::Result<()> {
    file.write_all(content)?;
    if let Some(mode) = mode {
        file.set_permissions(fs::Permissions::from_mode(mode))?;
    }
    file.sync_all()
}

/// `.kestrel-tmp-{pid}-{n}`: recognisable, unique within the process, and short
/// whatever the target's name (NAME_MAX).
fn temporary_name() -> io::Result<CString> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    c_name(OsStr::new(&format!(
        ".kestrel-tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )))
}

/// Refuses a directory opened inside git metadata, project config or
/// `$KESTREL_HOME` when `path` does not name such a place itself: the permission
/// check judged the path when it led elsewhere, so a directory on the way was swapped
/// for a symlink since. The kernel's own name for the opened directory is compared.
fn refuse_unseen_guarded(directory: &OwnedFd, path: &Path, workspace: &Path) -> io::Result<()> {
    let opened = match fs::read_link(format!("/proc/self/fd/{}", directory.as_raw_fd())) {
        Ok(opened) => opened,
        // No /proc: compare the directory itself with the guarded ones.
        Err(_) => guarded_by_identity(directory, workspace)?.unwrap_or_default(),
    };
    if opened.as_os_str().is_empty() {
        return Ok(());
    }
    let Some(why) = super::guarded_place(workspace, &opened.join("_")) else {
        return Ok(());
    };
    let lexical = normalize(path);
    let named = lexical
        .components()
        .any(|component| matches!(component.as_os_str().to_str(), Some(".git" | ".kestrel")))
        || kestrel_store::KestrelHome::from_env()
            .is_ok_and(|home| lexical.starts_with(normalize(home.root())));
    if named {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} now leads into {} ({why}) through a symlink swapped in after the permission \
             check; refused (name the path there directly to write it)",
            path.display(),
            opened.display()
        ),
    ))
}

/// Without `/proc`: the guarded directory that `directory` is (same device and inode),
/// if any. Only the directory itself is compared, not its ancestors.
fn guarded_by_identity(directory: &OwnedFd, workspace: &Path) -> io::Result<Option<PathBuf>> {
    let opened = File::from(directory.try_clone()?).metadata()?;
    let mut guarded = vec![workspace.join(".git"), workspace.join(".kestrel")];
    if let Ok(home) = kestrel_store::KestrelHome::from_env() {
        guarded.push(home.root().to_path_buf());
    }
    Ok(guarded.into_iter().find(|place| {
        fs::metadata(place)
            .is_ok_and(|meta| meta.dev() == opened.dev() && meta.ino() == opened.ino())
    }))
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL character")
    })
}

/// `root`: the directory as [`Beneath::named`] names it.
fn outside(path: &Path, target: &Path, root: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{} resolves outside {root} (to {})", path.display(), target.display()),
    )
}

/// Turns the kernel's refusals into messages that name the path (`root` as
/// [`Beneath::named`] names it).
fn explain(error: io::Error, path: &Path, root: String) -> io::Error {
    match error.raw_os_error() {
        Some(libc::EXDEV) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} resolves outside {root} (a directory on the way is a symlink leaving it)",
                path.display()
            ),
        ),
        Some(libc::ENOTDIR) => io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("a parent of {} is not a directory", path.display()),
        ),
        Some(libc::ELOOP) => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a directory on the way to {} became a symlink while the tool ran (or loops); \
                 refused",
                path.display()
            ),
        ),
        _ => error,
    }
}

/// A directory descriptor (`O_PATH`): usable only as the base of `*at` calls.
fn open_directory(path: &Path) -> io::Result<OwnedFd> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)?;
    Ok(OwnedFd::from(file))
}

/// Opens `path`, already resolved (no symlink in it), from `/` one component at a
/// time refusing every symlink: a directory on the way swapped for a symlink after the
/// resolution (a sandboxed command's or another process's doing) fails the open
/// instead of leading it elsewhere.
fn open_resolved_directory(path: &Path) -> io::Result<OwnedFd> {
    if !path.is_absolute() {
        return Err(not_plain(path));
    }
    let names = absolute_names(path, path)?;
    walk_without_symlinks(&open_directory(Path::new("/"))?, &names).map_err(|error| {
        if error.raw_os_error() == Some(libc::ELOOP) {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("a directory on the way to {} became a symlink", path.display()),
            )
        } else {
            error
        }
    })
}

/// The names of `dir`'s components, for a walk from `/`; `path` (what the caller was
/// asked for) names the error when `dir` has `.`, `..` or a prefix.
fn absolute_names(dir: &Path, path: &Path) -> io::Result<Vec<CString>> {
    let mut names = Vec::new();
    for component in dir.components() {
        match component {
            Component::Normal(name) => names.push(c_name(name)?),
            Component::RootDir => {}
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(not_plain(path));
            }
        }
    }
    Ok(names)
}

fn not_plain(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is not a plain absolute path", path.display()),
    )
}

fn open_unconfined(parent: &Path, create: bool, created: &mut Vec<PathBuf>) -> io::Result<OwnedFd> {
    if create {
        let mut missing = Vec::new();
        let mut directory = Some(parent);
        while let Some(dir) = directory
            && !dir.as_os_str().is_empty()
            && fs::symlink_metadata(dir).is_err()
        {
            missing.push(dir);
            directory = dir.parent();
        }
        for dir in missing.into_iter().rev() {
            match fs::create_dir(dir) {
                Ok(()) => created.push(dir.to_path_buf()),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
                Err(error) => return Err(error),
            }
        }
    }
    open_directory(if parent.as_os_str().is_empty() { Path::new(".") } else { parent })
}

/// Opens `relative` (a directory path of plain names) beneath `root`, making missing
/// directories when `create`. Each missing one is made inside its parent's descriptor,
/// which the kernel already confined, and the walk then resolves again from `root`.
fn open_beneath(
    root: &OwnedFd,
    root_path: &Path,
    relative: &Path,
    create: bool,
    created: &mut Vec<PathBuf>,
) -> io::Result<OwnedFd> {
    let mut names = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => names.push(c_name(name)?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
        }
    }
    if let Ok(whole) = c_name(relative.as_os_str())
        && !names.is_empty()
    {
        match resolve_beneath(root, &whole, &names) {
            Ok(fd) => return Ok(fd),
            Err(error) if error.kind() == io::ErrorKind::NotFound && create => {}
            Err(error) => return Err(error),
        }
    }
    let mut current = root.try_clone()?;
    let mut prefix = PathBuf::new();
    for (index, name) in names.iter().enumerate() {
        prefix.push(OsStr::from_bytes(name.as_bytes()));
        let whole = c_name(prefix.as_os_str())?;
        let next = match resolve_beneath(root, &whole, &names[..=index]) {
            Err(error) if error.kind() == io::ErrorKind::NotFound && create => {
                // SAFETY: a live descriptor and a NUL-terminated name.
                let done = unsafe { libc::mkdirat(current.as_raw_fd(), name.as_ptr(), 0o777) };
                if done == 0 {
                    created.push(root_path.join(&prefix));
                } else {
                    let error = io::Error::last_os_error();
                    if error.kind() != io::ErrorKind::AlreadyExists {
                        return Err(error);
                    }
                }
                resolve_beneath(root, &whole, &names[..=index])?
            }
            other => other?,
        };
        current = next;
    }
    Ok(current)
}

/// The directory `whole` (= `names` joined) beneath `root`: openat2 where the kernel
/// has it, else the symlink-refusing walk.
fn resolve_beneath(root: &OwnedFd, whole: &CString, names: &[CString]) -> io::Result<OwnedFd> {
    if !OPENAT2_MISSING.load(Ordering::Relaxed) {
        match openat2_beneath(root, whole) {
            Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => {
                OPENAT2_MISSING.store(true, Ordering::Relaxed);
            }
            result => return result,
        }
    }
    walk_without_symlinks(root, names)
}

fn openat2_beneath(root: &OwnedFd, relative: &CString) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        mode: 0,
        // The path was resolved before: a symlink met now was swapped in since.
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    loop {
        // SAFETY: a live descriptor, a NUL-terminated path and an open_how of the size
        // passed, all outliving the call.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                root.as_raw_fd(),
                relative.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd >= 0 {
            let fd = libc::c_int::try_from(fd).map_err(io::Error::other)?;
            // SAFETY: the kernel just returned this descriptor to us alone.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let error = io::Error::last_os_error();
        // EAGAIN: a rename raced the lookup; the kernel asks to try again.
        if error.raw_os_error() != Some(libc::EAGAIN) && error.kind() != io::ErrorKind::Interrupted
        {
            return Err(error);
        }
    }
}

/// The fallback: one component at a time with `O_NOFOLLOW`, so no symlink is followed
/// at all (ELOOP/ENOTDIR for one on the way).
pub(super) fn walk_without_symlinks(root: &OwnedFd, names: &[CString]) -> io::Result<OwnedFd> {
    let mut current = root.try_clone()?;
    for name in names {
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        current = match openat(&current, name, flags, 0) {
            // A symlink opened with O_PATH|O_NOFOLLOW|O_DIRECTORY fails with ENOTDIR;
            // say what it is.
            Err(error) if error.raw_os_error() == Some(libc::ENOTDIR) => {
                return Err(if is_symlink(&current, name) {
                    io::Error::from_raw_os_error(libc::ELOOP)
                } else {
                    error
                });
            }
            other => other?,
        };
    }
    Ok(current)
}

fn is_symlink(directory: &OwnedFd, name: &CString) -> bool {
    // SAFETY: an all-zero stat is a valid value for the kernel to overwrite.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor, a NUL-terminated name and a writable stat.
    let done = unsafe {
        libc::fstatat(directory.as_raw_fd(), name.as_ptr(), &mut stat, libc::AT_SYMLINK_NOFOLLOW)
    };
    done == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFLNK
}

fn openat(
    directory: &OwnedFd,
    name: &CString,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    // SAFETY: a live descriptor and a NUL-terminated name.
    let fd = unsafe { libc::openat(directory.as_raw_fd(), name.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(dir: &Path) -> Beneath<'_> {
        Beneath::Workspace(dir, None)
    }

    fn names(path: &str) -> Vec<CString> {
        path.split('/').map(|name| CString::new(name).unwrap()).collect()
    }

    #[test]
    fn the_fallback_walk_refuses_every_symlink_and_follows_plain_directories() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("a/out")).unwrap();
        std::os::unix::fs::symlink("b", dir.path().join("a/in")).unwrap();
        let root = open_directory(dir.path()).unwrap();
        assert!(walk_without_symlinks(&root, &names("a/b")).is_ok());
        for path in ["a/out", "a/in"] {
            let error = walk_without_symlinks(&root, &names(path)).unwrap_err();
            assert_eq!(error.raw_os_error(), Some(libc::ELOOP), "{path}: {error}");
        }
    }

    #[test]
    fn a_place_beneath_the_workspace_refuses_a_parent_leaving_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let mut created = Vec::new();
        let error = Place::open(
            Some(workspace(dir.path())),
            &dir.path().join("link/f"),
            true,
            &mut created,
        )
        .unwrap_err();
        assert!(error.to_string().contains("resolves outside the workspace"), "{error}");
        let place = Place::open(
            Some(workspace(dir.path())),
            &dir.path().join("new/deep/f"),
            true,
            &mut created,
        )
        .unwrap();
        place.replace(b"x", None).unwrap();
        assert_eq!(fs::read(dir.path().join("new/deep/f")).unwrap(), b"x");
        assert_eq!(created.len(), 2);
    }

    #[test]
    fn without_proc_a_guarded_directory_is_known_by_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".git/sub")).unwrap();
        let git = open_directory(&dir.path().join(".git")).unwrap();
        let found = guarded_by_identity(&git, dir.path()).unwrap();
        assert_eq!(found, Some(dir.path().join(".git")));
        let plain = open_directory(dir.path()).unwrap();
        assert_eq!(guarded_by_identity(&plain, dir.path()).unwrap(), None);
    }
}
