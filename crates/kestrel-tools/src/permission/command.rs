//! A parser for the part of shell syntax that decides what a command line does: words
//! and quotes, `&&`, `||`, `;`, `&`, `|`, subshells `( )`, command substitutions `$( )`
//! and backticks, process substitutions, redirections (`>`, `>>`, `2>`, `&>`, `<`...)
//! and heredocs. It does not run or expand anything: every simple command anywhere in
//! the line (inside substitutions too) comes out flat, each word marked literal or not.
//! Whatever it does not understand (`if`, loops, functions, `[[ ]]`, arithmetic) is an
//! error, which callers treat as "not known to be safe".

use std::fmt;

/// One word after quote removal. `literal` is false when the shell would change it
/// (a `$` expansion, a substitution, an unquoted glob or brace): its text is then
/// only an approximation and must not be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    pub literal: bool,
}

/// What a redirection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `<`: opens the target for reading.
    Read,
    /// `<<<`, heredocs: feeds text, opens no file (the target is the text or the
    /// heredoc's delimiter).
    Text,
    /// `>`, `>|`, `>>`, `&>`, `&>>`, `<>`: opens the target for writing.
    Write,
    /// `>&N`, `<&N`, `N>&-`: duplicates or closes a descriptor, touches no file.
    Duplicate,
}

/// One redirection and its target word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirection {
    pub kind: RedirectKind,
    pub target: Word,
}

/// A simple command: assignments, words, redirections. A subshell's own redirections
/// appear as a command with no words.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimpleCommand {
    /// `NAME=value` words before the command name.
    pub assignments: Vec<(String, Word)>,
    pub words: Vec<Word>,
    pub redirections: Vec<Redirection>,
}

/// Why a command line is outside the supported syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Why a backslash-newline after a `$` is refused.
const CONTINUATION: &str =
    "a line continuation (backslash-newline) after `$`, which bash joins to what follows";

/// Deeper nesting than this is refused rather than parsed.
const MAX_DEPTH: usize = 32;

/// Every simple command of `script`, in order of appearance.
///
/// Fails on syntax it does not support or cannot close (an open quote, a missing `)`).
pub fn parse(script: &str) -> Result<Vec<SimpleCommand>, ParseError> {
    let mut parser = Parser::new(script, 0);
    parser.sequence(End::Eof)?;
    if !parser.heredocs.is_empty() {
        parser.read_heredocs()?;
    }
    Ok(parser.commands)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Eof,
    CloseParen,
}

/// A heredoc whose body starts after the next newline.
struct PendingHeredoc {
    delimiter: String,
    /// A quoted delimiter: the body is taken literally.
    quoted: bool,
    strip_tabs: bool,
}

/// Words that start compound commands or belong to them.
const KEYWORDS: [&str; 16] = [
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "select", "[[", "coproc",
];

struct Parser {
    chars: Vec<char>,
    pos: usize,
    commands: Vec<SimpleCommand>,
    heredocs: Vec<PendingHeredoc>,
    depth: usize,
    /// Whether the next command follows a `|`: there `time` is a program, not bash's
    /// keyword (which only starts a pipeline).
    piped: bool,
}

fn error<T>(reason: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError { reason: reason.into() })
}

impl Parser {
    fn new(script: &str, depth: usize) -> Self {
        Self {
            chars: script.chars().collect(),
            pos: 0,
            commands: Vec::new(),
            heredocs: Vec::new(),
            depth,
            piped: false,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn starts_with(&self, text: &str) -> bool {
        text.chars().enumerate().all(|(i, c)| self.peek_at(i) == Some(c))
    }

    /// Whether the character before the cursor is a `$`: a backslash-newline there
    /// would join it to what follows (`$\` + `(cmd)` is `$(cmd)`), which the `$` was
    /// already read without.
    fn after_dollar(&self) -> bool {
        self.pos > 0 && self.chars[self.pos - 1] == '$'
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t') => self.pos += 1,
                // bash removes a backslash-newline before it splits words, which joins
                // what is on either side (`$\` + `(cmd)` is `$(cmd)`). After a blank or
                // an operator (`&&\`) it joins nothing a word could not start with, or
                // an operator the next step refuses (`&\` + `&`); inside a word, see `word`.
                Some('\\')
                    if self.peek_at(1) == Some('\n')
                        && (self.pos == 0
                            || matches!(
                                self.chars[self.pos - 1],
                                ' ' | '\t' | '\n' | ';' | '&' | '|'
                            )) =>
                {
                    self.pos += 2
                }
                _ => break,
            }
        }
    }

    /// Blanks, newlines (reading pending heredocs) and comments.
    fn skip_space(&mut self) -> Result<(), ParseError> {
        loop {
            self.skip_blanks();
            match self.peek() {
                Some('\n') => self.newline()?,
                Some('#') => self.skip_comment(),
                _ => return Ok(()),
            }
        }
    }

    fn skip_comment(&mut self) {
        while let Some(c) = self.peek() {
            if c == '\n' {
                break;
            }
            self.pos += 1;
        }
    }

    /// Consumes a newline; heredoc bodies begin right after it.
    fn newline(&mut self) -> Result<(), ParseError> {
        self.pos += 1;
        if self.heredocs.is_empty() { Ok(()) } else { self.read_heredocs() }
    }

    fn read_heredocs(&mut self) -> Result<(), ParseError> {
        for heredoc in std::mem::take(&mut self.heredocs) {
            let mut found = false;
            while self.pos < self.chars.len() {
                let start = self.pos;
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let line: String = self.chars[start..self.pos].iter().collect();
                if self.peek() == Some('\n') {
                    self.pos += 1;
                }
                let compared =
                    if heredoc.strip_tabs { line.trim_start_matches('\t') } else { &line };
                if compared == heredoc.delimiter {
                    found = true;
                    break;
                }
                // An unquoted body is expanded: substitutions run, `${x@P}` and arithmetic
                // on variables can run commands, and a trailing backslash joins lines
                // (`$\` + `(cmd)` is `$(cmd)`).
                if !heredoc.quoted
                    && (line.contains("$(")
                        || line.contains('`')
                        || line.contains("${")
                        || line.contains("$[")
                        || line.ends_with('\\'))
                {
                    return error(
                        "a heredoc whose body has substitutions, expansions or line continuations",
                    );
                }
            }
            if !found {
                return error(format!("the heredoc `{}` is never closed", heredoc.delimiter));
            }
        }
        Ok(())
    }

    /// Commands separated by `;`, `&`, newlines, `&&`, `||`, `|`, up to `end`.
    fn sequence(&mut self, end: End) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return error("nested too deeply");
        }
        loop {
            self.skip_space()?;
            match (self.peek(), end) {
                (None, End::Eof) | (Some(')'), End::CloseParen) => break,
                (None, End::CloseParen) => return error("a `(` is never closed"),
                _ => {}
            }
            self.command()?;
            self.piped = false;
            self.skip_blanks();
            match self.peek() {
                None | Some(')') | Some('#') => {}
                Some('\n') => self.newline()?,
                Some(';') => {
                    if self.peek_at(1) == Some(';') {
                        return error("`;;` outside a case statement");
                    }
                    self.pos += 1;
                }
                Some('&') if self.peek_at(1) == Some('&') => self.pos = self.operand_after(2)?,
                Some('&') => self.pos += 1,
                Some('|') if self.peek_at(1) == Some('|') => self.pos = self.operand_after(2)?,
                Some('|') if self.peek_at(1) == Some('&') => {
                    self.pos = self.operand_after(2)?;
                    self.piped = true;
                }
                Some('|') => {
                    self.pos = self.operand_after(1)?;
                    self.piped = true;
                }
                Some(other) => return error(format!("unexpected `{other}`")),
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// After a binary operator of `len` characters a command must follow.
    fn operand_after(&mut self, len: usize) -> Result<usize, ParseError> {
        self.pos += len;
        self.skip_space()?;
        match self.peek() {
            None | Some(')' | ';' | '&' | '|') => error("an operator without a command after it"),
            Some(_) => Ok(self.pos),
        }
    }

    fn command(&mut self) -> Result<(), ParseError> {
        if self.peek() == Some('!') && matches!(self.peek_at(1), Some(' ' | '\t')) {
            self.pos += 1;
            self.skip_blanks();
        }
        if self.starts_with("((") {
            return error("arithmetic commands `(( ))`");
        }
        if self.peek() == Some('(') {
            self.pos += 1;
            self.sequence(End::CloseParen)?;
            if self.peek() != Some(')') {
                return error("a `(` is never closed");
            }
            self.pos += 1;
            let mut group = SimpleCommand::default();
            loop {
                self.skip_blanks();
                match self.redirection()? {
                    Some(redirection) => group.redirections.push(redirection),
                    None => break,
                }
            }
            if !group.redirections.is_empty() {
                self.commands.push(group);
            }
            return Ok(());
        }
        self.simple_command()
    }

    fn simple_command(&mut self) -> Result<(), ParseError> {
        let mut command = SimpleCommand::default();
        let mut timed = false;
        loop {
            self.skip_blanks();
            if self.peek().is_none() {
                break;
            }
            if let Some(redirection) = self.redirection()? {
                command.redirections.push(redirection);
                continue;
            }
            match self.peek() {
                None | Some('\n' | ';' | '&' | '|' | ')' | '#') => break,
                Some('(') => {
                    return error("`(` in the middle of a command (a function definition?)");
                }
                _ => {}
            }
            let start = self.pos;
            let word = self.word()?;
            let raw: String = self.chars[start..self.pos].iter().collect();
            if command.words.is_empty() {
                if let Some((name, _)) = raw.split_once('=')
                    && is_name(name)
                {
                    let value = Word {
                        text: word.text[name.len() + 1..].to_string(),
                        literal: word.literal,
                    };
                    command.assignments.push((name.to_string(), value));
                    continue;
                }
                // The keyword only as the pipeline's first word: after an assignment or
                // a redirection, `time` is the program (which runs the real git).
                if raw == "time"
                    && word.literal
                    && !timed
                    && !self.piped
                    && command.assignments.is_empty()
                    && command.redirections.is_empty()
                {
                    timed = true;
                    continue;
                }
                // `raw` is the source text: a quoted "if" is a plain word.
                if KEYWORDS.contains(&raw.as_str()) || raw == "{" || raw == "}" {
                    return error(format!("`{raw}` (compound commands are not parsed)"));
                }
            }
            command.words.push(word);
        }
        if command.words.is_empty()
            && command.assignments.is_empty()
            && command.redirections.is_empty()
        {
            return error("an empty command");
        }
        self.commands.push(command);
        Ok(())
    }

    /// A redirection at the cursor, if there is one (an optional fd number, then the operator).
    fn redirection(&mut self) -> Result<Option<Redirection>, ParseError> {
        let start = self.pos;
        let mut cursor = self.pos;
        while self.chars.get(cursor).is_some_and(char::is_ascii_digit) {
            cursor += 1;
        }
        if self.chars.get(cursor) == Some(&'{') {
            return Ok(None);
        }
        self.pos = cursor;
        let (kind, heredoc) = if self.starts_with("&>>") {
            self.pos += 3;
            (RedirectKind::Write, None)
        } else if self.starts_with("&>") && cursor == start {
            self.pos += 2;
            (RedirectKind::Write, None)
        } else if self.starts_with("<<<") {
            self.pos += 3;
            (RedirectKind::Text, None)
        } else if self.starts_with("<<-") {
            self.pos += 3;
            (RedirectKind::Text, Some(true))
        } else if self.starts_with("<<") {
            self.pos += 2;
            (RedirectKind::Text, Some(false))
        } else if self.starts_with(">&") || self.starts_with("<&") {
            self.pos += 2;
            (RedirectKind::Duplicate, None)
        } else if self.starts_with("<>") || self.starts_with(">>") || self.starts_with(">|") {
            self.pos += 2;
            (RedirectKind::Write, None)
        } else if self.starts_with("<(") || self.starts_with(">(") {
            // A process substitution is a word, not a redirection.
            self.pos = start;
            return Ok(None);
        } else if self.peek() == Some('>') {
            self.pos += 1;
            (RedirectKind::Write, None)
        } else if self.peek() == Some('<') {
            self.pos += 1;
            (RedirectKind::Read, None)
        } else {
            self.pos = start;
            return Ok(None);
        };
        self.skip_blanks();
        if matches!(self.peek(), None | Some('\n' | ';' | '&' | '|' | ')' | '<' | '>')) {
            return error("a redirection without a target");
        }
        let target_start = self.pos;
        let target = self.word()?;
        // A backslash-newline is gone before bash reads the word (`EO\` + `F` is a plain
        // `EOF`): it does not quote the delimiter.
        let raw: String = self.chars[target_start..self.pos].iter().collect();
        let quoted = raw.replace("\\\n", "").chars().any(|c| matches!(c, '\'' | '"' | '\\'));
        let kind = match kind {
            // `>&file` and `<&file` (not a number or `-`) redirect to a file.
            RedirectKind::Duplicate
                if !(target.literal
                    && (target.text == "-"
                        || target
                            .text
                            .trim_end_matches('-')
                            .chars()
                            .all(|c| c.is_ascii_digit()))) =>
            {
                RedirectKind::Write
            }
            other => other,
        };
        if let Some(strip_tabs) = heredoc {
            // bash decodes `$'...'` in a delimiter (`$'E\x4fF'` is `EOF`) but takes `$X`
            // as written: neither is what the word's text says, so both are refused.
            if raw.contains(['$', '`']) {
                return error(format!(
                    "the heredoc delimiter `{raw}` (bash does not expand `$` or backquotes there)"
                ));
            }
            self.heredocs.push(PendingHeredoc {
                delimiter: target.text.clone(),
                quoted,
                strip_tabs,
            });
        }
        Ok(Some(Redirection { kind, target }))
    }

    /// One word: quotes removed, expansions noted (and substitutions parsed).
    fn word(&mut self) -> Result<Word, ParseError> {
        let start = self.pos;
        let mut text = String::new();
        let mut literal = true;
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\n' | ';' | '&' | '|' | ')' => break,
                '(' => return error("`(` inside a word"),
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.pos += 2;
                    self.sequence(End::CloseParen)?;
                    self.expect_close()?;
                    literal = false;
                }
                '<' | '>' => break,
                '\\' => {
                    match self.peek_at(1) {
                        Some('\n') if self.after_dollar() => return error(CONTINUATION),
                        Some('\n') => {}
                        Some(next) => text.push(next),
                        None => return error("a trailing backslash"),
                    }
                    self.pos += 2;
                }
                '\'' => {
                    self.pos += 1;
                    loop {
                        match self.peek() {
                            None => return error("an unclosed single quote"),
                            Some('\'') => break,
                            Some(inner) => text.push(inner),
                        }
                        self.pos += 1;
                    }
                    self.pos += 1;
                }
                '"' => {
                    self.pos += 1;
                    if !self.double_quoted(&mut text)? {
                        literal = false;
                    }
                }
                '$' => {
                    if !self.dollar(&mut text, false)? {
                        literal = false;
                    }
                }
                '`' => {
                    self.backtick(false)?;
                    literal = false;
                }
                '*' | '?' | '[' | '{' | '}' | '~' if !(c == '~' && self.pos > start) => {
                    // Globs, braces and a leading tilde are expanded by the shell.
                    text.push(c);
                    literal = false;
                    self.pos += 1;
                }
                _ => {
                    text.push(c);
                    self.pos += 1;
                }
            }
        }
        if self.pos == start {
            return error("an empty word");
        }
        // A lone `[` or `]` is no glob (the `[` of `[ -f x ]`).
        if self.pos == start + 1 && matches!(self.chars[start], '[' | ']') {
            literal = true;
        }
        Ok(Word { text, literal })
    }

    fn expect_close(&mut self) -> Result<(), ParseError> {
        if self.peek() != Some(')') {
            return error("a `(` is never closed");
        }
        self.pos += 1;
        Ok(())
    }

    /// The inside of `"..."` (the opening quote consumed). Returns whether it was literal.
    fn double_quoted(&mut self, text: &mut String) -> Result<bool, ParseError> {
        let mut literal = true;
        loop {
            match self.peek() {
                None => return error("an unclosed double quote"),
                Some('"') => {
                    self.pos += 1;
                    return Ok(literal);
                }
                Some('\\') => {
                    match self.peek_at(1) {
                        Some(next @ ('$' | '`' | '"' | '\\')) => text.push(next),
                        Some('\n') if self.after_dollar() => return error(CONTINUATION),
                        Some('\n') => {}
                        Some(next) => {
                            text.push('\\');
                            text.push(next);
                        }
                        None => return error("an unclosed double quote"),
                    }
                    self.pos += 2;
                }
                Some('$') => literal &= self.dollar(text, true)?,
                Some('`') => {
                    self.backtick(true)?;
                    literal = false;
                }
                Some(c) => {
                    text.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// `$...` at the cursor, `in_double` inside `"..."`. Returns whether the result is
    /// literal (a lone `$`, `$'...'` without escapes).
    fn dollar(&mut self, text: &mut String, in_double: bool) -> Result<bool, ParseError> {
        match self.peek_at(1) {
            // Inside "..." there is no `$'...'` nor `$"..."`: the `$` is a plain character
            // and the quote is the string's own.
            Some('\'' | '"') if in_double => {
                text.push('$');
                self.pos += 1;
                Ok(true)
            }
            Some('(') if self.peek_at(2) == Some('(') => {
                self.pos += 3;
                let start = self.pos;
                self.skip_balanced('(', ')', 2)?;
                let inner: String = self.chars[start..self.pos].iter().collect();
                // Arithmetic evaluates the values of variables it names, and an array
                // subscript in a value runs commands (`x='a[$(cmd)]'; $((x))`): numbers only.
                if !inner.chars().all(|c| c.is_ascii_digit() || " \t+-*/%()<>=!&|^~?:,".contains(c))
                {
                    return error("arithmetic on variables `$((...))`");
                }
                Ok(false)
            }
            Some('[') => error("arithmetic `$[...]`"),
            Some('(') => {
                self.pos += 2;
                self.sequence(End::CloseParen)?;
                self.expect_close()?;
                Ok(false)
            }
            Some('{') => {
                self.pos += 2;
                let start = self.pos;
                self.skip_balanced('{', '}', 1)?;
                let inner: String = self.chars[start..self.pos - 1].iter().collect();
                if !simple_parameter(&inner) {
                    return error(format!(
                        "the expansion `${{{inner}}}` (only plain parameters and defaults are checked)"
                    ));
                }
                Ok(false)
            }
            // `$"..."` is a translated string: its text is whatever the locale says.
            Some('"') => {
                self.pos += 1;
                Ok(false)
            }
            Some('\'') => {
                self.pos += 2;
                let mut escaped = false;
                loop {
                    match self.peek() {
                        None => return error("an unclosed $'...' string"),
                        Some('\'') => break,
                        Some('\\') => {
                            escaped = true;
                            self.pos += 1;
                            if let Some(next) = self.peek() {
                                text.push(next);
                            }
                        }
                        Some(c) => text.push(c),
                    }
                    self.pos += 1;
                }
                self.pos += 1;
                Ok(!escaped)
            }
            Some(c) if c == '_' || c.is_ascii_alphanumeric() || "@*#?$!-".contains(c) => {
                self.pos += 2;
                if c == '_' || c.is_ascii_alphabetic() {
                    while self.peek().is_some_and(|c| c == '_' || c.is_ascii_alphanumeric()) {
                        self.pos += 1;
                    }
                }
                Ok(false)
            }
            _ => {
                text.push('$');
                self.pos += 1;
                Ok(true)
            }
        }
    }

    /// Skips to the `close` that balances `depth` already-open `open`s, minding quotes.
    fn skip_balanced(
        &mut self,
        open: char,
        close: char,
        mut depth: usize,
    ) -> Result<(), ParseError> {
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                '\\' => self.pos += 1,
                '\'' => {
                    while self.peek().is_some_and(|c| c != '\'') {
                        self.pos += 1;
                    }
                    self.pos += 1;
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        error(format!("a `{open}` is never closed"))
    }

    /// `` `...` ``: the inside is unescaped and parsed as a script of its own. Inside
    /// `"..."` (`in_double`) bash also turns `\"` into `"`.
    fn backtick(&mut self, in_double: bool) -> Result<(), ParseError> {
        self.pos += 1;
        let mut inner = String::new();
        loop {
            match self.peek() {
                None => return error("an unclosed backquote"),
                Some('`') => break,
                Some('\\')
                    if matches!(self.peek_at(1), Some('`' | '\\' | '$'))
                        || (in_double && self.peek_at(1) == Some('"')) =>
                {
                    if let Some(next) = self.peek_at(1) {
                        inner.push(next);
                    }
                    self.pos += 2;
                    continue;
                }
                Some(c) => inner.push(c),
            }
            self.pos += 1;
        }
        self.pos += 1;
        if self.depth >= MAX_DEPTH {
            return error("nested too deeply");
        }
        let mut nested = Parser::new(&inner, self.depth);
        nested.sequence(End::Eof)?;
        self.commands.append(&mut nested.commands);
        Ok(())
    }
}

/// A shell variable name.
pub(crate) fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Whether `${inner}` expands a parameter without evaluating anything: `${x}`, `${#x}`,
/// `${1}`, `${x:-text}`, `${x%pattern}`, `${x/a/b}`... Not `${x@P}` (prompt expansion
/// runs substitutions in the value), `${!x}` (indirection), `${a[i]}` and `${x:1:2}`
/// (arithmetic, which can run commands), nor anything with `$`, `` ` `` or `(` inside.
fn simple_parameter(inner: &str) -> bool {
    let body = match inner.strip_prefix('#') {
        Some(name) if !name.is_empty() => return parameter_name_len(name) == Some(name.len()),
        Some(_) | None => inner,
    };
    let Some(name_len) = parameter_name_len(body) else { return false };
    let operation = &body[name_len..];
    if operation.is_empty() {
        return true;
    }
    // Not `=`/`:=`: they assign (`${GIT_DIR=x}`), and `set -a` exports what they set.
    const OPERATORS: [&str; 11] = [":-", ":+", ":?", "-", "+", "?", "%", "#", "/", "^", ","];
    OPERATORS.iter().any(|operator| operation.starts_with(operator))
        && !operation.contains(['$', '`', '(', '@', '!'])
}

/// The length of the parameter name at the start of `text`: a variable name, digits,
/// or one special parameter.
fn parameter_name_len(text: &str) -> Option<usize> {
    let name = text.chars().take_while(|c| *c == '_' || c.is_ascii_alphanumeric()).count();
    if name > 0 {
        let all_digits = text[..name].chars().all(|c| c.is_ascii_digit());
        let starts_with_digit = text.starts_with(|c: char| c.is_ascii_digit());
        return (all_digits || !starts_with_digit).then_some(name);
    }
    text.starts_with(['@', '*', '#', '?', '$', '!', '-']).then_some(1)
}
