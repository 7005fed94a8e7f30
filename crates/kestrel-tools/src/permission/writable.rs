//! What the model can change without asking: the places auto's sandbox lets commands
//! write (the workspace and the temp directories, minus the `.git` and `.kestrel` it
//! keeps read-only) and the `allow_write` places the file tools write. Git that a rule
//! lets out of the sandbox must read and run nothing from there.

use super::PermissionPolicy;
use crate::workspace::resolve_existing;
use kestrel_platform::SandboxPolicy;
use std::path::{Path, PathBuf};

pub(super) struct ModelWritable<'a> {
    policy: &'a PermissionPolicy,
    roots: Vec<PathBuf>,
    protected: Vec<PathBuf>,
}

impl PermissionPolicy {
    /// The places the model can write now, as the sandbox would see them for a line
    /// starting now (its metadata scan included).
    pub(super) fn model_writable(&self) -> ModelWritable<'_> {
        let sandbox = SandboxPolicy::workspace_write(&self.cwd, false);
        let roots = sandbox.writable.iter().filter_map(|root| root.canonicalize().ok()).collect();
        ModelWritable { policy: self, roots, protected: sandbox.protected_paths() }
    }
}

impl ModelWritable<'_> {
    /// Whether the model can write `path` (symlinks followed, as a write would).
    pub(super) fn contains(&self, path: &Path) -> bool {
        let real = resolve_existing(path);
        let sandboxed = self.roots.iter().any(|root| real.starts_with(root))
            && !self.protected.iter().any(|kept| real.starts_with(kept));
        sandboxed || self.policy.covering_rule(&real).is_some()
    }
}
