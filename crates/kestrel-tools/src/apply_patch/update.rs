//! Applies the hunks of one `*** Update File` to the file's text, in memory.
//!
//! Hunks are placed in order, each searched forward from the end of the previous
//! one. `@@ header` lines are found first (each header the first occurrence after the
//! one before it); the hunk is then looked for in the block the last header opens (its
//! indented lines and closing line), and failing that anywhere after the header. When
//! the first header occurs several times, every occurrence is tried: the hunk fitting
//! the blocks of two of them is an error, as are two equally good places in the first
//! scope that has any. Context lines keep the
//! file's own text and line endings; added lines get the file's newline.

use super::error::{HunkFailure, PatchError};
use super::matcher::{
    LineMatch, MatchLevel, closest_partial, find_every_line, find_first_line, find_lines,
};
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
    let anchors = anchors(lines, &hunk.headers, cursor)?;
    let old = hunk.old_lines();
    if old.is_empty() {
        // Nothing to find: after the header, or else at the end of the file.
        return match anchors.as_slice() {
            [] => Ok(lines.len()),
            _ if hunk.end_of_file => Ok(lines.len()),
            [anchor] => Ok(anchor + 1),
            [..] => Err(ambiguous_header(&hunk.headers, &anchors)),
        };
    }
    let anchor = anchors.first().copied();
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
    // The blocks of every place the headers name, then anything after the first one.
    let mut in_blocks = Vec::new();
    for block in anchors.iter().filter_map(|&header| block(lines, header)) {
        match find_lines(lines, &old, block) {
            LineMatch::Unique { start, .. } if !in_blocks.contains(&start) => in_blocks.push(start),
            LineMatch::Unique { .. } | LineMatch::NotFound => {}
            LineMatch::Ambiguous { starts, .. } => return Err(ambiguous(&old, starts)),
        }
    }
    match in_blocks.as_slice() {
        [start] => return Ok(*start),
        [] => {}
        [..] => return Err(ambiguous(&old, in_blocks)),
    }
    match find_lines(lines, &old, floor..lines.len()) {
        LineMatch::Unique { start, .. } => return Ok(start),
        LineMatch::Ambiguous { starts, .. } => return Err(ambiguous(&old, starts)),
        LineMatch::NotFound => {}
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

/// The lines the header chain can stand for: each occurrence of the first header after
/// `cursor`, each followed by the first occurrence of every later header. Empty when
/// there are no headers.
fn anchors(lines: &[&str], headers: &[String], cursor: usize) -> Result<Vec<usize>, HunkFailure> {
    let Some((first, later)) = headers.split_first() else {
        return Ok(Vec::new());
    };
    let starts = find_every_line(lines, first, cursor..lines.len());
    if starts.is_empty() {
        return Err(HunkFailure::HeaderNotFound { header: first.clone() });
    }
    let mut anchors = Vec::with_capacity(starts.len());
    let mut missing = None;
    for start in starts {
        let mut at = Some(start);
        for header in later {
            at = at.and_then(|found| find_first_line(lines, header, found + 1..lines.len()));
            if at.is_none() {
                missing.get_or_insert(header);
                break;
            }
        }
        if let Some(found) = at
            && !anchors.contains(&found)
        {
            anchors.push(found);
        }
    }
    match (anchors.is_empty(), missing) {
        (true, Some(header)) => Err(HunkFailure::HeaderNotFound { header: header.clone() }),
        _ => Ok(anchors),
    }
}

fn ambiguous(old: &[&str], starts: Vec<usize>) -> HunkFailure {
    HunkFailure::Ambiguous {
        expected: owned(old),
        lines: starts.into_iter().map(|start| start + 1).collect(),
    }
}

/// A pure addition under a header that occurs at several places.
fn ambiguous_header(headers: &[String], anchors: &[usize]) -> HunkFailure {
    HunkFailure::Ambiguous {
        expected: headers.iter().map(|header| format!("@@ {header}")).collect(),
        lines: anchors.iter().map(|anchor| anchor + 1).collect(),
    }
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
    fn a_header_that_occurs_twice_is_ambiguous_when_both_blocks_fit() {
        let original = "impl A {\n    fn f() {}\n}\nimpl A {\n    fn f() {}\n}\n";
        let (hunk, both) = failure(original, "@@ impl A {\n-    fn f() {}\n+    fn g() {}");
        assert_eq!(hunk, 1);
        assert_eq!(
            both,
            HunkFailure::Ambiguous { expected: vec!["    fn f() {}".into()], lines: vec![2, 5] }
        );
        // Only one of the blocks holds the lines: that one, even if it is not the first.
        let original = "impl A {\n    fn f() {}\n}\nimpl A {\n    fn h() {}\n}\n";
        assert_eq!(
            apply(original, "@@ impl A {\n-    fn h() {}\n+    fn g() {}").unwrap(),
            "impl A {\n    fn f() {}\n}\nimpl A {\n    fn g() {}\n}\n"
        );
        // An addition under a repeated header cannot be placed.
        let (_, repeated) = failure("h\nx\nh\n", "@@ h\n+y");
        assert!(matches!(repeated, HunkFailure::Ambiguous { ref lines, .. } if lines == &[1, 3]));
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
