//! Parses patch text into [`Patch`] without touching the file system.
//!
//! Lenient where models commonly slip (Codex is too): whitespace around markers, a
//! heredoc wrapper (`<<'EOF'` ... `EOF`), blank lines between sections, a unified-diff
//! range after `@@`, `\ No newline at end of file` lines. Everything else is a
//! [`PatchError::Syntax`] naming the line.

use super::error::PatchError;
use std::fmt;

const BEGIN_PATCH: &str = "*** Begin Patch";
const END_PATCH: &str = "*** End Patch";
const ADD_FILE: &str = "*** Add File:";
const DELETE_FILE: &str = "*** Delete File:";
const UPDATE_FILE: &str = "*** Update File:";
const MOVE_TO: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// A parsed patch: at least one file operation, in the order they apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub operations: Vec<FileOperation>,
}

/// One `*** Add/Delete/Update File` section. Paths are as written in the patch
/// (relative to where it is applied, or absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOperation {
    /// Creates the file (and its directories), replacing one that exists.
    /// `content` has a `\n` after every line.
    Add { path: String, content: String },
    /// Removes a file that must exist.
    Delete { path: String },
    /// Edits a file that must exist, optionally renaming it. With `move_to`, `hunks`
    /// may be empty (a pure rename).
    Update { path: String, move_to: Option<String>, hunks: Vec<Hunk> },
}

impl FileOperation {
    /// The path the section names first (the source of a move).
    pub fn path(&self) -> &str {
        match self {
            FileOperation::Add { path, .. }
            | FileOperation::Delete { path }
            | FileOperation::Update { path, .. } => path,
        }
    }
}

/// One `@@` hunk of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The `@@ <line>` headers, outermost first: each names a line the hunk comes
    /// after (a class, then a method in it...). Empty for a bare `@@`.
    pub headers: Vec<String>,
    pub lines: Vec<HunkLine>,
    /// `*** End of File`: the hunk's old lines end the file.
    pub end_of_file: bool,
}

/// A line of a hunk, without its one-character prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` line`: must be there, stays.
    Context(String),
    /// `-line`: must be there, goes.
    Remove(String),
    /// `+line`: is inserted.
    Add(String),
}

impl Hunk {
    /// The lines the file must contain where the hunk applies (context and removed).
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|line| match line {
                HunkLine::Context(text) | HunkLine::Remove(text) => Some(text.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }

    /// The lines that replace them (context and added).
    pub fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|line| match line {
                HunkLine::Context(text) | HunkLine::Add(text) => Some(text.as_str()),
                HunkLine::Remove(_) => None,
            })
            .collect()
    }
}

/// Parses a patch. Pure: nothing is read or written.
///
/// Fails with [`PatchError::Syntax`] (naming the 1-based line of `text`) on a missing
/// `*** Begin Patch`/`*** End Patch`, an unknown section header, an empty path, an
/// update without hunks, or a hunk line without a ` `/`-`/`+` prefix; and with
/// [`PatchError::NoOperations`] when the patch has no sections at all.
pub fn parse_patch(text: &str) -> Result<Patch, PatchError> {
    let lines: Vec<Line<'_>> = text
        .lines()
        .enumerate()
        .map(|(index, text)| Line { number: index + 1, text: text.trim_end_matches('\r') })
        .collect();
    let lines = strip_heredoc(trim_blank(&lines));
    let Some((first, rest)) = lines.split_first() else {
        return Err(syntax(1, "the patch is empty; it must start with `*** Begin Patch`"));
    };
    if first.text.trim() != BEGIN_PATCH {
        return Err(syntax(
            first.number,
            format!("the patch must start with `{BEGIN_PATCH}`, found `{}`", first.text.trim()),
        ));
    }
    let Some(end) = rest.iter().position(|line| line.text.trim() == END_PATCH) else {
        let last = lines.last().map_or(first.number, |line| line.number);
        return Err(syntax(last, format!("the patch must end with `{END_PATCH}`")));
    };
    if let Some(extra) = rest[end + 1..].iter().find(|line| !line.text.trim().is_empty()) {
        return Err(syntax(extra.number, format!("unexpected text after `{END_PATCH}`")));
    }
    let operations = Parser { lines: &rest[..end], next: 0 }.operations()?;
    if operations.is_empty() {
        return Err(PatchError::NoOperations);
    }
    Ok(Patch { operations })
}

#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    number: usize,
    text: &'a str,
}

fn syntax(line: usize, message: impl Into<String>) -> PatchError {
    PatchError::Syntax { line, message: message.into() }
}

fn trim_blank<'a, 'b>(lines: &'b [Line<'a>]) -> &'b [Line<'a>] {
    let start = lines.iter().position(|line| !line.text.trim().is_empty()).unwrap_or(lines.len());
    let end = lines.iter().rposition(|line| !line.text.trim().is_empty()).map_or(start, |i| i + 1);
    &lines[start..end]
}

/// `<<'EOF'` / `apply_patch <<"PATCH"` ... `EOF`: models often wrap the patch as if
/// for a shell. The wrapper is dropped only when the closing delimiter matches.
fn strip_heredoc<'a, 'b>(lines: &'b [Line<'a>]) -> &'b [Line<'a>] {
    let [first, inner @ .., last] = lines else { return lines };
    let opener = first.text.trim();
    let opener = ["apply_patch", "applypatch"]
        .iter()
        .find_map(|command| opener.strip_prefix(command))
        .unwrap_or(opener)
        .trim_start();
    let Some(delimiter) = opener.strip_prefix("<<") else { return lines };
    let delimiter = delimiter.trim_start_matches('-').trim();
    let delimiter = delimiter
        .strip_prefix('\'')
        .and_then(|d| d.strip_suffix('\''))
        .or_else(|| delimiter.strip_prefix('"').and_then(|d| d.strip_suffix('"')))
        .unwrap_or(delimiter);
    let is_word =
        !delimiter.is_empty() && delimiter.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if is_word && last.text.trim() == delimiter { trim_blank(inner) } else { lines }
}

struct Parser<'a, 'b> {
    lines: &'b [Line<'a>],
    next: usize,
}

impl<'a> Parser<'a, '_> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.next).copied()
    }

    fn skip_blank(&mut self) {
        while self.peek().is_some_and(|line| line.text.trim().is_empty()) {
            self.next += 1;
        }
    }

    fn operations(mut self) -> Result<Vec<FileOperation>, PatchError> {
        let mut operations = Vec::new();
        loop {
            self.skip_blank();
            let Some(line) = self.peek() else { return Ok(operations) };
            self.next += 1;
            let header = line.text.trim();
            let operation = if let Some(path) = header.strip_prefix(ADD_FILE) {
                let path = file_path(line, path)?;
                FileOperation::Add { path, content: self.added_content() }
            } else if let Some(path) = header.strip_prefix(DELETE_FILE) {
                FileOperation::Delete { path: file_path(line, path)? }
            } else if let Some(path) = header.strip_prefix(UPDATE_FILE) {
                self.update(line, file_path(line, path)?)?
            } else {
                return Err(syntax(
                    line.number,
                    format!(
                        "`{header}` is not a file operation; expected `{ADD_FILE} PATH`, \
                         `{DELETE_FILE} PATH` or `{UPDATE_FILE} PATH`"
                    ),
                ));
            };
            operations.push(operation);
        }
    }

    /// `+` lines. A blank line counts as an empty line of the file only when more
    /// `+` lines follow; otherwise it separates sections.
    fn added_content(&mut self) -> String {
        let mut content = String::new();
        while let Some(line) = self.peek() {
            if let Some(text) = line.text.strip_prefix('+') {
                content.push_str(text);
                content.push('\n');
                self.next += 1;
            } else if line.text.trim().is_empty() && self.more_added_lines_follow() {
                content.push('\n');
                self.next += 1;
            } else {
                break;
            }
        }
        content
    }

    fn more_added_lines_follow(&self) -> bool {
        self.lines[self.next..]
            .iter()
            .find(|line| !line.text.trim().is_empty())
            .is_some_and(|line| line.text.starts_with('+'))
    }

    fn update(&mut self, header: Line<'a>, path: String) -> Result<FileOperation, PatchError> {
        let mut move_to = None;
        if let Some(line) = self.peek()
            && let Some(destination) = line.text.trim().strip_prefix(MOVE_TO)
        {
            move_to = Some(file_path(line, destination)?);
            self.next += 1;
        }
        let mut hunks = Vec::new();
        loop {
            self.skip_blank();
            let Some(line) = self.peek() else { break };
            if is_section_marker(line.text) {
                break;
            }
            hunks.push(self.hunk(hunks.is_empty())?);
        }
        if hunks.is_empty() && move_to.is_none() {
            return Err(syntax(
                header.number,
                format!("`{UPDATE_FILE} {path}` has no hunks: add `@@` hunks with the change"),
            ));
        }
        Ok(FileOperation::Update { path, move_to, hunks })
    }

    fn hunk(&mut self, first: bool) -> Result<Hunk, PatchError> {
        let start = self.peek().map_or(0, |line| line.number);
        let mut headers = Vec::new();
        let mut saw_marker = false;
        // The first `@@` may be indented; a stacked one must start its line, as an
        // indented `@@` inside a hunk is a context line.
        while let Some(line) = self.peek()
            && let Some(rest) = match saw_marker {
                false => line.text.trim_start().strip_prefix("@@"),
                true => line.text.strip_prefix("@@"),
            }
        {
            saw_marker = true;
            self.next += 1;
            if let Some(header) = hunk_header(rest) {
                headers.push(header);
            }
        }
        if !saw_marker && !first {
            let text = self.peek().map_or("", |line| line.text);
            return Err(syntax(
                start,
                format!("expected an `@@` line to start a hunk, found `{text}`"),
            ));
        }
        let mut hunk = Hunk { headers, lines: Vec::new(), end_of_file: false };
        // Empty lines at the end of a hunk separate it from what follows; they are
        // not context the file must have.
        let mut trailing_empty = 0;
        while let Some(line) = self.peek() {
            if line.text.trim() == END_OF_FILE {
                self.next += 1;
                hunk.end_of_file = true;
                break;
            }
            if is_section_marker(line.text) || line.text.starts_with("@@") {
                break;
            }
            self.next += 1;
            let mut chars = line.text.chars();
            let prefix = chars.next();
            let text = chars.as_str().to_string();
            trailing_empty = match prefix {
                None => trailing_empty + 1,
                Some('\\') => trailing_empty,
                Some(_) => 0,
            };
            match prefix {
                None => hunk.lines.push(HunkLine::Context(text)),
                Some(' ') => hunk.lines.push(HunkLine::Context(text)),
                Some('-') => hunk.lines.push(HunkLine::Remove(text)),
                Some('+') => hunk.lines.push(HunkLine::Add(text)),
                // git's "\ No newline at end of file": the engine keeps line endings itself.
                Some('\\') => {}
                Some(_) => {
                    return Err(syntax(
                        line.number,
                        format!(
                            "`{}` is not a hunk line: start it with ' ' (context), '-' (remove) \
                             or '+' (add)",
                            line.text
                        ),
                    ));
                }
            }
        }
        hunk.lines.truncate(hunk.lines.len() - trailing_empty);
        if hunk.lines.is_empty() {
            return Err(syntax(start, "the hunk has no lines: give context, '-' and '+' lines"));
        }
        Ok(hunk)
    }
}

fn file_path(line: Line<'_>, path: &str) -> Result<String, PatchError> {
    let path = path.trim();
    if path.is_empty() {
        return Err(syntax(line.number, format!("`{}` names no path", line.text.trim())));
    }
    Ok(path.to_string())
}

/// Ends a hunk or an update: a new section, the end of the patch or a stray marker.
fn is_section_marker(text: &str) -> bool {
    let text = text.trim();
    [ADD_FILE, DELETE_FILE, UPDATE_FILE, MOVE_TO, END_PATCH, END_OF_FILE]
        .iter()
        .any(|marker| text.starts_with(marker))
}

/// The text after `@@`: a line to find, or none. A unified-diff range (`-3,4 +3,5 @@`)
/// carries no usable line, so it is dropped and what follows it (git puts the
/// enclosing function there) is the header.
fn hunk_header(rest: &str) -> Option<String> {
    let mut header = rest.strip_prefix(' ').unwrap_or(rest).trim_end();
    while let Some(after) = strip_unified_range(header) {
        header = after.trim_end();
    }
    (!header.trim().is_empty()).then(|| header.to_string())
}

fn strip_unified_range(text: &str) -> Option<&str> {
    let mut words = text.trim_start().splitn(3, ' ');
    let old = words.next()?.strip_prefix('-')?;
    let new = words.next()?.strip_prefix('+')?;
    let is_range = |range: &str| {
        range.split(',').all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    if !is_range(old) || !is_range(new) {
        return None;
    }
    let rest = words.next().unwrap_or("").trim_start();
    Some(rest.strip_prefix("@@").unwrap_or(rest).trim_start())
}

impl fmt::Display for Patch {
    /// The canonical text of the patch; parsing it gives back an equal `Patch`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{BEGIN_PATCH}")?;
        for operation in &self.operations {
            match operation {
                FileOperation::Add { path, content } => {
                    writeln!(f, "{ADD_FILE} {path}")?;
                    for line in content.lines() {
                        writeln!(f, "+{line}")?;
                    }
                }
                FileOperation::Delete { path } => writeln!(f, "{DELETE_FILE} {path}")?,
                FileOperation::Update { path, move_to, hunks } => {
                    writeln!(f, "{UPDATE_FILE} {path}")?;
                    if let Some(destination) = move_to {
                        writeln!(f, "{MOVE_TO} {destination}")?;
                    }
                    for hunk in hunks {
                        write_hunk(f, hunk)?;
                    }
                }
            }
        }
        writeln!(f, "{END_PATCH}")
    }
}

fn write_hunk(f: &mut fmt::Formatter<'_>, hunk: &Hunk) -> fmt::Result {
    if hunk.headers.is_empty() {
        writeln!(f, "@@")?;
    }
    for header in &hunk.headers {
        writeln!(f, "@@ {header}")?;
    }
    for line in &hunk.lines {
        match line {
            HunkLine::Context(text) => writeln!(f, " {text}")?,
            HunkLine::Remove(text) => writeln!(f, "-{text}")?,
            HunkLine::Add(text) => writeln!(f, "+{text}")?,
        }
    }
    if hunk.end_of_file {
        writeln!(f, "{END_OF_FILE}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_line(text: &str) -> (usize, String) {
        match parse_patch(text) {
            Err(PatchError::Syntax { line, message }) => (line, message),
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn parses_every_kind_of_section() {
        let patch = parse_patch(
            "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Delete File: b.txt\n\
             *** Update File: c.txt\n*** Move to: d.txt\n@@ fn main\n ctx\n-old\n+new\n\
             *** End of File\n*** End Patch\n",
        )
        .unwrap();
        assert_eq!(
            patch.operations,
            vec![
                FileOperation::Add { path: "a.txt".into(), content: "one\ntwo\n".into() },
                FileOperation::Delete { path: "b.txt".into() },
                FileOperation::Update {
                    path: "c.txt".into(),
                    move_to: Some("d.txt".into()),
                    hunks: vec![Hunk {
                        headers: vec!["fn main".into()],
                        lines: vec![
                            HunkLine::Context("ctx".into()),
                            HunkLine::Remove("old".into()),
                            HunkLine::Add("new".into()),
                        ],
                        end_of_file: true,
                    }],
                },
            ]
        );
    }

    #[test]
    fn a_missing_begin_marker_is_reported_on_its_line() {
        let (line, message) = error_line("\n\nhello\n*** End Patch");
        assert_eq!(line, 3);
        assert!(message.contains("*** Begin Patch"), "{message}");
    }

    #[test]
    fn a_missing_end_marker_is_an_error() {
        let (_, message) = error_line("*** Begin Patch\n*** Delete File: a\n");
        assert!(message.contains("*** End Patch"), "{message}");
    }

    #[test]
    fn text_after_the_end_marker_is_an_error() {
        let (line, message) =
            error_line("*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore");
        assert_eq!(line, 4);
        assert!(message.contains("after"), "{message}");
    }

    #[test]
    fn an_empty_text_and_an_empty_patch_are_errors() {
        assert!(matches!(parse_patch("  \n"), Err(PatchError::Syntax { .. })));
        assert!(matches!(
            parse_patch("*** Begin Patch\n*** End Patch"),
            Err(PatchError::NoOperations)
        ));
    }

    #[test]
    fn an_unknown_section_names_the_valid_ones() {
        let (line, message) = error_line("*** Begin Patch\n*** Rename File: a\n*** End Patch");
        assert_eq!(line, 2);
        assert!(message.contains("*** Update File: PATH"), "{message}");
    }

    #[test]
    fn a_path_is_required() {
        let (line, message) = error_line("*** Begin Patch\n*** Delete File:   \n*** End Patch");
        assert_eq!(line, 2);
        assert!(message.contains("no path"), "{message}");
    }

    #[test]
    fn an_update_without_hunks_is_an_error_but_a_pure_move_is_not() {
        let (line, message) = error_line("*** Begin Patch\n*** Update File: a\n*** End Patch");
        assert_eq!(line, 2);
        assert!(message.contains("no hunks"), "{message}");
        let patch =
            parse_patch("*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch")
                .unwrap();
        assert_eq!(
            patch.operations,
            vec![FileOperation::Update {
                path: "a".into(),
                move_to: Some("b".into()),
                hunks: vec![]
            }]
        );
    }

    #[test]
    fn a_line_without_prefix_in_a_hunk_is_an_error() {
        let (line, message) =
            error_line("*** Begin Patch\n*** Update File: a\n@@\n-x\nplain\n*** End Patch");
        assert_eq!(line, 5);
        assert!(message.contains("not a hunk line"), "{message}");
    }

    #[test]
    fn a_hunk_needs_lines_and_later_hunks_need_an_at_marker() {
        let (line, message) = error_line("*** Begin Patch\n*** Update File: a\n@@\n*** End Patch");
        assert_eq!(line, 3);
        assert!(message.contains("no lines"), "{message}");
        let patch =
            parse_patch("*** Begin Patch\n*** Update File: a\n x\n+y\n*** End Patch").unwrap();
        assert_eq!(patch.operations.len(), 1);
    }

    #[test]
    fn markers_may_be_padded_and_the_patch_wrapped_in_a_heredoc() {
        let text = "apply_patch <<'EOF'\n  *** Begin Patch \n *** Delete File: a.txt \n\
                    *** End Patch  \nEOF\n";
        let patch = parse_patch(text).unwrap();
        assert_eq!(patch.operations, vec![FileOperation::Delete { path: "a.txt".into() }]);
        let crlf = "<<EOF\r\n*** Begin Patch\r\n*** Delete File: a.txt\r\n*** End Patch\r\nEOF";
        assert_eq!(parse_patch(crlf).unwrap(), patch);
    }

    #[test]
    fn a_heredoc_with_a_mismatched_delimiter_is_not_unwrapped() {
        let (line, _) =
            error_line("<<'EOF'\n*** Begin Patch\n*** Delete File: a\n*** End Patch\nEND");
        assert_eq!(line, 1);
    }

    #[test]
    fn stacked_headers_and_unified_ranges_are_understood() {
        let patch = parse_patch(
            "*** Begin Patch\n*** Update File: a.py\n@@ class A:\n@@     def f(self):\n-x\n+y\n\
             @@ -10,2 +10,3 @@ def g():\n-p\n+q\n@@ -1 +1 @@\n-r\n+s\n*** End Patch",
        )
        .unwrap();
        let FileOperation::Update { hunks, .. } = &patch.operations[0] else { panic!() };
        assert_eq!(hunks[0].headers, vec!["class A:".to_string(), "    def f(self):".to_string()]);
        assert_eq!(hunks[1].headers, vec!["def g():".to_string()]);
        assert!(hunks[2].headers.is_empty());
    }

    #[test]
    fn blank_lines_are_empty_context_in_hunks_and_content_in_added_files() {
        let patch = parse_patch(
            "*** Begin Patch\n*** Add File: a\n+x\n\n+y\n\n*** Update File: b\n@@\n x\n\n-y\n\
             \\ No newline at end of file\n*** End Patch",
        )
        .unwrap();
        assert_eq!(
            patch.operations[0],
            FileOperation::Add { path: "a".into(), content: "x\n\ny\n".into() }
        );
        let FileOperation::Update { hunks, .. } = &patch.operations[1] else { panic!() };
        assert_eq!(hunks[0].old_lines(), vec!["x", "", "y"]);
        assert_eq!(hunks[0].new_lines(), vec!["x", ""]);
    }

    #[test]
    fn empty_lines_ending_a_hunk_are_separators_not_context() {
        let patch = parse_patch(
            "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n\n\n@@\n-p\n \n\n*** End Patch",
        )
        .unwrap();
        let FileOperation::Update { hunks, .. } = &patch.operations[0] else { panic!() };
        assert_eq!(hunks[0].old_lines(), vec!["x"]);
        assert_eq!(hunks[1].old_lines(), vec!["p", ""]);
    }

    #[test]
    fn an_indented_at_line_after_a_header_is_context() {
        let patch =
            parse_patch("*** Begin Patch\n*** Update File: a\n  @@ h\n  @@ x\n-y\n*** End Patch")
                .unwrap();
        let FileOperation::Update { hunks, .. } = &patch.operations[0] else { panic!() };
        assert_eq!(hunks[0].headers, vec!["h".to_string()]);
        assert_eq!(hunks[0].old_lines(), vec![" @@ x", "y"]);
    }

    #[test]
    fn carriage_returns_before_a_line_end_are_not_content() {
        let patch =
            parse_patch("*** Begin Patch\r\n*** Add File: a\r\n+x\r\r\r\n*** End Patch").unwrap();
        assert_eq!(
            patch.operations,
            vec![FileOperation::Add { path: "a".into(), content: "x\n".into() }]
        );
    }

    #[test]
    fn a_range_is_recognised_after_trailing_whitespace_is_trimmed() {
        // Found by fuzzing: the header printed back as a range parsed differently.
        let patch =
            parse_patch("*** Begin Patch\n*** Update File:r\n@@-1 +1\x0c\n+\n*** End Patch")
                .unwrap();
        let FileOperation::Update { hunks, .. } = &patch.operations[0] else { panic!() };
        assert!(hunks[0].headers.is_empty(), "{:?}", hunks[0].headers);
        assert_eq!(parse_patch(&patch.to_string()).unwrap(), patch);
    }

    #[test]
    fn an_add_file_may_be_empty() {
        let patch = parse_patch("*** Begin Patch\n*** Add File: empty\n*** End Patch").unwrap();
        assert_eq!(
            patch.operations,
            vec![FileOperation::Add { path: "empty".into(), content: "".into() }]
        );
    }

    #[test]
    fn display_round_trips() {
        let text = "*** Begin Patch\n*** Add File: a\n+x\n+\n*** Update File: b\n*** Move to: c\n\
                    @@ h1\n@@  h2\n  ctx\n-old\n+new\n*** End of File\n@@\n+tail\n\
                    *** Delete File: d\n*** End Patch\n";
        let patch = parse_patch(text).unwrap();
        assert_eq!(patch.to_string(), text);
        assert_eq!(parse_patch(&patch.to_string()).unwrap(), patch);
    }
}
