//! Workspace confinement for the file tools (ARCHITECTURE §6): outside `yolo`, a path
//! must resolve — symlinks followed — to a place inside the workspace. The check
//! names the place; the write itself goes through [`Place`], which has the kernel keep
//! it beneath the workspace even if the path changes in between.

mod beneath;
mod pin;

pub(crate) use beneath::Place;
pub(crate) use pin::Beneath;
pub use pin::WorkspacePin;

use crate::ToolContext;
use kestrel_protocol::Mode;
use std::path::{Component, Path, PathBuf};

/// What a tool means to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Resolves `path` for a tool call and checks it against the mode. `Err` carries the
/// reason for the model ("... is outside the workspace ...").
pub fn confine(context: &ToolContext, path: &str, access: Access) -> Result<PathBuf, String> {
    if path.trim().is_empty() {
        return Err("the path is empty".to_string());
    }
    let lexical = normalize(&context.resolve(path));
    match context.mode {
        Mode::Yolo => return Ok(lexical),
        Mode::ReadOnly if access == Access::Write => {
            return Err(format!(
                "cannot write {}: the session is in read-only mode",
                lexical.display()
            ));
        }
        Mode::ReadOnly | Mode::Ask | Mode::Auto => {}
    }
    let workspace = resolve_existing(&normalize(&context.workspace));
    let real = resolve_existing(&lexical);
    let granted = access == Access::Write && context.granted_writes.contains(&real);
    if real.starts_with(&workspace) || granted {
        Ok(lexical)
    } else {
        let via = if real == lexical {
            String::new()
        } else {
            format!(" (it resolves to {})", real.display())
        };
        let rule = match access {
            Access::Read => "",
            // Only a write the user vouched for leaves the workspace (permission policy).
            Access::Write => {
                " unless the user approves the write (ask mode) or `[permissions] allow_write` \
                 in config.toml covers the path"
            }
        };
        Err(format!(
            "{}{via} is outside the workspace {}; in {} mode the file tools only work inside \
             it{rule}",
            lexical.display(),
            workspace.display(),
            context.mode
        ))
    }
}

/// Where a call's writes may land, kept so by the kernel at the write (see [`Place`]).
#[derive(Debug, Clone)]
pub(crate) enum WriteScope {
    /// `yolo`: anywhere.
    Anywhere,
    /// Beneath the workspace, and outside it exactly the files granted to the call
    /// (`ToolContext::granted_writes`, resolved when they were approved).
    Confined { workspace: PathBuf, pin: Option<WorkspacePin>, granted: Vec<PathBuf> },
}

impl WriteScope {
    pub(crate) fn of(context: &ToolContext) -> Self {
        match context.mode {
            Mode::Yolo => WriteScope::Anywhere,
            Mode::ReadOnly | Mode::Ask | Mode::Auto => WriteScope::Confined {
                workspace: context.workspace.clone(),
                pin: context.workspace_pin,
                granted: context.granted_writes.clone(),
            },
        }
    }

    /// [`Place::open`] within the scope. A granted file is opened beneath its nearest
    /// existing ancestor and must resolve to exactly the granted file: a symlink
    /// swapped in since the approval (or a path that now leads elsewhere) is refused.
    pub(crate) fn open(
        &self,
        path: &Path,
        create: bool,
        created: &mut Vec<PathBuf>,
    ) -> std::io::Result<Place> {
        match self.root_for(&resolve_existing(&normalize(path))) {
            Root::Anywhere => Place::open(None, path, create, created),
            Root::Workspace(workspace, pin) => {
                Place::open(Some(Beneath::Workspace(workspace, pin)), path, create, created)
            }
            Root::Granted { file } => {
                // Pinned: a directory on the way swapped since is refused before
                // anything is created beneath it.
                let (root, pin) = existing_ancestor(file)?;
                let beneath = Beneath::Granted(&root, pin);
                let place = Place::open(Some(beneath), path, create, created)?;
                same_as_granted(place, file)
            }
        }
    }

    /// [`Place::open_entry`] within the scope (the last component is not followed).
    pub(crate) fn open_entry(&self, path: &Path) -> std::io::Result<Place> {
        let path_normal = normalize(path);
        let entry = match (path_normal.parent(), path_normal.file_name()) {
            (Some(parent), Some(name)) => resolve_existing(parent).join(name),
            _ => path_normal.clone(),
        };
        match self.root_for(&entry) {
            Root::Anywhere => Place::open_entry(None, path),
            Root::Workspace(workspace, pin) => {
                Place::open_entry(Some(Beneath::Workspace(workspace, pin)), path)
            }
            Root::Granted { file } => {
                let (root, pin) = existing_ancestor(file)?;
                same_as_granted(Place::open_entry(Some(Beneath::Granted(&root, pin)), path)?, file)
            }
        }
    }

    fn root_for<'a>(&'a self, target: &Path) -> Root<'a> {
        match self {
            WriteScope::Anywhere => Root::Anywhere,
            WriteScope::Confined { workspace, pin, granted } => {
                match granted.iter().find(|file| file.as_path() == target) {
                    Some(file) => Root::Granted { file },
                    None => Root::Workspace(workspace, *pin),
                }
            }
        }
    }
}

/// Where [`WriteScope`] opens one path.
enum Root<'a> {
    Anywhere,
    Workspace(&'a Path, Option<WorkspacePin>),
    Granted { file: &'a Path },
}

fn same_as_granted(place: Place, file: &Path) -> std::io::Result<Place> {
    if place.path() == file {
        Ok(place)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "it now leads to {}, not to the approved {} (a symlink changed)",
                place.path().display(),
                file.display()
            ),
        ))
    }
}

/// The nearest ancestor of the granted `file` that exists (the root at worst), symlinks
/// not followed. The granted file was resolved when it was judged, so every existing
/// directory on its way was a real one: a symlink (or anything but a directory) there
/// now was swapped in since, and is refused. With the pin of that directory as seen here.
fn existing_ancestor(file: &Path) -> std::io::Result<(PathBuf, WorkspacePin)> {
    let Some((dir, metadata)) = file
        .ancestors()
        .skip(1)
        .find_map(|dir| std::fs::symlink_metadata(dir).ok().map(|metadata| (dir, metadata)))
    else {
        return Ok((PathBuf::from("/"), WorkspacePin::of(Path::new("/"))?));
    };
    if !metadata.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is no longer a directory (a symlink changed)", dir.display()),
        ));
    }
    Ok((dir.to_path_buf(), WorkspacePin::of_metadata(&metadata)))
}

/// The directory a search tool starts from: `path`, or the cwd when none is given,
/// confined for reading. `Err` is the error output for the model.
pub fn search_root(
    context: &ToolContext,
    path: Option<&str>,
) -> Result<PathBuf, crate::ToolOutput> {
    confine(context, path.unwrap_or("."), Access::Read).map_err(crate::ToolOutput::error)
}

/// Removes `.` and `..` without touching the file system.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => {
                out.push(component.as_os_str())
            }
        }
    }
    out
}

/// Why a write to `path` would reach beyond the workspace's files although it lies
/// inside: git metadata (hooks and config run programs outside the sandbox), project
/// config (`.kestrel`: MCP servers, commands) or `$KESTREL_HOME` (records, config,
/// the daemon's socket). The shell's sandbox keeps the same places read-only. `None`
/// for an ordinary path. Symlinks are followed, as a write would follow them.
pub fn guarded_place(workspace: &Path, path: &Path) -> Option<&'static str> {
    let real = resolve_existing(&normalize(path));
    if let Ok(home) = kestrel_store::KestrelHome::from_env()
        && real.starts_with(resolve_existing(home.root()))
    {
        return Some("Kestrel's own home (records and config)");
    }
    let workspace = resolve_existing(&normalize(workspace));
    let inside = real.strip_prefix(&workspace).unwrap_or(&real);
    inside.components().find_map(|component| match component.as_os_str().to_str() {
        Some(".git") => Some("git metadata: its hooks and config run programs unconfined"),
        Some(".kestrel") => Some("project config: it can start programs unconfined"),
        _ => None,
    })
}

/// Follows symlinks of the longest existing ancestor and re-appends the rest, so a
/// path that does not exist yet is judged by where it would be created. A dangling
/// symlink is judged by its target: writing through it creates the target.
pub(crate) fn resolve_existing(path: &Path) -> PathBuf {
    resolve_with_depth(path, 0)
}

/// Symlink chains longer than this are treated as pointing nowhere inside anything.
const MAX_LINK_DEPTH: usize = 40;

fn resolve_with_depth(path: &Path, depth: usize) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        let is_link =
            std::fs::symlink_metadata(&existing).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && let Ok(target) = std::fs::read_link(&existing) {
            if depth >= MAX_LINK_DEPTH {
                return PathBuf::from("/dev/null/symlink-loop");
            }
            let parent = existing.parent().map(Path::to_path_buf).unwrap_or_default();
            let mut out = resolve_with_depth(&normalize(&parent.join(target)), depth + 1);
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.file_name().map(|name| name.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Unconfined;
    use tokio_util::sync::CancellationToken;

    fn context(root: &Path, mode: Mode) -> ToolContext {
        ToolContext {
            cwd: root.to_path_buf(),
            workspace: root.to_path_buf(),
            mode,
            network: false,
            cancel: CancellationToken::new(),
            granted_writes: Vec::new(),
            unconfined: Unconfined::No,
            workspace_pin: None,
        }
    }

    #[test]
    fn inside_paths_pass_and_outside_paths_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path(), Mode::Auto);
        assert!(confine(&ctx, "new/file.txt", Access::Write).is_ok());
        let error = confine(&ctx, "../escape.txt", Access::Write).unwrap_err();
        assert!(error.contains("outside the workspace"), "{error}");
        assert!(confine(&context(dir.path(), Mode::Yolo), "../x", Access::Write).is_ok());
    }

    #[test]
    fn a_symlink_leaving_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let error = confine(&context(dir.path(), Mode::Auto), "link/f", Access::Write).unwrap_err();
        assert!(error.contains("resolves to"), "{error}");
    }

    #[test]
    fn a_dangling_symlink_is_judged_by_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("not-yet.txt");
        std::os::unix::fs::symlink(&target, dir.path().join("evil")).unwrap();
        let error = confine(&context(dir.path(), Mode::Auto), "evil", Access::Write).unwrap_err();
        assert!(error.contains("outside the workspace"), "{error}");
        // A dangling link that stays inside is fine.
        std::os::unix::fs::symlink(dir.path().join("later.txt"), dir.path().join("ok")).unwrap();
        assert!(confine(&context(dir.path(), Mode::Auto), "ok", Access::Write).is_ok());
        // A loop is refused, not followed forever.
        std::os::unix::fs::symlink(dir.path().join("b"), dir.path().join("a")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("b")).unwrap();
        assert!(confine(&context(dir.path(), Mode::Auto), "a", Access::Write).is_err());
    }

    #[test]
    fn read_only_mode_refuses_writes_but_not_reads() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path(), Mode::ReadOnly);
        assert!(confine(&ctx, "a.txt", Access::Read).is_ok());
        assert!(confine(&ctx, "a.txt", Access::Write).unwrap_err().contains("read-only"));
    }
}
