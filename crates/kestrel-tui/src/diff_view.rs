//! File edits as coloured unified diffs: a header with the path and the counts of added
//! and removed lines, then hunks with line numbers, `+` lines green, `-` lines red.

use crate::theme;
use crate::wrap::hard_wrap;
use ratatui::text::{Line, Span};
use similar::{ChangeTag, TextDiff};
use std::path::Path;

/// Lines of context around each change.
const CONTEXT: usize = 2;

/// The diff of one file, old text absent for a new file.
pub(crate) fn file_diff(
    path: &Path,
    old: Option<&str>,
    new: &str,
    cwd: &Path,
    width: usize,
) -> Vec<Line<'static>> {
    let shown = path.strip_prefix(cwd).unwrap_or(path).display().to_string();
    let old_text = old.unwrap_or_default();
    let diff = TextDiff::from_lines(old_text, new);
    let mut added = 0;
    let mut removed = 0;
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let verb = if old.is_none() { "created" } else { "edited" };
    let mut lines = vec![Line::from(vec![
        Span::styled(shown, theme::bold()),
        Span::styled(format!(" ({verb} "), theme::dim()),
        Span::styled(format!("+{added}"), theme::added()),
        Span::styled(" ", theme::dim()),
        Span::styled(format!("-{removed}"), theme::removed()),
        Span::styled(")", theme::dim()),
    ])];
    let number_width =
        diff.old_slices().len().max(diff.new_slices().len()).to_string().len().max(2);
    for (index, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        if index > 0 {
            lines.push(Line::from(Span::styled(format!("{:>number_width$} ⋮", ""), theme::dim())));
        }
        for op in group {
            for change in diff.iter_changes(op) {
                let (sign, style, number) = match change.tag() {
                    ChangeTag::Equal => (' ', ratatui::style::Style::default(), change.new_index()),
                    ChangeTag::Insert => ('+', theme::added(), change.new_index()),
                    ChangeTag::Delete => ('-', theme::removed(), change.old_index()),
                };
                let number = number.map(|number| (number + 1).to_string()).unwrap_or_default();
                let text = change.value().trim_end_matches(['\n', '\r']).replace('\t', "    ");
                let prefix = vec![
                    Span::styled(format!("{number:>number_width$} "), theme::dim()),
                    Span::styled(sign.to_string(), style),
                ];
                let rest = vec![Span::raw(" ".repeat(number_width + 2))];
                lines.extend(hard_wrap(vec![Span::styled(text, style)], width, &prefix, &rest));
            }
        }
    }
    lines
}

/// Lines of a unified diff produced elsewhere (`git diff`, a patch): `+`/`-` coloured,
/// hunk headers dim.
pub(crate) fn colour_patch(text: &str, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for line in text.lines() {
        let style = if line.starts_with("+++") || line.starts_with("---") {
            theme::bold()
        } else if line.starts_with('+') || line.starts_with("*** Add File") {
            theme::added()
        } else if line.starts_with('-') || line.starts_with("*** Delete File") {
            theme::removed()
        } else if line.starts_with("@@") || line.starts_with("diff ") || line.starts_with("***") {
            theme::accent()
        } else {
            ratatui::style::Style::default()
        };
        let text = line.replace('\t', "    ");
        lines.extend(hard_wrap(vec![Span::styled(text, style)], width, &[], &[]));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|line| line.spans.iter().map(|span| span.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn an_edit_shows_counts_numbers_and_signs() {
        let old = "one\ntwo\nthree\n";
        let new = "one\n2\nthree\n";
        let lines = plain(&file_diff(Path::new("/w/a.txt"), Some(old), new, Path::new("/w"), 40));
        assert_eq!(lines, ["a.txt (edited +1 -1)", " 1  one", " 2 -two", " 2 +2", " 3  three"]);
    }

    #[test]
    fn a_new_file_is_all_additions() {
        let lines = plain(&file_diff(Path::new("/w/n.txt"), None, "a\nb\n", Path::new("/w"), 40));
        assert_eq!(lines, ["n.txt (created +2 -0)", " 1 +a", " 2 +b"]);
    }
}
