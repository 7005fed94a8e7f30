//! Whether the git repository a command would run in can make reading git commands run
//! programs. A repository's own config (`.git/config`, a worktree's, a submodule's, a bare
//! repository's `config`) can: `core.fsmonitor` on `status`, `diff.*.textconv` on
//! `diff`/`log -p`/`blame`, `filter.*` on `diff`/`status`, `core.pager`... and so can its
//! `post-index-change` hook, which git runs when `status` or `diff` refresh the index. A
//! workspace may hold such a repository (a bare one, a `.git` planted by an archive or an
//! earlier command), so one that sets any of these is not trusted. The user's global and
//! system config are the user's own choice and are not judged.

use crate::workspace::normalize;
use std::path::{Path, PathBuf};

/// How deep submodules of submodules are followed.
const MAX_SUBMODULE_DEPTH: usize = 3;

/// Hooks that reading commands can fire.
const READING_HOOKS: [&str; 1] = ["post-index-change"];

/// Why the repository that git would find from `dir` is not trusted, if it is not.
pub(crate) fn risk(dir: &Path) -> Option<String> {
    if std::env::var_os("GIT_DIR").is_some() || std::env::var_os("GIT_COMMON_DIR").is_some() {
        return Some("GIT_DIR is set, so the repository git uses cannot be checked".into());
    }
    risk_at(dir, 0)
}

/// A repository as git finds it.
struct Found {
    git_dir: PathBuf,
    /// The working tree's top, `None` for a bare repository.
    top: Option<PathBuf>,
}

fn risk_at(dir: &Path, depth: usize) -> Option<String> {
    let found = match find(dir) {
        Ok(Some(found)) => found,
        Ok(None) => return None,
        Err(reason) => return Some(reason),
    };
    let common = match std::fs::read_to_string(found.git_dir.join("commondir")) {
        Ok(common) => normalize(&found.git_dir.join(common.trim())),
        Err(_) => found.git_dir.clone(),
    };
    let mut files = vec![found.git_dir.join("config"), found.git_dir.join("config.worktree")];
    if common != found.git_dir {
        files.push(common.join("config"));
        files.push(common.join("config.worktree"));
    }
    // The repository's own files, before its submodules': they say where its hooks are.
    let own = files.len();
    collect_configs(&common.join("modules"), 0, &mut files);
    let mut hooks_path = None;
    for (index, file) in files.into_iter().enumerate() {
        let text = match std::fs::read(&file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => {
                return Some(format!("cannot read {} to check it: {error}", file.display()));
            }
        };
        let entries = match entries(&text) {
            Ok(entries) => entries,
            Err(line) => {
                return Some(format!("cannot read the line `{line}` of {}", file.display()));
            }
        };
        for entry in &entries {
            if let Some(setting) = entry.risky() {
                return Some(format!(
                    "the repository's own config ({}) sets `{setting}`, which can make git run \
                     programs",
                    file.display()
                ));
            }
            if index < own && entry.section == "core" && entry.key == "hookspath" {
                hooks_path = Some(entry.value.clone());
            }
        }
    }
    let hooks = match hooks_path {
        None => common.join("hooks"),
        Some(path) if path.starts_with('~') => {
            return Some(format!("the repository's hooks are in `{path}`, which is not checked"));
        }
        Some(path) => normalize(&found.top.clone().unwrap_or(found.git_dir.clone()).join(path)),
    };
    for hook in READING_HOOKS {
        let hook = hooks.join(hook);
        if hook.exists() {
            return Some(format!(
                "the repository has a hook {} that git runs when reading commands refresh \
                 the index",
                hook.display()
            ));
        }
    }
    // `status` and `diff` look into submodules, with their own config and hooks.
    let top = found.top?;
    if depth >= MAX_SUBMODULE_DEPTH {
        return None;
    }
    let gitmodules = std::fs::read_to_string(top.join(".gitmodules")).unwrap_or_default();
    for line in gitmodules.lines() {
        let Some((key, path)) = line.split_once('=') else { continue };
        if key.trim() != "path" {
            continue;
        }
        let submodule = normalize(&top.join(path.trim()));
        if submodule != top
            && submodule.join(".git").exists()
            && let Some(reason) = risk_at(&submodule, depth + 1)
        {
            return Some(reason);
        }
    }
    None
}

/// The repository git would use from `dir`: the first `.git` (directory, or a file
/// naming one) on the way up, or a directory that is itself a repository (a bare one).
fn find(dir: &Path) -> Result<Option<Found>, String> {
    for candidate in dir.ancestors() {
        let dot_git = candidate.join(".git");
        let top = Some(candidate.to_path_buf());
        if dot_git.is_dir() {
            return Ok(Some(Found { git_dir: dot_git, top }));
        }
        if dot_git.is_file() {
            let text = std::fs::read_to_string(&dot_git)
                .map_err(|error| format!("cannot read {}: {error}", dot_git.display()))?;
            let Some(target) = text.trim().strip_prefix("gitdir:") else {
                return Err(format!("{} does not name a git directory", dot_git.display()));
            };
            let git_dir = normalize(&candidate.join(target.trim()));
            return Ok(Some(Found { git_dir, top }));
        }
        if candidate.join("HEAD").is_file() && candidate.join("objects").is_dir() {
            return Ok(Some(Found { git_dir: candidate.to_path_buf(), top: None }));
        }
    }
    Ok(None)
}

/// Config files of submodules (`modules/NAME/config`, nested), a bounded walk.
fn collect_configs(dir: &Path, depth: usize, files: &mut Vec<PathBuf>) {
    const MAX_DEPTH: usize = 6;
    const MAX_FILES: usize = 256;
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if files.len() >= MAX_FILES || depth >= MAX_DEPTH {
            return;
        }
        let path = entry.path();
        if path.is_dir() {
            files.push(path.join("config"));
            files.push(path.join("config.worktree"));
            collect_configs(&path, depth + 1, files);
        }
    }
}

/// One `key = value` of a git config file, names in lower case.
struct Entry {
    section: String,
    /// `[section "sub"]` or `[section.sub]`.
    subsection: bool,
    key: String,
    value: String,
}

impl Entry {
    /// The setting, when it can make reading commands run a program (or brings in a
    /// file that is not checked).
    fn risky(&self) -> Option<String> {
        let key = self.key.as_str();
        let risky = match self.section.as_str() {
            "filter" | "pager" | "alias" | "include" | "includeif" | "gpg" | "trace2" => true,
            "core" => {
                matches!(
                    key,
                    "pager" | "sshcommand" | "askpass" | "gitproxy" | "alternaterefscommand"
                ) || (key == "fsmonitor"
                    && !matches!(
                        self.value.to_ascii_lowercase().as_str(),
                        "false" | "no" | "off" | "0" | ""
                    ))
            }
            "diff" => {
                (!self.subsection && key == "external")
                    || (self.subsection && matches!(key, "textconv" | "command"))
            }
            "log" => key == "showsignature",
            _ => false,
        };
        risky.then(|| format!("{}.{key}", self.section))
    }
}

/// The entries of a git config text; `Err` with a line that cannot be read. Sections
/// that can only be risky count even when empty (`[include]` alone).
fn entries(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    let mut section = String::new();
    let mut subsection = false;
    let mut continued = false;
    for raw in text.lines() {
        // A value continued on the next line: that line is still the value.
        let was_continued = continued;
        continued = raw.trim_end().ends_with('\\');
        if was_continued {
            continue;
        }
        let mut line = raw.trim();
        if let Some(header) = line.strip_prefix('[') {
            let Some((inner, after)) = header.split_once(']') else {
                return Err(line.to_string());
            };
            let inner = inner.trim();
            let name_end = inner.find(|c: char| c.is_whitespace() || c == '"' || c == '.');
            section = inner[..name_end.unwrap_or(inner.len())].to_ascii_lowercase();
            subsection = name_end.is_some();
            // A header alone names the section, as a key-less entry.
            entries.push(Entry {
                section: section.clone(),
                subsection,
                key: String::new(),
                value: String::new(),
            });
            line = after.trim();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((key, value)) => (key.trim(), value.trim()),
            None => (line, "true"),
        };
        entries.push(Entry {
            section: section.clone(),
            subsection,
            key: key.to_ascii_lowercase(),
            value: value.trim_matches('"').to_string(),
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn risky(text: &str) -> Option<String> {
        match entries(text) {
            Ok(entries) => entries.iter().find_map(Entry::risky),
            Err(line) => Some(line),
        }
    }

    #[test]
    fn risky_settings_are_found_in_any_spelling() {
        for text in [
            "[core]\n\tfsmonitor = ./hook\n",
            "[core] pager = sh -c x\n",
            "[diff \"pdf\"]\n\ttextconv = ./x\n",
            "[diff.pdf]\n\tcommand = ./x\n",
            "[diff]\nexternal = ./x\n",
            "[filter \"lfs\"]\nsmudge = x\n",
            "[include]\npath = other\n",
            "[includeIf \"gitdir:/x\"]\n",
            "[log]\nshowSignature\n",
            "[CORE]\nSSHCommand = x\n",
            "[core\n",
        ] {
            assert!(risky(text).is_some(), "{text}");
        }
        for text in [
            "[core]\n\tbare = false\n\tfsmonitor = false\n",
            "[diff]\n\tcolorMoved = zebra\n",
            "[core]\n\teditor = a \\\n pager = y\n",
        ] {
            assert_eq!(risky(text), None, "{text}");
        }
    }
}
