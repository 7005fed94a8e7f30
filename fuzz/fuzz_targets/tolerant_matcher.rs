//! A file and a needle (split at the first NUL, range from the first two bytes):
//! `find_lines` agrees with a brute-force search at every level, and `update_text`
//! never panics on hunks parsed from the needle text.
#![no_main]

use kestrel_tools::apply_patch::{
    FileOperation, LineMatch, MatchLevel, find_lines, parse_patch, update_text,
};
use libfuzzer_sys::fuzz_target;

fn matches_at(haystack: &[&str], needle: &[&str], start: usize, level: MatchLevel) -> bool {
    haystack[start..start + needle.len()]
        .iter()
        .zip(needle)
        .all(|(file, patch)| level.lines_equal(file, patch))
}

fn brute_force(haystack: &[&str], needle: &[&str], from: usize, to: usize) -> LineMatch {
    let to = to.min(haystack.len());
    let from = from.min(to);
    if needle.is_empty() {
        return LineMatch::Unique { start: from, level: MatchLevel::Exact };
    }
    for level in MatchLevel::ALL {
        let starts: Vec<usize> = (from..to)
            .filter(|&start| start + needle.len() <= to)
            .filter(|&start| matches_at(haystack, needle, start, level))
            .collect();
        match starts.len() {
            0 => continue,
            1 => return LineMatch::Unique { start: starts[0], level },
            _ => return LineMatch::Ambiguous { starts, level },
        }
    }
    LineMatch::NotFound
}

fuzz_target!(|data: &[u8]| {
    let Some((&[from, to], rest)) = data.split_first_chunk::<2>().map(|(a, b)| (a, b)) else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let (file, needle_text) = text.split_once('\0').unwrap_or((text, ""));
    let haystack: Vec<&str> = file.lines().collect();
    let needle: Vec<&str> = needle_text.lines().collect();
    let (from, to) = (usize::from(from % 64), usize::from(to % 64));
    assert_eq!(find_lines(&haystack, &needle, from..to), brute_force(&haystack, &needle, from, to));

    let patch = format!("*** Begin Patch\n*** Update File: f\n{needle_text}\n*** End Patch");
    if let Ok(mut parsed) = parse_patch(&patch)
        && let FileOperation::Update { hunks, .. } = parsed.operations.remove(0)
    {
        let _ = update_text("f", file, &hunks);
    }
});
