//! Project instructions (ARCHITECTURE §7): `AGENTS.md` from the repository root down to
//! the cwd (nearer files come later, so they win), `CLAUDE.md` in a directory that has no
//! `AGENTS.md`, and the user's `$KESTREL_HOME/AGENTS.md` first of all.

use std::path::{Path, PathBuf};

/// An instruction file and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct InstructionFile {
    pub path: PathBuf,
    pub text: String,
}

/// The instruction files that apply in `cwd`, outermost first. Unreadable files are skipped.
pub fn find_instructions(user_agents_md: &Path, cwd: &Path) -> Vec<InstructionFile> {
    let mut files = Vec::new();
    if let Some(file) = read(user_agents_md) {
        files.push(file);
    }
    let root = repository_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
    let mut dirs: Vec<&Path> = cwd.ancestors().take_while(|dir| dir.starts_with(&root)).collect();
    dirs.reverse();
    for dir in dirs {
        if let Some(file) = read(&dir.join("AGENTS.md")).or_else(|| read(&dir.join("CLAUDE.md"))) {
            files.push(file);
        }
    }
    files
}

/// The nearest ancestor of `cwd` (itself included) that holds `.git`.
pub fn repository_root(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors().find(|dir| dir.join(".git").exists()).map(Path::to_path_buf)
}

fn read(path: &Path) -> Option<InstructionFile> {
    let text = std::fs::read_to_string(path).ok()?;
    if text.trim().is_empty() {
        return None;
    }
    Some(InstructionFile { path: path.to_path_buf(), text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearer_files_come_last_and_claude_md_is_a_fallback() {
        let home = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(home.path().join("AGENTS.md"), "user").unwrap();
        std::fs::write(root.join("AGENTS.md"), "root").unwrap();
        std::fs::write(root.join("CLAUDE.md"), "ignored: AGENTS.md exists here").unwrap();
        std::fs::write(root.join("a/CLAUDE.md"), "a").unwrap();
        std::fs::write(root.join("a/b/AGENTS.md"), "b").unwrap();
        let found = find_instructions(&home.path().join("AGENTS.md"), &root.join("a/b"));
        let texts: Vec<&str> = found.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["user", "root", "a", "b"]);
    }

    #[test]
    fn outside_a_repository_only_the_cwd_counts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "parent").unwrap();
        std::fs::write(dir.path().join("sub/AGENTS.md"), "here").unwrap();
        let found = find_instructions(&dir.path().join("none"), &dir.path().join("sub"));
        let texts: Vec<&str> = found.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["here"]);
    }
}
