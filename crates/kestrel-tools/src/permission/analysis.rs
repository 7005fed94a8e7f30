//! What a shell command line would do, part by part: each simple command (in lists,
//! pipelines, subshells and substitutions alike) that is not known to be read-only,
//! and each redirection that writes a file. No concern at all means the whole line is
//! read-only. A line the parser cannot follow is one concern: it is not known safe.

use super::command::{self, RedirectKind, SimpleCommand, Word};
use super::read_only;
use crate::workspace::normalize;
use std::path::{Path, PathBuf};

/// Shells whose `-c SCRIPT` is judged as a command line of its own.
const SHELLS: [&str; 4] = ["bash", "sh", "dash", "zsh"];

/// Targets a redirection may write without changing anything.
const HARMLESS_TARGETS: [&str; 3] = ["/dev/null", "/dev/stdout", "/dev/stderr"];

/// Variables a command may be prefixed with (`LC_ALL=C sort`) and stay read-only.
const HARMLESS_ASSIGNMENTS: [&str; 7] =
    ["LC_ALL", "LANG", "LANGUAGE", "TZ", "NO_COLOR", "COLUMNS", "TERM"];

/// How deep `bash -c 'bash -c ...'` is followed.
const MAX_NESTED_SHELLS: usize = 4;

/// One reason a command line is not read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Concern {
    /// A simple command not known to be read-only.
    Command {
        /// The command as written (words joined), for people.
        text: String,
        /// Its leading literal words (up to the first computed one): what allow rules
        /// are matched against.
        leading: Vec<String>,
        /// The rule that would allow it ("cargo test"), when its first words are literal.
        prefix: Option<String>,
        reason: String,
    },
    /// A redirection that writes a file.
    Write {
        /// The target as written.
        target: String,
        /// The file, resolved against the command's directory, when the target is literal.
        path: Option<PathBuf>,
    },
    /// The line uses syntax the parser does not follow.
    Unparsed { reason: String },
}

impl Concern {
    /// For people: "`cargo test` is not a known read-only command".
    pub fn describe(&self) -> String {
        match self {
            Concern::Command { text, reason, .. } => format!("`{text}`: {reason}"),
            Concern::Write { target, .. } => format!("`> {target}` writes a file"),
            Concern::Unparsed { reason } => format!("the command cannot be checked ({reason})"),
        }
    }
}

/// The concerns of one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandAnalysis {
    pub concerns: Vec<Concern>,
}

impl CommandAnalysis {
    /// True when every part is known to be read-only.
    pub fn is_read_only(&self) -> bool {
        self.concerns.is_empty()
    }
}

/// Analyses `line` as run by `bash -c` in `dir` (relative redirection targets resolve
/// against it).
pub fn analyze(line: &str, dir: &Path) -> CommandAnalysis {
    let mut concerns = Vec::new();
    analyze_into(line, dir, 0, &mut concerns);
    CommandAnalysis { concerns }
}

fn analyze_into(line: &str, dir: &Path, depth: usize, concerns: &mut Vec<Concern>) {
    let commands = match command::parse(line) {
        Ok(commands) => commands,
        Err(error) => {
            concerns.push(Concern::Unparsed { reason: error.reason });
            return;
        }
    };
    for command in &commands {
        judge_command(command, dir, depth, concerns);
    }
}

fn judge_command(command: &SimpleCommand, dir: &Path, depth: usize, concerns: &mut Vec<Concern>) {
    for redirection in &command.redirections {
        if redirection.kind != RedirectKind::Write {
            continue;
        }
        let target = &redirection.target;
        if target.literal && HARMLESS_TARGETS.contains(&target.text.as_str()) {
            continue;
        }
        let path = target.literal.then(|| normalize(&dir.join(&target.text)));
        concerns.push(Concern::Write { target: target.text.clone(), path });
    }
    let text = words_text(&command.words);
    let words = strip_wrappers(&command.words);
    if let Some(script) = nested_shell_script(words) {
        if depth < MAX_NESTED_SHELLS {
            analyze_into(script, dir, depth + 1, concerns);
        } else {
            concerns.push(Concern::Unparsed { reason: "shells nested too deeply".into() });
        }
        return;
    }
    let harmful_assignment =
        command.assignments.iter().find(|(name, _)| !HARMLESS_ASSIGNMENTS.contains(&name.as_str()));
    let reason = match harmful_assignment {
        Some((name, _)) if words.is_empty() => {
            Some(format!("it sets the shell variable {name}, which later commands may use"))
        }
        Some((name, _)) => Some(format!("it runs with {name} changed")),
        None => read_only::judge(words),
    };
    if let Some(reason) = reason {
        let shown = if text.is_empty() {
            command
                .assignments
                .iter()
                .map(|(name, _)| format!("{name}=…"))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            text
        };
        let leading =
            words.iter().take_while(|word| word.literal).map(|word| word.text.clone()).collect();
        concerns.push(Concern::Command { text: shown, leading, prefix: prefix(words), reason });
    }
}

/// `timeout 10 cmd ...` and `nice -n 5 cmd ...` are judged as `cmd ...`.
fn strip_wrappers(words: &[Word]) -> &[Word] {
    let Some(first) = words.first().filter(|word| word.literal) else { return words };
    let mut rest = &words[1..];
    match first.text.as_str() {
        "timeout" => {
            while rest.first().is_some_and(|word| word.literal && word.text.starts_with('-')) {
                let takes_value =
                    matches!(rest[0].text.as_str(), "-s" | "-k" | "--signal" | "--kill-after");
                rest = &rest[if takes_value { 2.min(rest.len()) } else { 1 }..];
            }
            // The duration.
            if rest.first().is_some_and(|word| word.literal) {
                rest = &rest[1..];
            } else {
                return words;
            }
        }
        "nice" => {
            if rest.first().is_some_and(|word| word.literal && word.text == "-n") {
                rest = &rest[2.min(rest.len())..];
            }
        }
        _ => return words,
    }
    if rest.is_empty() { words } else { strip_wrappers(rest) }
}

/// The script of `bash -c SCRIPT` (options like `-l`, `-e` allowed before `-c`).
fn nested_shell_script(words: &[Word]) -> Option<&str> {
    let (name, args) = words.split_first()?;
    if !name.literal || !SHELLS.contains(&name.text.as_str()) {
        return None;
    }
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let flags = arg.text.strip_prefix('-').filter(|_| arg.literal)?;
        if flags.is_empty() || !flags.chars().all(|c| c.is_ascii_alphabetic()) {
            return None;
        }
        if flags.contains('c') {
            let script = iter.next().filter(|word| word.literal)?;
            return Some(script.text.as_str());
        }
    }
    None
}

/// The allow-rule for a command: its name and up to two subcommand-like words after
/// it (`cargo test`, `npm run build`); `None` when the name is computed.
fn prefix(words: &[Word]) -> Option<String> {
    let (name, rest) = words.split_first()?;
    if !name.literal || name.text.is_empty() {
        return None;
    }
    let mut parts = vec![name.text.as_str()];
    for word in rest.iter().take(2) {
        let subcommand = word.literal
            && !word.text.is_empty()
            && !word.text.starts_with('-')
            && word.text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'));
        if !subcommand {
            break;
        }
        parts.push(word.text.as_str());
    }
    Some(parts.join(" "))
}

fn words_text(words: &[Word]) -> String {
    words.iter().map(|word| word.text.as_str()).collect::<Vec<_>>().join(" ")
}

/// Whether a command's leading literal words start with the rule `prefix`.
pub(crate) fn matches_prefix(leading: &[String], prefix: &str) -> bool {
    let mut words = leading.iter();
    let mut parts = prefix.split_whitespace().peekable();
    parts.peek().is_some() && parts.all(|part| words.next().is_some_and(|word| word == part))
}
