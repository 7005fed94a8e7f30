//! Which repository a `git push`, `fetch`, `pull` or `ls-remote` talks to. A rule for one
//! covers it only when that is one of the workspace repository's configured remotes (or
//! none is named: the branch's upstream), never a URL, `host:path` or a path the model
//! chose: run outside the sandbox (ask), the repository would go wherever the model
//! said. Options are read from a table of each subcommand's options; an unknown one (an
//! abbreviation too) might take the next word as its value, so it is not covered.

use super::repository::{self, run_git};
use super::writable::ModelWritable;
use super::{PermissionPolicy, PinnedRepository, git};
use std::path::{Path, PathBuf};

/// The subcommands this applies to.
pub(crate) const TALKS_TO_A_REMOTE: [&str; 4] = ["push", "fetch", "pull", "ls-remote"];

/// One subcommand's options: those that take no value (`flags`, and their short
/// letters), those whose value may be the next word (`values`), and those whose value
/// may only be attached with `=` (`attached`: without one they are flags).
struct Options {
    subcommand: &'static str,
    flags: &'static [&'static str],
    attached: &'static [&'static str],
    values: &'static [&'static str],
    short_flags: &'static str,
    short_values: &'static str,
}

const FETCH_FLAGS: &[&str] = &[
    "--all",
    "--append",
    "--atomic",
    "--dry-run",
    "--write-fetch-head",
    "--no-write-fetch-head",
    "--force",
    "--keep",
    "--prefetch",
    "--prune",
    "--no-prune",
    "--prune-tags",
    "--no-tags",
    "--tags",
    "--refetch",
    "--auto-maintenance",
    "--no-auto-maintenance",
    "--auto-gc",
    "--no-auto-gc",
    "--write-commit-graph",
    "--no-write-commit-graph",
    "--no-recurse-submodules",
    "--set-upstream",
    "--update-head-ok",
    "--quiet",
    "--verbose",
    "--progress",
    "--no-progress",
    "--show-forced-updates",
    "--no-show-forced-updates",
    "--ipv4",
    "--ipv6",
    "--unshallow",
    "--update-shallow",
];

const FETCH_VALUES: &[&str] = &[
    "--depth",
    "--deepen",
    "--shallow-since",
    "--shallow-exclude",
    "--jobs",
    "--upload-pack",
    "--refmap",
    "--negotiation-tip",
    "--server-option",
    "--filter",
    "--recurse-submodules-default",
    "--submodule-prefix",
];

const PULL_FLAGS: &[&str] = &[
    "--commit",
    "--no-commit",
    "--edit",
    "--no-edit",
    "--ff",
    "--no-ff",
    "--ff-only",
    "--squash",
    "--no-squash",
    "--verify",
    "--no-verify",
    "--stat",
    "--no-stat",
    "--summary",
    "--no-summary",
    "--compact-summary",
    "--no-log",
    "--signoff",
    "--no-signoff",
    "--autostash",
    "--no-autostash",
    "--allow-unrelated-histories",
    "--no-rebase",
    "--verify-signatures",
    "--no-verify-signatures",
    "--no-gpg-sign",
];

const OPTIONS: &[Options] = &[
    Options {
        subcommand: "push",
        flags: &[
            "--all",
            "--branches",
            "--prune",
            "--mirror",
            "--dry-run",
            "--porcelain",
            "--delete",
            "--tags",
            "--follow-tags",
            "--no-follow-tags",
            "--atomic",
            "--no-atomic",
            "--force",
            "--no-force",
            "--force-if-includes",
            "--no-force-if-includes",
            "--no-force-with-lease",
            "--set-upstream",
            "--thin",
            "--no-thin",
            "--quiet",
            "--verbose",
            "--progress",
            "--no-progress",
            "--verify",
            "--no-verify",
            "--ipv4",
            "--ipv6",
            "--no-signed",
            "--no-recurse-submodules",
            "--no-push-option",
        ],
        attached: &["--force-with-lease", "--signed"],
        values: &["--push-option", "--recurse-submodules", "--receive-pack", "--exec"],
        short_flags: "nqvfud46",
        short_values: "o",
    },
    Options {
        subcommand: "fetch",
        flags: FETCH_FLAGS,
        attached: &["--recurse-submodules"],
        values: FETCH_VALUES,
        short_flags: "afkpPtnqvu46",
        short_values: "jo",
    },
    Options {
        subcommand: "pull",
        flags: PULL_FLAGS,
        attached: &["--rebase", "--log", "--gpg-sign", "--recurse-submodules"],
        values: &["--strategy", "--strategy-option", "--cleanup"],
        short_flags: "enqvrfakpt46",
        short_values: "joXs",
    },
    Options {
        subcommand: "ls-remote",
        flags: &["--heads", "--tags", "--refs", "--quiet", "--get-url", "--symref", "--branches"],
        attached: &[],
        values: &["--upload-pack", "--exec", "--sort", "--server-option"],
        short_flags: "htbq",
        short_values: "o",
    },
];

impl Options {
    fn is_flag(&self, option: &str) -> bool {
        self.flags.contains(&option)
            || self.attached.contains(&option)
            || (self.subcommand == "pull" && (FETCH_FLAGS.contains(&option)))
    }

    fn takes_value(&self, option: &str) -> bool {
        self.values.contains(&option)
            || (self.subcommand == "pull" && FETCH_VALUES.contains(&option))
    }
}

/// The repository `git SUBCOMMAND ARGS` names (`None`: none, its upstream), or `None`
/// (outer) when that cannot be told: an unknown option, `--repo`, `--multiple`.
pub(crate) fn repository_operand<'a>(
    subcommand: &str,
    args: &[&'a str],
) -> Option<Option<&'a str>> {
    let options = OPTIONS.iter().find(|options| options.subcommand == subcommand)?;
    let mut words = args.iter();
    while let Some(&arg) = words.next() {
        if arg == "--" {
            return Some(words.next().copied());
        }
        if arg.starts_with("--") {
            let long = arg;
            match long.split_once('=') {
                Some((name, _)) if options.is_flag(name) || options.takes_value(name) => {}
                None if options.is_flag(long) => {}
                None if options.takes_value(long) => {
                    words.next()?;
                }
                _ => return None,
            }
            continue;
        }
        if let Some(letters) = arg.strip_prefix('-').filter(|letters| !letters.is_empty()) {
            for (at, letter) in letters.char_indices() {
                if options.short_values.contains(letter) {
                    // The rest of the bundle is its value, or the next word is.
                    if at + letter.len_utf8() == letters.len() {
                        words.next()?;
                    }
                    break;
                }
                if !options.short_flags.contains(letter) {
                    return None;
                }
            }
            continue;
        }
        return Some(Some(arg));
    }
    Some(None)
}

impl PermissionPolicy {
    /// Why a `git push`/`fetch`/`pull`/`ls-remote` (its leading words `leading`) is not
    /// covered for the remote it names: not one of the pinned repository's remotes, or
    /// one that is a repository on this machine the model can change.
    pub(super) fn unknown_remote(
        &self,
        leading: &[String],
        writable: &ModelWritable,
    ) -> Option<String> {
        let args = git::arguments(leading);
        let (subcommand, rest) = git::split_subcommand(&args)?;
        if !TALKS_TO_A_REMOTE.contains(&subcommand) {
            return None;
        }
        // A name, not a URL: an unknown option or a location is not covered by the rule
        // at all (`git::beyond_a_subcommand_rule`).
        let name = repository_operand(subcommand, rest)?;
        let Some(repository) = &self.repository else {
            return name.map(|name| format!("`{name}` is not one of the repository's remotes"));
        };
        let remotes = match configured(repository) {
            Ok(remotes) => remotes,
            Err(reason) => return Some(format!("its remotes cannot be told: {reason}")),
        };
        // None named: git picks the upstream, so every remote must do.
        let names = match name {
            Some(name) if remotes.iter().any(|remote| remote == name) => vec![name.to_string()],
            Some(name) => {
                return Some(format!(
                    "`{name}` is not one of the repository's remotes: a rule lets git reach \
                     only those"
                ));
            }
            None => remotes,
        };
        let locations = match local_locations(repository, &names, subcommand == "push") {
            Ok(locations) => locations,
            Err(reason) => return Some(format!("its remotes cannot be told: {reason}")),
        };
        locations.iter().find_map(|location| self.local_remote_risk(location, writable))
    }

    /// Why a repository a remote's URL leads to on this machine is not trusted, if it is
    /// not: git runs its hooks (`post-receive`) and reads its config as part of the
    /// command, so it must be one git would use there, lie where the model cannot change
    /// it, and set nothing that runs programs.
    fn local_remote_risk(&self, location: &Path, writable: &ModelWritable) -> Option<String> {
        repository::local_remote_risk(location, &|path| writable.contains(path))
            .map(|reason| format!("its remote at {}: {reason}", location.display()))
    }
}

/// Whether `git remote ARGS` does more than list remotes or show one: `add`, `set-url`,
/// `rename` change where a later `push` in the line goes (a rule for it judged the
/// remotes as they were), `update` and `add -f` fetch from remotes nobody checked.
pub(crate) fn changes_remotes(subcommand: &str, args: &[&str], complete: bool) -> bool {
    if subcommand != "remote" {
        return false;
    }
    let action = args.iter().find(|arg| !arg.starts_with('-'));
    !complete || !matches!(action.copied(), None | Some("show" | "get-url"))
}

/// The names of `repository`'s remotes (`git remote`), or why they cannot be had.
pub(crate) fn configured(repository: &PinnedRepository) -> Result<Vec<String>, String> {
    let dir = repository.work_tree.as_deref().unwrap_or(&repository.git_dir);
    let mut command = std::process::Command::new("git");
    command.arg("remote").current_dir(dir);
    let printed = run_git(command, Vec::new())?;
    Ok(String::from_utf8_lossy(&printed).lines().map(str::to_string).collect())
}

/// The repositories on this machine that `names` (remotes of `repository`) lead to: those
/// whose URL (`insteadOf` applied, the push URL for `push`) is a local path
/// (`../backup.git`, `file:///srv/r.git`). Git runs such a repository's hooks and reads
/// its config as part of the command. Relative paths are from the working tree's top,
/// where git runs the command.
pub(crate) fn local_locations(
    repository: &PinnedRepository,
    names: &[String],
    push: bool,
) -> Result<Vec<PathBuf>, String> {
    let dir = repository.work_tree.as_deref().unwrap_or(&repository.git_dir);
    let mut found = Vec::new();
    for name in names {
        let mut command = std::process::Command::new("git");
        command.args(["remote", "get-url", "--all"]);
        if push {
            command.arg("--push");
        }
        command.arg("--").arg(name).current_dir(dir);
        let printed = run_git(command, Vec::new())?;
        for url in String::from_utf8_lossy(&printed).lines() {
            match local_path(url) {
                // git expands `~` and `~user`: not followed here.
                Some(path) if path.starts_with('~') => {
                    return Err(format!("the URL {url} is not checked"));
                }
                Some(path) => found.push(dir.join(path)),
                None => {}
            }
        }
    }
    Ok(found)
}

/// The path a remote URL names when it is local, as git tells (`url_is_local_not_ssh`):
/// `file://PATH`, or no scheme, no `helper::` and no `host:` before the first slash.
fn local_path(url: &str) -> Option<&str> {
    let is_scheme = |scheme: &str| {
        !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    };
    if let Some((scheme, rest)) = url.split_once("://")
        && is_scheme(scheme)
    {
        // `file://host/path`: git takes the path from the first slash.
        let path = rest.find('/').map_or(rest, |slash| &rest[slash..]);
        return scheme.eq_ignore_ascii_case("file").then_some(path);
    }
    if let Some((helper, _)) = url.split_once("::")
        && is_scheme(helper)
    {
        return None;
    }
    match (url.find(':'), url.find('/')) {
        (Some(colon), Some(slash)) if slash < colon => Some(url),
        (Some(_), _) => None,
        (None, _) => Some(url),
    }
}

#[cfg(test)]
mod tests {
    use super::local_path;

    #[test]
    fn local_paths_are_told_from_network_urls() {
        for (url, local) in [
            ("../backup.git", Some("../backup.git")),
            ("/srv/r.git", Some("/srv/r.git")),
            ("./a:b", Some("./a:b")),
            ("file:///srv/r.git", Some("/srv/r.git")),
            ("FILE:///srv/r.git", Some("/srv/r.git")),
            ("file://host/srv/r.git", Some("/srv/r.git")),
            ("~/r.git", Some("~/r.git")),
            ("https://example.org/r.git", None),
            ("git@example.org:r.git", None),
            ("example.org:r.git", None),
            ("ssh://example.org/r.git", None),
            ("ext::sh -c x", None),
        ] {
            assert_eq!(local_path(url), local, "{url}");
        }
    }
}
