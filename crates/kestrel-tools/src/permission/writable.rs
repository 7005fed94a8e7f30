//! What the model can change without asking: the places auto's sandbox lets commands
//! write (the workspace and the temp directories, minus the `.git` and `.kestrel` it
//! keeps read-only), and the `allow_write` places, which the file tools write and a line
//! the rules cover in auto writes minus the `.git`/`.kestrel` the sandbox keeps there.
//! Git that a rule lets out of the sandbox must read and run nothing from there.

use super::{AllowRule, PermissionPolicy};
use crate::workspace::resolve_existing;
use kestrel_platform::SandboxPolicy;
use std::cell::{OnceCell, RefCell};
use std::path::{Path, PathBuf};

/// Built once per judgement, scanned lazily: the sandbox's metadata scan walks the
/// workspace, so it runs once however many parts and remotes a line has.
pub(super) struct ModelWritable<'a> {
    policy: &'a PermissionPolicy,
    /// The sandbox's writable roots and the paths it keeps read-only in them.
    sandbox: OnceCell<(Vec<PathBuf>, Vec<PathBuf>)>,
    /// Each `allow_write` place looked into, with what a lifted line's sandbox keeps
    /// read-only in it.
    places: RefCell<Vec<(PathBuf, Vec<PathBuf>)>>,
}

impl PermissionPolicy {
    /// What the model can write now, as the sandbox would see it for a line starting now.
    pub(super) fn model_writable(&self) -> ModelWritable<'_> {
        ModelWritable { policy: self, sandbox: OnceCell::new(), places: RefCell::new(Vec::new()) }
    }
}

impl ModelWritable<'_> {
    /// Whether the model can write `path` (symlinks followed, as a write would).
    pub(super) fn contains(&self, path: &Path) -> bool {
        let real = resolve_existing(path);
        let (roots, protected) = self
            .sandbox
            .get_or_init(|| kept_in(&SandboxPolicy::workspace_write(&self.policy.cwd, false)));
        let beneath = |roots: &[PathBuf], kept: &[PathBuf]| {
            roots.iter().any(|root| real.starts_with(root))
                && !kept.iter().any(|kept| real.starts_with(kept))
        };
        if beneath(roots, protected) {
            return true;
        }
        let places = self.policy.allowed.rules().iter().filter_map(|rule| match rule {
            AllowRule::Path(place) => Some(resolve_existing(place)),
            _ => None,
        });
        for place in places.filter(|place| real.starts_with(place)) {
            let mut scanned = self.places.borrow_mut();
            let kept = match scanned.iter().find(|(done, _)| *done == place) {
                Some((_, kept)) => kept.clone(),
                None => {
                    let (_, kept) = kept_in(&SandboxPolicy::workspace_write(&place, false));
                    scanned.push((place.clone(), kept.clone()));
                    kept
                }
            };
            // As the lifted line's sandbox: the workspace's kept paths and the place's.
            let kept: Vec<PathBuf> = kept.into_iter().chain(protected.iter().cloned()).collect();
            if beneath(std::slice::from_ref(&place), &kept) {
                return true;
            }
        }
        false
    }
}

fn kept_in(policy: &SandboxPolicy) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let roots = policy.writable.iter().filter_map(|root| root.canonicalize().ok()).collect();
    (roots, policy.protected_paths())
}
