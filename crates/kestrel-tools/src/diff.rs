//! Unified diffs of a file change, for `FileChange::diff` (UIs and checkpoints).

use crate::ChangeText;
use similar::TextDiff;

/// Beyond this many bytes on either side a diff is not computed: the change is still
/// reported, without its diff, rather than spending seconds on a generated file.
const MAX_DIFF_INPUT: usize = 4 * 1024 * 1024;

/// A unified diff from `old` to `new` with `a/PATH` and `b/PATH` headers (`/dev/null`
/// for a created file); `None` when there is no change or the text is too large.
pub(crate) fn unified(path: &str, old: Option<&str>, new: &str) -> Option<String> {
    let before = old.unwrap_or("");
    if before == new && old.is_some() {
        return None;
    }
    if before.len() > MAX_DIFF_INPUT || new.len() > MAX_DIFF_INPUT {
        return None;
    }
    let old_header = if old.is_some() { format!("a/{path}") } else { "/dev/null".to_string() };
    let new_header = format!("b/{path}");
    let diff = TextDiff::from_lines(before, new);
    let text = diff.unified_diff().context_radius(3).header(&old_header, &new_header).to_string();
    Some(text)
}

/// Both sides of a change for [`crate::FileChange::text`]; `None` when either side is
/// too large to carry (the same bound as for diffs).
pub(crate) fn change_text(before: Option<&str>, after: Option<&str>) -> Option<ChangeText> {
    let too_large = |side: Option<&str>| side.is_some_and(|text| text.len() > MAX_DIFF_INPUT);
    if too_large(before) || too_large(after) {
        return None;
    }
    Some(ChangeText { before: before.map(str::to_string), after: after.map(str::to_string) })
}
