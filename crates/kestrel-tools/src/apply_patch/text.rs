//! A text file as lines that remember their own endings, so an update rewrites only
//! the lines a hunk touches: a CRLF file stays CRLF, a mixed file stays mixed, and a
//! leading byte-order mark survives.

use std::borrow::Cow;

/// How a line ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The last line of a file without a final newline.
    Missing,
    Lf,
    CrLf,
}

impl Ending {
    fn as_str(self) -> &'static str {
        match self {
            Ending::Missing => "",
            Ending::Lf => "\n",
            Ending::CrLf => "\r\n",
        }
    }
}

/// A line's text (without its ending) and its ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextLine<'a> {
    pub text: Cow<'a, str>,
    pub ending: Ending,
}

/// A parsed text file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextFile<'a> {
    pub bom: bool,
    pub lines: Vec<TextLine<'a>>,
    /// The ending most of its lines use: what new lines get.
    pub newline: Ending,
}

impl<'a> TextFile<'a> {
    pub fn parse(content: &'a str) -> Self {
        let (bom, content) = match content.strip_prefix('\u{FEFF}') {
            Some(rest) => (true, rest),
            None => (false, content),
        };
        let mut lines = Vec::new();
        let mut rest = content;
        while !rest.is_empty() {
            let (line, ending, after) = match rest.find('\n') {
                Some(at) => match rest[..at].strip_suffix('\r') {
                    Some(text) => (text, Ending::CrLf, &rest[at + 1..]),
                    None => (&rest[..at], Ending::Lf, &rest[at + 1..]),
                },
                None => (rest, Ending::Missing, ""),
            };
            lines.push(TextLine { text: Cow::Borrowed(line), ending });
            rest = after;
        }
        let crlf = lines.iter().filter(|line| line.ending == Ending::CrLf).count();
        let lf = lines.iter().filter(|line| line.ending == Ending::Lf).count();
        let newline = if crlf > lf { Ending::CrLf } else { Ending::Lf };
        TextFile { bom, lines, newline }
    }

    /// Joins the lines back. Every line but the last must end, so a line that lost
    /// its place at the end of the file gets the file's newline.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.bom {
            out.push('\u{FEFF}');
        }
        let count = self.lines.len();
        for (index, line) in self.lines.iter().enumerate() {
            out.push_str(&line.text);
            let ending = match line.ending {
                Ending::Missing if index + 1 < count => self.newline,
                ending => ending,
            };
            out.push_str(ending.as_str());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_render_are_byte_exact() {
        for content in
            ["", "a", "a\n", "a\r\nb\r\n", "a\nb\r\nc", "\u{FEFF}x\r\n", "\n\n", "a\rb\n"]
        {
            assert_eq!(TextFile::parse(content).render(), content, "{content:?}");
        }
    }

    #[test]
    fn the_dominant_ending_is_the_newline_for_new_lines() {
        assert_eq!(TextFile::parse("a\r\nb\r\nc\n").newline, Ending::CrLf);
        assert_eq!(TextFile::parse("a\r\nb\nc\n").newline, Ending::Lf);
        assert_eq!(TextFile::parse("no newline").newline, Ending::Lf);
    }

    #[test]
    fn a_line_that_is_no_longer_last_gets_a_newline() {
        let mut file = TextFile::parse("a\r\nb");
        file.lines.push(TextLine { text: Cow::Borrowed("c"), ending: Ending::CrLf });
        assert_eq!(file.render(), "a\r\nb\r\nc\r\n");
    }
}
