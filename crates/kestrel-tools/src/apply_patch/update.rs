//! Applies the hunks of one `*** Update File` to the file's text, in memory.
//!
//! Hunks are placed in order, each searched forward from the end of the previous
//! one. `@@ header` lines are found first (the first occurrence after the cursor);
//! the hunk is then looked for in the block the last header opens (its indented
//! lines and closing line), and failing that anywhere after the header. Two equally
//! good places in the first scope that has any are an error. Context lines keep the
//! file's own text and line endings; added lines get the file's newline.

use super::error::{HunkFailure, PatchError};
use super::matcher::{LineMatch, MatchLevel, closest_partial, find_first_line, find_lines};
use super::parser::{Hunk, HunkLine};
use super::text::{TextFile, TextLine};
use std::borrow::Cow;
use std::ops::Range;

/// Applies `hunks` to `original` and returns the new text. `path` only names the
/// file in errors. Fails with [`PatchError::Hunk`] for the first hunk whose header
/// or lines are not found, or are found at several places equally well.
pub fn update_text(path: &str, original: &str, hunks: &[Hunk]) -> Result<String, PatchError> {
    let file = TextFile::parse(original);
    let lines: Vec<&str> = file.lines.iter().map(|line| line.text.as_ref()).collect();
    let mut placements = Vec::with_capacity(hunks.len());
    let mut cursor = 0;
    for (index, hunk) in hunks.iter().enumerate() {
        let start = place(&lines, hunk, cursor).map_err(|failure| PatchError::Hunk {
            path: path.to_string(),
            hunk: index + 1,
            failure,
        })?;
        let appended = hunk.headers.is_empty() && hunk.old_lines().is_empty();
        // An unanchored addition goes to the end without moving the cursor, so the
        // hunks after it are still found (Codex places them the same way).
        if !appended {
            cursor = start + hunk.old_lines().len();
        }
        placements.push((start, hunk));
    }
    placements.sort_by_key(|(start, _)| *start);

    let mut new_lines: Vec<TextLine<'_>> = Vec::with_capacity(file.lines.len());
    let mut next = 0;
    for (start, hunk) in placements {
        new_lines.extend(file.lines[next..start].iter().cloned());
        next = start;
        for line in &hunk.lines {
            match line {
                HunkLine::Context(_) => {
                    new_lines.push(file.lines[next].clone());
                    next += 1;
                }
                HunkLine::Remove(_) => next += 1,
                HunkLine::Add(text) => new_lines
                    .push(TextLine { text: Cow::Owned(text.clone()), ending: file.newline }),
            }
        }
    }
    new_lines.extend(file.lines[next..].iter().cloned());
    Ok(TextFile { lines: new_lines, ..file }.render())
}

/// Where the hunk's old lines start (for a pure addition: where its lines go).
fn place(lines: &[&str], hunk: &Hunk, cursor: usize) -> Result<usize, HunkFailure> {
    let mut after = cursor;
    let mut anchor = None;
    for header in &hunk.headers {
        let Some(found) = find_first_line(lines, header, after..lines.len()) else {
            return Err(HunkFailure::HeaderNotFound { header: header.clone() });
        };
        anchor = Some(found);
        after = found + 1;
    }
    let old = hunk.old_lines();
    if old.is_empty() {
        // Nothing to find: after the header, or else at the end of the file.
        return Ok(match anchor {
            Some(_) if !hunk.end_of_file => after,
            Some(_) | None => lines.len(),
        });
    }
    let floor = anchor.unwrap_or(cursor);
    if hunk.end_of_file
        && let Some(start) = lines.len().checked_sub(old.len())
        && start >= floor
        && MatchLevel::ALL.iter().any(|level| {
            lines[start..].iter().zip(&old).all(|(file, patch)| level.lines_equal(file, patch))
        })
    {
        return Ok(start);
    }
    let block = anchor.and_then(|header| block(lines, header));
    let rest = floor..lines.len();
    for scope in block.into_iter().chain(std::iter::once(rest)) {
        match find_lines(lines, &old, scope) {
            LineMatch::Unique { start, .. } => return Ok(start),
            LineMatch::Ambiguous { starts, .. } => {
                return Err(HunkFailure::Ambiguous {
                    expected: owned(&old),
                    lines: starts.into_iter().map(|start| start + 1).collect(),
                });
            }
            LineMatch::NotFound => {}
        }
    }
    let closest = closest_partial(lines, &old, floor..lines.len()).map(|(start, matched, differ)| {
        let line = start + differ;
        let found = lines.get(line).map_or("the end of the file".to_string(), |text| {
            format!("`{text}`")
        });
        let wanted = old.get(differ).copied().unwrap_or_default();
        format!(
            "The closest place is line {} ({matched} of {} lines match); at line {} the file has \
             {found} where the patch expects `{wanted}`.",
            start + 1,
            old.len(),
            line + 1,
        )
    });
    Err(HunkFailure::ContextNotFound { expected: owned(&old), closest })
}

/// The block a header line opens: the header, the lines indented deeper than it and
/// a closing bracket or `end` line at its own depth. `None` when nothing is nested.
fn block(lines: &[&str], header: usize) -> Option<Range<usize>> {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let depth = indent(lines.get(header)?);
    let mut nested = false;
    for (index, line) in lines.iter().enumerate().skip(header + 1) {
        if line.trim().is_empty() {
            continue;
        }
        if indent(line) > depth {
            nested = true;
            continue;
        }
        if !nested {
            return None;
        }
        let trimmed = line.trim_start();
        let closes = trimmed.starts_with(['}', ')', ']']) || trimmed.starts_with("end");
        return Some(header..if closes { index + 1 } else { index });
    }
    nested.then_some(header..lines.len())
}

fn owned(lines: &[&str]) -> Vec<String> {
    lines.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply_patch::parser::FileOperation;
    use crate::apply_patch::parser::parse_patch;

    fn hunks(body: &str) -> Vec<Hunk> {
        let text = format!("*** Begin Patch\n*** Update File: f\n{body}\n*** End Patch");
        match parse_patch(&text).unwrap().operations.remove(0) {
            FileOperation::Update { hunks, .. } => hunks,
            other => panic!("{other:?}"),
        }
    }

    fn apply(original: &str, body: &str) -> Result<String, PatchError> {
        update_text("f", original, &hunks(body))
    }

    fn failure(original: &str, body: &str) -> (usize, HunkFailure) {
        match apply(original, body) {
            Err(PatchError::Hunk { hunk, failure, .. }) => (hunk, failure),
            other => panic!("expected a hunk failure, got {other:?}"),
        }
    }

    #[test]
    fn replaces_lines_and_keeps_the_rest() {
        assert_eq!(apply("a\nb\nc\n", "@@\n a\n-b\n+B\n c").unwrap(), "a\nB\nc\n");
    }

    #[test]
    fn crlf_files_stay_crlf_and_untouched_endings_are_kept() {
        assert_eq!(
            apply("a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B\n+B2").unwrap(),
            "a\r\nB\r\nB2\r\nc\r\n"
        );
        assert_eq!(apply("a\r\nb\nc\r\nd\r\n", "@@\n-d\n+D").unwrap(), "a\r\nb\nc\r\nD\r\n");
    }

    #[test]
    fn a_missing_final_newline_is_kept_unless_the_last_line_changes() {
        assert_eq!(apply("a\nb\nc", "@@\n-a\n+A").unwrap(), "A\nb\nc");
        assert_eq!(apply("a\nb", "@@\n-b\n+B").unwrap(), "a\nB\n");
        assert_eq!(apply("a", "@@\n+z").unwrap(), "a\nz\n");
    }

    #[test]
    fn tolerant_matches_keep_the_files_context_lines() {
        assert_eq!(
            apply("    keep  \n\told\n", "@@\n keep\n-    old\n+\tnew").unwrap(),
            "    keep  \n\tnew\n"
        );
        assert_eq!(
            apply("x = \u{201C}a\u{201D} \u{2013} b\n", "@@\n-x = \"a\" - b\n+x = 1").unwrap(),
            "x = 1\n"
        );
    }

    #[test]
    fn hunks_are_searched_forward_from_the_previous_one() {
        let original = "v = 1\nsep\nv = 1\n";
        assert_eq!(
            apply(original, "@@\n-v = 1\n+v = 2\n sep\n@@\n-v = 1\n+v = 3").unwrap(),
            "v = 2\nsep\nv = 3\n"
        );
        let (hunk, failure) = failure(original, "@@\n sep\n@@\n-sep\n+x");
        assert_eq!(hunk, 2);
        assert!(matches!(failure, HunkFailure::ContextNotFound { .. }), "{failure:?}");
    }

    #[test]
    fn two_equally_good_places_are_an_error_naming_them() {
        let (hunk, failure) = failure("x\ny\nx\n", "@@\n-x\n+z");
        assert_eq!(hunk, 1);
        assert_eq!(
            failure,
            HunkFailure::Ambiguous { expected: vec!["x".into()], lines: vec![1, 3] }
        );
        let message = failure.to_string();
        assert!(message.contains("lines 1, 3") && message.contains("@@"), "{message}");
    }

    #[test]
    fn an_exact_match_beats_a_tolerant_one_elsewhere() {
        assert_eq!(apply("x  \nx\n", "@@\n-x\n+z").unwrap(), "x  \nz\n");
    }

    #[test]
    fn a_header_scopes_the_hunk_to_its_block() {
        let original = "fn a() {\n    ok()\n}\nfn b() {\n    ok()\n}\n";
        assert_eq!(
            apply(original, "@@ fn b() {\n-    ok()\n+    done()").unwrap(),
            "fn a() {\n    ok()\n}\nfn b() {\n    done()\n}\n"
        );
        // Found after the header when the block does not hold it.
        assert_eq!(apply("h\n  x\ny\n", "@@ h\n-y\n+z").unwrap(), "h\n  x\nz\n");
        let (_, failure) = failure(original, "@@ fn c() {\n-    ok()\n+    no()");
        assert_eq!(failure, HunkFailure::HeaderNotFound { header: "fn c() {".into() });
    }

    #[test]
    fn stacked_headers_narrow_step_by_step() {
        let original = "class A:\n    def f(self):\n        return 1\nclass B:\n    def f(self):\n        return 1\n";
        assert_eq!(
            apply(
                original,
                "@@ class B:\n@@     def f(self):\n-        return 1\n+        return 2"
            )
            .unwrap(),
            "class A:\n    def f(self):\n        return 1\nclass B:\n    def f(self):\n        return 2\n"
        );
    }

    #[test]
    fn pure_additions_go_after_the_header_or_at_the_end() {
        assert_eq!(apply("a\nb\n", "@@\n+c").unwrap(), "a\nb\nc\n");
        assert_eq!(apply("a\nb\n", "@@ a\n+a2").unwrap(), "a\na2\nb\n");
        assert_eq!(apply("", "@@\n+first").unwrap(), "first\n");
    }

    #[test]
    fn an_unanchored_addition_does_not_hide_the_hunks_after_it() {
        assert_eq!(apply("a\nb\nc\n", "@@\n+z\n@@\n-b\n+B").unwrap(), "a\nB\nc\nz\n");
        assert_eq!(apply("a\nb\n", "@@\n+y\n@@\n-b\n+B\n@@\n+z").unwrap(), "a\nB\ny\nz\n");
    }

    #[test]
    fn end_of_file_prefers_the_last_lines() {
        assert_eq!(apply("x\ny\nx\n", "@@\n-x\n+z\n*** End of File").unwrap(), "x\ny\nz\n");
    }

    #[test]
    fn missing_context_shows_the_expected_lines_and_the_closest_place() {
        let (hunk, failure) = failure("one\ntwo\nthree\n", "@@\n one\n-tw0\n three");
        assert_eq!(hunk, 1);
        let message = failure.to_string();
        assert!(message.contains("    tw0"), "{message}");
        assert!(message.contains("line 1 (2 of 3 lines match)"), "{message}");
        assert!(message.contains("line 2 the file has `two`"), "{message}");
    }

    #[test]
    fn a_byte_order_mark_does_not_hide_the_first_line() {
        assert_eq!(apply("\u{FEFF}a\nb\n", "@@\n-a\n+A").unwrap(), "\u{FEFF}A\nb\n");
    }
}
