//! Plain-text snapshot files for screens: `assert_snapshot(dir, name, text)` compares
//! `text` with `dir/name.snap`. With `KESTREL_UPDATE_SNAPSHOTS=1` the file is written
//! instead; a missing or different snapshot fails the test, and the new text is left in
//! `name.snap.new` for review.

use std::path::Path;

/// Set to `1` to (re)write snapshot files instead of comparing.
pub const UPDATE_SNAPSHOTS_ENV: &str = "KESTREL_UPDATE_SNAPSHOTS";

/// Compares `actual` with the snapshot `dir/name.snap` (trailing spaces of each line and
/// trailing blank lines are not significant). Panics with both texts on a difference.
pub fn assert_snapshot(dir: &Path, name: &str, actual: &str) {
    let actual = normalise(actual);
    let path = dir.join(format!("{name}.snap"));
    let new_path = dir.join(format!("{name}.snap.new"));
    if std::env::var(UPDATE_SNAPSHOTS_ENV).is_ok_and(|value| value == "1") {
        let _ = std::fs::create_dir_all(dir);
        if let Err(error) = std::fs::write(&path, &actual) {
            panic!("cannot write snapshot {}: {error}", path.display());
        }
        let _ = std::fs::remove_file(&new_path);
        return;
    }
    let expected = match std::fs::read_to_string(&path) {
        Ok(text) => normalise(&text),
        Err(_) => {
            let _ = std::fs::create_dir_all(dir);
            let _ = std::fs::write(&new_path, &actual);
            panic!(
                "no snapshot {} yet; the screen was written to {} (rename it after review, or run with {UPDATE_SNAPSHOTS_ENV}=1):\n{actual}",
                path.display(),
                new_path.display()
            );
        }
    };
    if expected != actual {
        let _ = std::fs::write(&new_path, &actual);
        let diff = line_diff(&expected, &actual);
        panic!(
            "snapshot {} differs (new screen in {}; {UPDATE_SNAPSHOTS_ENV}=1 accepts it):\n{diff}",
            path.display(),
            new_path.display()
        );
    }
    let _ = std::fs::remove_file(&new_path);
}

fn normalise(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let end = lines.iter().rposition(|line| !line.is_empty()).map_or(0, |last| last + 1);
    let mut out = lines[..end].join("\n");
    out.push('\n');
    out
}

/// A line diff of the two texts (`-` expected, `+` actual).
fn line_diff(expected: &str, actual: &str) -> String {
    let diff = similar::TextDiff::from_lines(expected, actual);
    let mut out = String::new();
    for change in diff.iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Equal => ' ',
            similar::ChangeTag::Delete => '-',
            similar::ChangeTag::Insert => '+',
        };
        out.push(sign);
        out.push(' ');
        out.push_str(change.value().trim_end_matches('\n'));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_ignore_trailing_space_and_report_differences() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.snap"), "one\ntwo\n").unwrap();
        assert_snapshot(dir.path(), "a", "one  \ntwo\n\n\n");
        let failed = std::panic::catch_unwind(|| assert_snapshot(dir.path(), "a", "one\n2\n"));
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(dir.path().join("a.snap.new")).unwrap(), "one\n2\n");
        let missing = std::panic::catch_unwind(|| assert_snapshot(dir.path(), "b", "x"));
        assert!(missing.is_err());
        assert!(dir.path().join("b.snap.new").exists());
    }
}
