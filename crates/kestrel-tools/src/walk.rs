//! The directory walk shared by grep, glob and list_dir: ripgrep's `ignore` walker,
//! honouring .gitignore (even outside a git repository), .ignore and global git
//! excludes, sorted by name so results are stable, never descending into `.git`.

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;
use std::path::Path;

/// Whether hidden (dot) files are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hidden {
    Skip,
    Show,
}

/// A walker over `root`.
pub(crate) fn builder(root: &Path, hidden: Hidden) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(hidden == Hidden::Skip)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// A file glob as the model writes it: without `/` it matches a file name at any depth
/// (`*.rs`); with `/` it matches the path relative to the search root (`src/**/*.rs`).
/// `*` never crosses `/`; `**` does.
#[derive(Debug, Clone)]
pub(crate) struct FileGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl FileGlob {
    /// Parses `pattern`; `Err` carries the reason for the model.
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        let trimmed = pattern.trim();
        if trimmed.is_empty() {
            return Err("the glob is empty".to_string());
        }
        let relative = trimmed.trim_start_matches("./").trim_start_matches('/');
        let glob = GlobBuilder::new(relative)
            .literal_separator(true)
            .build()
            .map_err(|error| format!("invalid glob `{trimmed}`: {error}"))?;
        Ok(Self { matcher: glob.compile_matcher(), by_name: !relative.contains('/') })
    }

    /// Whether `path` (a file under `root`) matches.
    pub(crate) fn matches(&self, root: &Path, path: &Path) -> bool {
        if self.by_name {
            return path.file_name().is_some_and(|name| self.matcher.is_match(name));
        }
        let relative = path.strip_prefix(root).unwrap_or(path);
        self.matcher.is_match(relative)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_without_slash_matches_names_at_any_depth() {
        let root = Path::new("/r");
        let glob = FileGlob::new("*.rs").unwrap();
        assert!(glob.matches(root, Path::new("/r/a/b/c.rs")));
        assert!(!glob.matches(root, Path::new("/r/a/b/c.rsx")));
        let glob = FileGlob::new("src/*.rs").unwrap();
        assert!(glob.matches(root, Path::new("/r/src/c.rs")));
        assert!(!glob.matches(root, Path::new("/r/src/deep/c.rs")));
        let glob = FileGlob::new("src/**/*.rs").unwrap();
        assert!(glob.matches(root, Path::new("/r/src/deep/c.rs")));
        assert!(glob.matches(root, Path::new("/r/src/c.rs")));
    }

    #[test]
    fn an_invalid_glob_is_an_error() {
        assert!(FileGlob::new("a[").unwrap_err().contains("invalid glob"));
    }
}
