//! Finds a hunk's lines in a file: exactly first, then ignoring trailing whitespace,
//! then surrounding whitespace, then typographic punctuation. The first level with
//! any match decides; two matches at that level are reported, never guessed between.

use std::borrow::Cow;
use std::ops::Range;

/// How loosely two lines are compared, from strictest to most tolerant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchLevel {
    /// Byte for byte.
    Exact,
    /// Ignoring whitespace at the end of lines.
    TrailingWhitespace,
    /// Ignoring whitespace at both ends (indentation).
    SurroundingWhitespace,
    /// Also treating Unicode dashes, quotes and odd spaces as their ASCII forms.
    Punctuation,
}

impl MatchLevel {
    /// Every level, strictest first: the order they are tried in.
    pub const ALL: [MatchLevel; 4] = [
        MatchLevel::Exact,
        MatchLevel::TrailingWhitespace,
        MatchLevel::SurroundingWhitespace,
        MatchLevel::Punctuation,
    ];

    /// The form of `line` that this level compares.
    pub fn normalize(self, line: &str) -> Cow<'_, str> {
        match self {
            MatchLevel::Exact => Cow::Borrowed(line),
            MatchLevel::TrailingWhitespace => Cow::Borrowed(line.trim_end()),
            MatchLevel::SurroundingWhitespace => Cow::Borrowed(line.trim()),
            MatchLevel::Punctuation => ascii_punctuation(line),
        }
    }

    /// Whether two lines are equal at this level.
    pub fn lines_equal(self, file_line: &str, patch_line: &str) -> bool {
        self.normalize(file_line) == self.normalize(patch_line)
    }
}

/// Where a block of lines was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineMatch {
    NotFound,
    /// At exactly one place; `start` is the 0-based index of its first line.
    Unique {
        start: usize,
        level: MatchLevel,
    },
    /// At several places equally well (ascending 0-based starts).
    Ambiguous {
        starts: Vec<usize>,
        level: MatchLevel,
    },
}

/// Finds `needle` as consecutive lines of `haystack` that lie wholly inside `range`
/// (clamped to the haystack), at the strictest level that matches anywhere. An empty
/// needle matches at the start of the range. Never panics, whatever the inputs.
pub fn find_lines(haystack: &[&str], needle: &[&str], range: Range<usize>) -> LineMatch {
    let end = range.end.min(haystack.len());
    let start = range.start.min(end);
    if needle.is_empty() {
        return LineMatch::Unique { start, level: MatchLevel::Exact };
    }
    if needle.len() > end - start {
        return LineMatch::NotFound;
    }
    for level in MatchLevel::ALL {
        let starts = matching_starts(&haystack[start..end], needle, level);
        match starts.as_slice() {
            [] => continue,
            [only] => return LineMatch::Unique { start: start + only, level },
            [..] => {
                let starts = starts.into_iter().map(|offset| start + offset).collect();
                return LineMatch::Ambiguous { starts, level };
            }
        }
    }
    LineMatch::NotFound
}

/// The first place `line` occurs in `haystack[range]`, at the strictest level that
/// finds it anywhere (an `@@` header is the first such line after the cursor).
pub(crate) fn find_first_line(haystack: &[&str], line: &str, range: Range<usize>) -> Option<usize> {
    find_every_line(haystack, line, range).into_iter().next()
}

/// Every place `line` occurs in `haystack[range]`, at the strictest level that finds
/// it anywhere; empty when it occurs nowhere.
pub(crate) fn find_every_line(haystack: &[&str], line: &str, range: Range<usize>) -> Vec<usize> {
    let end = range.end.min(haystack.len());
    let start = range.start.min(end);
    for level in MatchLevel::ALL {
        let wanted = level.normalize(line);
        let found: Vec<usize> = haystack[start..end]
            .iter()
            .enumerate()
            .filter(|(_, candidate)| level.normalize(candidate) == wanted)
            .map(|(offset, _)| start + offset)
            .collect();
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

fn matching_starts(haystack: &[&str], needle: &[&str], level: MatchLevel) -> Vec<usize> {
    let haystack: Vec<Cow<'_, str>> = haystack.iter().map(|line| level.normalize(line)).collect();
    let needle: Vec<Cow<'_, str>> = needle.iter().map(|line| level.normalize(line)).collect();
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(|(_, window)| *window == needle.as_slice())
        .map(|(offset, _)| offset)
        .collect()
}

/// The place in `haystack[range]` where the most lines of `needle` match at the most
/// tolerant level, as (start, matched lines, index in needle of the first mismatch).
/// Only for error hints; gives up on inputs too large to scan cheaply.
pub(crate) fn closest_partial(
    haystack: &[&str],
    needle: &[&str],
    range: Range<usize>,
) -> Option<(usize, usize, usize)> {
    const MAX_COMPARISONS: usize = 4_000_000;
    let end = range.end.min(haystack.len());
    let start = range.start.min(end);
    let level = MatchLevel::Punctuation;
    if needle.is_empty() || (end - start).saturating_mul(needle.len()) > MAX_COMPARISONS {
        return None;
    }
    let haystack: Vec<Cow<'_, str>> =
        haystack[start..end].iter().map(|line| level.normalize(line)).collect();
    let needle: Vec<Cow<'_, str>> = needle.iter().map(|line| level.normalize(line)).collect();
    let mut best: Option<(usize, usize, usize)> = None;
    for offset in 0..haystack.len() {
        let window = &haystack[offset..haystack.len().min(offset + needle.len())];
        let matched = window.iter().zip(&needle).filter(|(a, b)| a == b).count();
        if matched * 2 < needle.len().max(2) || best.is_some_and(|(_, most, _)| matched <= most) {
            continue;
        }
        let mismatch = window.iter().zip(&needle).position(|(a, b)| a != b).unwrap_or(window.len());
        best = Some((start + offset, matched, mismatch));
    }
    best
}

/// Trims and maps typographic characters to ASCII; borrows when nothing changes.
fn ascii_punctuation(line: &str) -> Cow<'_, str> {
    let line = line.trim();
    if line.is_ascii() {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' | '\u{FF0D}' => {
                out.push('-')
            }
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => out.push('\''),
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => out.push('"'),
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => {
                out.push(' ')
            }
            '\u{2026}' => out.push_str("..."),
            '\u{200B}' | '\u{2060}' | '\u{FEFF}' => {}
            other => out.push(other),
        }
    }
    // Mapped spaces at the ends count as surrounding whitespace too.
    match out.trim() {
        trimmed if trimmed.len() == out.len() => Cow::Owned(out),
        trimmed => Cow::Owned(trimmed.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_matches_win_over_tolerant_ones() {
        let file = ["a ", "a", "b"];
        assert_eq!(
            find_lines(&file, &["a"], 0..3),
            LineMatch::Unique { start: 1, level: MatchLevel::Exact }
        );
    }

    #[test]
    fn each_level_tolerates_more() {
        assert_eq!(
            find_lines(&["x", "let a = 1;   "], &["let a = 1;"], 0..2),
            LineMatch::Unique { start: 1, level: MatchLevel::TrailingWhitespace }
        );
        assert_eq!(
            find_lines(&["\t\tlet a = 1;"], &["    let a = 1;"], 0..1),
            LineMatch::Unique { start: 0, level: MatchLevel::SurroundingWhitespace }
        );
        assert_eq!(
            find_lines(
                &["say \u{201C}hi\u{201D} \u{2014} it\u{2019}s\u{00A0}fine\u{2026}"],
                &["say \"hi\" - it's fine..."],
                0..1
            ),
            LineMatch::Unique { start: 0, level: MatchLevel::Punctuation }
        );
        assert_eq!(find_lines(&["abc"], &["abd"], 0..1), LineMatch::NotFound);
    }

    #[test]
    fn two_equal_places_are_ambiguous() {
        let file = ["fn a() {", "}", "fn b() {", "}"];
        assert_eq!(
            find_lines(&file, &["}"], 0..4),
            LineMatch::Ambiguous { starts: vec![1, 3], level: MatchLevel::Exact }
        );
        assert_eq!(
            find_lines(&file, &["}"], 2..4),
            LineMatch::Unique { start: 3, level: MatchLevel::Exact }
        );
    }

    #[test]
    fn the_range_bounds_the_whole_match_and_is_clamped() {
        let file = ["a", "b", "c"];
        assert_eq!(find_lines(&file, &["b", "c"], 0..2), LineMatch::NotFound);
        assert_eq!(
            find_lines(&file, &["b", "c"], 1..99),
            LineMatch::Unique { start: 1, level: MatchLevel::Exact }
        );
        let (from, to) = (7, 3);
        assert_eq!(find_lines(&file, &["a"], from..to), LineMatch::NotFound);
        assert_eq!(
            find_lines(&file, &[], 5..9),
            LineMatch::Unique { start: 3, level: MatchLevel::Exact }
        );
    }

    #[test]
    fn headers_take_the_first_occurrence_at_the_best_level() {
        let file = ["  fn f()", "fn f()", "fn f()"];
        assert_eq!(find_first_line(&file, "fn f()", 0..3), Some(1));
        assert_eq!(find_first_line(&file, "fn g()", 0..3), None);
    }

    #[test]
    fn the_closest_partial_match_points_at_the_first_difference() {
        let file = ["a", "b", "c", "d"];
        assert_eq!(closest_partial(&file, &["b", "x", "d"], 0..4), Some((1, 2, 1)));
        assert_eq!(closest_partial(&file, &["x", "y"], 0..4), None);
    }
}
