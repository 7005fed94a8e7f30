//! Where a command's operands lead. A rule covers a command as the user wrote it
//! (`touch a.txt`), and in ask a covered line runs outside the sandbox; but the model,
//! inside the sandbox, can first make `a.txt` a symlink to `~/.bashrc` (or `d` one to
//! `/etc` before `touch d/x`). A covered command whose operand a symlink sends out of the
//! workspace, or into a place guarded in it, is therefore not covered.

use super::command::Word;
use crate::workspace::{guarded_place, normalize, resolve_existing};
use std::path::{Path, PathBuf};

/// The paths the literal operands of the command `words` (its name first) may name: each
/// word after the name that does not start with `-` and the value of each `name=value`
/// word, joined to every directory in `places`. Words that are no paths (`-m`, `origin`)
/// name files that do not exist: they pass [`redirected`]. `None` when a relative
/// operand is given and the directory is not known (`places` is `None`).
pub(super) fn candidates(words: &[Word], places: Option<&[PathBuf]>) -> Option<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for word in words.iter().skip(1).filter(|word| word.literal) {
        let value = word.text.split_once('=').map(|(_, value)| value);
        let whole = (!word.text.starts_with('-')).then_some(word.text.as_str());
        for name in whole.into_iter().chain(value).filter(|name| !name.is_empty()) {
            if name.starts_with('/') {
                paths.push(PathBuf::from(name));
                continue;
            }
            paths.extend(places?.iter().map(|dir| dir.join(name)));
        }
    }
    Some(paths)
}

/// Whether `operand`, or a directory on its way below the `workspace`, is a symlink that
/// leads (followed to the end, dangling or not) out of the workspace or into a place
/// guarded in it (`.git`, `.kestrel`). Symlinks above the workspace (`/tmp` on macOS)
/// are the system's, not the model's. An absolute path outside the workspace without a
/// symlink is not redirected: the rule's author wrote it.
pub(super) fn redirected(workspace: &Path, operand: &Path) -> bool {
    let workspace = normalize(workspace);
    let real_workspace = resolve_existing(&workspace);
    operand
        .ancestors()
        .take_while(|place| !workspace.starts_with(place) && !real_workspace.starts_with(place))
        .filter(|place| std::fs::symlink_metadata(place).is_ok_and(|meta| meta.is_symlink()))
        .any(|link| {
            !resolve_existing(link).starts_with(&real_workspace)
                || guarded_place(&workspace, link).is_some()
        })
}
