//! What a shell command line would do, part by part: each simple command (in lists,
//! pipelines, subshells and substitutions alike) that is not known to be read-only,
//! and each redirection that writes a file. No concern at all means the whole line is
//! read-only. A line the parser cannot follow is one concern: it is not known safe.

use super::command::{self, RedirectKind, SimpleCommand, Word, is_name};
use super::{git, operands, read_only};
use crate::workspace::normalize;
use std::path::{Path, PathBuf};

/// Shells whose `-c SCRIPT` is judged as a command line of its own.
const SHELLS: [&str; 4] = ["bash", "sh", "dash", "zsh"];

/// Targets a redirection may write without changing anything.
const HARMLESS_TARGETS: [&str; 3] = ["/dev/null", "/dev/stdout", "/dev/stderr"];

/// Variables a command may be prefixed with (`LC_ALL=C sort`) and stay read-only.
const HARMLESS_ASSIGNMENTS: [&str; 7] =
    ["LC_ALL", "LANG", "LANGUAGE", "TZ", "NO_COLOR", "COLUMNS", "TERM"];

/// Options of a shell that leave its `-c SCRIPT` to be judged as written.
/// Not `-a` (allexport: every variable set later is exported, `GIT_*` for git).
const SHELL_FLAGS: &str = "clexuvnfBCEhHmPpTbr";

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
        /// Whether `leading` is the whole command (no word is computed): only then can
        /// a rule for the exact command cover it.
        complete: bool,
        /// The rule that would allow it ("cargo test"), when its first words are literal.
        prefix: Option<String>,
        reason: String,
        /// For a `git` command: the directories it may run in (after its `-C`s), empty
        /// when not known (after `cd $X`, with `GIT_*` set on it or earlier, with
        /// `--git-dir`, through `timeout`/`nice` or in a nested shell...). `None` for any
        /// other command.
        git_dirs: Option<Vec<PathBuf>>,
        /// The paths its literal operands may name, in every directory it may run in: a
        /// rule does not cover it when a symlink leads one astray (see `operands.rs`).
        /// `None` when it has a relative operand and its directory is not known.
        operands: Option<Vec<PathBuf>>,
    },
    /// A redirection that writes a file.
    Write {
        /// The target as written.
        target: String,
        /// The file, resolved against the command's directory, when the target is literal.
        path: Option<PathBuf>,
    },
    /// A redirection that may reach the network (`< /dev/tcp/host/port`) or opens a
    /// file computed when the line runs (`< $F`): no rule covers it.
    Opens { target: String },
    /// The line uses syntax the parser does not follow.
    Unparsed { reason: String },
}

impl Concern {
    /// For people: "`cargo test` is not a known read-only command".
    pub fn describe(&self) -> String {
        match self {
            Concern::Command { text, reason, .. } => format!("`{text}`: {reason}"),
            Concern::Write { target, path: Some(path) } => {
                format!("`> {target}` writes {}", path.display())
            }
            Concern::Write { target, path: None } => format!("`> {target}` writes a file"),
            Concern::Opens { target } => format!(
                "the redirection to `{target}` may reach the network or open a file not known \
                 before the line runs"
            ),
            Concern::Unparsed { reason } => format!("the command cannot be checked ({reason})"),
        }
    }
}

/// The concerns of one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandAnalysis {
    pub concerns: Vec<Concern>,
    /// Parts known read-only only by what the files said when the line was judged
    /// (git reads the repository's config), as [`Concern::Command`]s. Run after other
    /// parts of the line changed things (`git init --template=./t sub && git -C sub
    /// status`), they may run anything: a line covered by rules (outside the sandbox
    /// in ask) needs a rule for each of these too.
    pub judged_on_files: Vec<Concern>,
}

impl CommandAnalysis {
    /// True when every part is known to be read-only.
    pub fn is_read_only(&self) -> bool {
        self.concerns.is_empty()
    }
}

/// Analyses `line` as run by `bash -c` in `dir` (relative redirection targets resolve
/// against it, and against every directory a `cd` in the line may have moved to).
pub fn analyze(line: &str, dir: &Path) -> CommandAnalysis {
    let mut analysis = CommandAnalysis { concerns: Vec::new(), judged_on_files: Vec::new() };
    let mut location = Location {
        dirs: vec![dir.to_path_buf()],
        unknown: false,
        git_env: false,
        path_changed: false,
        in_order: in_order(line),
    };
    analyze_into(line, &mut location, 0, &mut analysis);
    analysis
}

/// Where the next command of a line may run. A `cd` may or may not have taken effect
/// (it can fail, sit in a subshell or in one branch of `||`), so it adds its
/// destination to the directories rather than replacing them; a destination that is
/// not known before the line runs (`cd $X`, `cd -`, `popd`) makes the place unknown.
struct Location {
    dirs: Vec<PathBuf>,
    unknown: bool,
    /// An earlier command may have set or exported `GIT_*` (git then reads other config,
    /// another repository...).
    git_env: bool,
    /// An earlier command may have changed `PATH`: a later command name may run anything.
    path_changed: bool,
    /// The line's commands run one after another as they appear (see [`in_order`]).
    in_order: bool,
}

/// Whether the commands of `line` surely run one after another in the order they appear:
/// lists (`;`, `&&`, `||`, newlines) only, nothing that runs commands at the same time
/// or earlier than written (a pipe, `&`, a substitution). Judged on the text alone, so a
/// `|`, `&`, `$`, backtick or `(` anywhere (quoted too, `2>&1` too) says no.
fn in_order(line: &str) -> bool {
    !line.replace("&&", "").replace("||", "").contains(['|', '&', '$', '`', '('])
}

/// Builtins that set, export or read into variables by the names in their arguments
/// (`printf` only with `-v`).
const SETS_VARIABLES: [&str; 11] = [
    "export",
    "declare",
    "typeset",
    "local",
    "readonly",
    "read",
    "mapfile",
    "readarray",
    "getopts",
    "unset",
    "let",
];

/// Builtins that run code they build or read: they may set anything.
const RUNS_CODE: [&str; 3] = ["eval", "source", "."];

impl Location {
    fn places(&self) -> Option<&[PathBuf]> {
        (!self.unknown).then_some(self.dirs.as_slice())
    }

    /// Notes which variables that change what later commands do `command` may set:
    /// `GIT_*`, `PATH`, `CDPATH` by a plain assignment or a builtin that names them (or
    /// names a computed variable).
    fn note_variables(&mut self, command: &SimpleCommand, words: &[Word]) {
        let mut names: Vec<(&str, bool)> = Vec::new();
        if words.is_empty() {
            names.extend(command.assignments.iter().map(|(name, _)| (name.as_str(), true)));
        }
        let runs_code = words
            .first()
            .is_some_and(|name| !name.literal || RUNS_CODE.contains(&name.text.as_str()));
        if runs_code {
            names.push(("", false));
        }
        let setter = words.first().is_some_and(|name| {
            SETS_VARIABLES.contains(&name.text.as_str())
                || (name.text == "printf"
                    && words[1..].iter().any(|word| word.text.starts_with("-v")))
        });
        if setter {
            names.extend(words[1..].iter().map(|word| (word.text.as_str(), word.literal)));
        }
        for (name, literal) in names {
            let all = !literal;
            if all || name.contains("GIT_") {
                self.git_env = true;
            }
            if all || name.contains("PATH") {
                self.path_changed = true;
            }
            if all || name.contains("CDPATH") {
                self.unknown = true;
            }
        }
    }

    /// Follows `cd`/`pushd`/`popd` (other commands leave the location as it is).
    fn follow(&mut self, words: &[Word]) {
        let Some(name) = words.first().filter(|word| word.literal) else { return };
        if !matches!(name.text.as_str(), "cd" | "pushd" | "popd") {
            return;
        }
        let target = words[1..].iter().find(|word| !(word.literal && word.text.starts_with('-')));
        let known =
            |word: &&Word| word.literal && name.text != "popd" && !word.text.starts_with('+');
        let Some(target) = target.filter(known) else {
            // `cd` alone goes home; `cd -`, `popd`, `pushd +1`, `cd $X`: somewhere not
            // known here.
            self.unknown = true;
            return;
        };
        let relative = !target.text.starts_with('/');
        let searched = relative
            && !(target.text == "." || target.text == ".." || target.text.starts_with("./"))
            && !target.text.starts_with("../")
            && std::env::var_os("CDPATH").is_some_and(|path| !path.is_empty());
        if searched {
            // CDPATH may send a relative `cd` anywhere.
            self.unknown = true;
            return;
        }
        if !lexical(&target.text) {
            self.unknown = true;
            return;
        }
        let moved: Vec<PathBuf> =
            self.dirs.iter().map(|dir| normalize(&dir.join(&target.text))).collect();
        for dir in moved {
            if !self.dirs.contains(&dir) {
                self.dirs.push(dir);
            }
        }
        // Each `cd` can double the places; past a few dozen, stop counting.
        if self.dirs.len() > MAX_PLACES {
            self.unknown = true;
        }
    }
}

/// How many directories a line may be in before its place counts as unknown.
const MAX_PLACES: usize = 64;

/// Whether `path` means what it says when `..` is resolved by dropping the previous
/// name: not after a name (`link/..` is the parent of where `link` points, which may be
/// anywhere).
pub(crate) fn lexical(path: &str) -> bool {
    let mut named = false;
    for component in Path::new(path).components() {
        match component {
            std::path::Component::Normal(_) => named = true,
            std::path::Component::ParentDir if named => return false,
            std::path::Component::ParentDir
            | std::path::Component::CurDir
            | std::path::Component::RootDir
            | std::path::Component::Prefix(_) => {}
        }
    }
    true
}

fn analyze_into(line: &str, location: &mut Location, depth: usize, analysis: &mut CommandAnalysis) {
    let commands = match command::parse(line) {
        Ok(commands) => commands,
        Err(error) => {
            analysis.concerns.push(Concern::Unparsed { reason: error.reason });
            return;
        }
    };
    for command in &commands {
        judge_command(command, location, depth, analysis);
    }
}

/// Whether a redirection target may be a socket bash opens itself (`/dev/tcp/h/p`,
/// `/dev/udp/h/p`), wherever it appears in the word.
fn network_target(target: &str) -> bool {
    target.contains("/dev/tcp/") || target.contains("/dev/udp/")
}

fn judge_command(
    command: &SimpleCommand,
    location: &mut Location,
    depth: usize,
    analysis: &mut CommandAnalysis,
) {
    for redirection in &command.redirections {
        let target = &redirection.target;
        let opens = match redirection.kind {
            RedirectKind::Write | RedirectKind::Read => {
                network_target(&target.text)
                    || (redirection.kind == RedirectKind::Read && !target.literal)
            }
            RedirectKind::Text | RedirectKind::Duplicate => false,
        };
        if opens {
            let concern = Concern::Opens { target: target.text.clone() };
            if !analysis.concerns.contains(&concern) {
                analysis.concerns.push(concern);
            }
            continue;
        }
        if redirection.kind != RedirectKind::Write {
            continue;
        }
        if target.literal && HARMLESS_TARGETS.contains(&target.text.as_str()) {
            continue;
        }
        let mut push = |path: Option<PathBuf>| {
            let concern = Concern::Write { target: target.text.clone(), path };
            if !analysis.concerns.contains(&concern) {
                analysis.concerns.push(concern);
            }
        };
        if !target.literal || !lexical(&target.text) {
            push(None);
        } else if target.text.starts_with('/') {
            push(Some(normalize(Path::new(&target.text))));
        } else if location.unknown {
            push(None);
        } else {
            for dir in &location.dirs {
                push(Some(normalize(&dir.join(&target.text))));
            }
        }
    }
    let text = words_text(&command.words);
    let words = strip_wrappers(&command.words);
    let harmful_assignment =
        command.assignments.iter().find(|(name, _)| !HARMLESS_ASSIGNMENTS.contains(&name.as_str()));
    // `BASH_ENV=x bash -c '…'` runs `x` first: only a shell started as written is
    // judged by its script.
    if let Some(script) = nested_shell_script(words).filter(|_| harmful_assignment.is_none()) {
        if depth < MAX_NESTED_SHELLS {
            analyze_into(script, location, depth + 1, analysis);
        } else {
            analysis.concerns.push(Concern::Unparsed { reason: "shells nested too deeply".into() });
        }
        return;
    }
    let program = words.first().filter(|word| word.literal).map(|word| word.text.as_str());
    let reason = match harmful_assignment {
        Some((name, _)) if words.is_empty() => {
            Some(format!("it sets the shell variable {name}, which later commands may use"))
        }
        Some((name, _)) => Some(format!("it runs with {name} changed")),
        None if location.path_changed && !words.is_empty() => {
            Some("an earlier command in the line may change PATH, so what it runs is not known".into())
        }
        None if location.git_env && program.is_some_and(|name| name.ends_with("git")) => Some(
            "an earlier command in the line may set GIT_* variables, which change what git reads and runs"
                .into(),
        ),
        None => read_only::judge(words, location.places()),
    };
    // A git part that runs before every part that is not read-only reads the
    // repository as it was judged: its verdict holds.
    let judged_on_files = reason.is_none()
        && read_only::judged_on_files(words)
        && !(location.in_order && analysis.concerns.is_empty());
    let reason = reason.or_else(|| {
        judged_on_files.then(|| {
            "git judged it read-only by the repository as it was before the line ran".to_string()
        })
    });
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
        // Allow rules match the command as written, assignments included: `git diff`
        // does not cover `GIT_EXTERNAL_DIFF=x git diff`, a rule naming the assignment does.
        let mut leading = Vec::new();
        let mut complete = words.iter().all(|word| word.literal);
        for (name, value) in &command.assignments {
            if !value.literal {
                break;
            }
            leading.push(format!("{name}={}", value.text));
        }
        if leading.len() == command.assignments.len() {
            leading
                .extend(words.iter().take_while(|word| word.literal).map(|word| word.text.clone()));
        } else {
            // A computed assignment: no rule can say what the command runs with.
            leading.clear();
            complete = false;
        }
        // `LC_ALL=C git status`: the rule for `git status` covers it (see `matches_rule`).
        let harmless_only = command
            .assignments
            .iter()
            .all(|(name, _)| HARMLESS_ASSIGNMENTS.contains(&name.as_str()));
        let prefix = if harmless_only { prefix(words) } else { None };
        // Through `timeout`/`nice` or in a nested shell, git is the real one, not the
        // function that pins a covered line's git to the session's repository.
        let wrapped = depth > 0 || words.len() != command.words.len();
        let git_dirs = git_dirs(command, words, location, wrapped);
        let operands = operands::candidates(words, location.places());
        let concern =
            Concern::Command { text: shown, leading, complete, prefix, reason, git_dirs, operands };
        if judged_on_files {
            analysis.judged_on_files.push(concern);
        } else {
            analysis.concerns.push(concern);
        }
    }
    location.note_variables(command, words);
    location.follow(words);
}

/// For a `git` command, the directories it may run in: see [`Concern::Command`]. None
/// known (empty) when `wrapped`: the pinning does not reach it.
fn git_dirs(
    command: &SimpleCommand,
    words: &[Word],
    location: &Location,
    wrapped: bool,
) -> Option<Vec<PathBuf>> {
    let name = words.first().filter(|word| word.literal)?;
    if name.text.rsplit('/').next() != Some("git") {
        return None;
    }
    let git_set =
        location.git_env || command.assignments.iter().any(|(name, _)| name.starts_with("GIT_"));
    let places = location.places().filter(|_| !git_set && !wrapped);
    let Some(places) = places else { return Some(Vec::new()) };
    let args: Vec<&str> =
        words[1..].iter().take_while(|word| word.literal).map(|word| word.text.as_str()).collect();
    Some(git::run_dirs(&args, places))
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
        // Not `-k` (a `NAME=value` argument becomes an environment assignment), `-i`
        // (aliases), `-s` (a script on stdin), nor options with values (`-O`, `-o`).
        if flags.is_empty() || !flags.chars().all(|c| SHELL_FLAGS.contains(c)) {
            return None;
        }
        if flags.contains('c') {
            let script = iter.next().filter(|word| word.literal)?;
            return Some(script.text.as_str());
        }
    }
    None
}

/// Tools whose first word is a subcommand: "always" covers that subcommand.
const MULTI_COMMAND: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "docker",
    "podman",
    "kubectl",
    "helm",
    "go",
    "gh",
    "pip",
    "pip3",
    "uv",
    "poetry",
    "rustup",
    "dotnet",
    "terraform",
    "systemctl",
    "brew",
    "apt",
    "apt-get",
    "deno",
    "mvn",
    "gradle",
    "make",
    "just",
    "nix",
    "conda",
];

/// Subcommands that run what the next word names (`npm run build`, `go run ./cmd/x`):
/// "always" covers that one thing, not every script.
const RUNNING_SUBCOMMANDS: [&str; 5] = ["run", "run-script", "exec", "x", "compose"];

/// Programs that run code or other programs named by their arguments (interpreters,
/// wrappers): "always" covers only the whole command as written.
const RUNS_ITS_ARGUMENTS: &[&str] = &[
    "python",
    "node",
    "nodejs",
    "bash",
    "sh",
    "dash",
    "zsh",
    "ksh",
    "fish",
    "perl",
    "ruby",
    "php",
    "lua",
    "luajit",
    "Rscript",
    "pwsh",
    "osascript",
    "tclsh",
    "awk",
    "gawk",
    "mawk",
    "xargs",
    "env",
    "sudo",
    "doas",
    "nohup",
    "exec",
    "eval",
    "source",
    ".",
    "command",
    "builtin",
    "watch",
    "stdbuf",
    "ionice",
    "setsid",
    "flock",
    "strace",
    "ltrace",
    "npx",
    "uvx",
    "bunx",
    "pnpx",
];

/// The allow-rule offered for "always", never broader than needed: for a tool with
/// subcommands (`git`, `cargo`...) the tool and its subcommand (`cargo test`), for
/// anything else the whole command; an interpreter alone (`python3`) gets none. `None`
/// as well when a word is computed or holds blanks, or when a global option comes
/// before the subcommand (`git -c k=v status`, `cargo +nightly build`).
fn prefix(words: &[Word]) -> Option<String> {
    let plain = |word: &Word| {
        word.literal && !word.text.is_empty() && !word.text.chars().any(char::is_whitespace)
    };
    let subcommand = |word: &Word| {
        plain(word)
            && !word.text.starts_with(['-', '+'])
            && word
                .text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
    };
    let (name, rest) = words.split_first()?;
    if !plain(name) {
        return None;
    }
    let program = name.text.rsplit('/').next().unwrap_or(&name.text);
    if MULTI_COMMAND.contains(&program) {
        let first = rest.first().filter(|word| subcommand(word))?;
        if program == "git" && git_beyond_a_subcommand_rule(rest) {
            // Only "allow once": a rule for the subcommand would cover other programs.
            return None;
        }
        let mut parts = vec![name.text.as_str(), first.text.as_str()];
        if RUNNING_SUBCOMMANDS.contains(&first.text.as_str())
            && let Some(target) =
                rest.get(1).filter(|word| plain(word) && !word.text.starts_with('-'))
        {
            parts.push(target.text.as_str());
        }
        return Some(parts.join(" "));
    }
    let interpreter = RUNS_ITS_ARGUMENTS.contains(&program)
        || program
            .strip_prefix("python")
            .is_some_and(|version| version.chars().all(|c| c.is_ascii_digit() || c == '.'));
    if (interpreter && rest.is_empty()) || !rest.iter().all(plain) {
        return None;
    }
    Some(words_text(words))
}

/// [`git::beyond_a_subcommand_rule`] for the words after `git`.
fn git_beyond_a_subcommand_rule(words: &[Word]) -> bool {
    let complete = words.iter().all(|word| word.literal);
    let args: Vec<&str> =
        words.iter().take_while(|word| word.literal).map(|word| word.text.as_str()).collect();
    git::beyond_a_subcommand_rule(&args, complete)
}

fn words_text(words: &[Word]) -> String {
    words.iter().map(|word| word.text.as_str()).collect::<Vec<_>>().join(" ")
}

/// Whether the rule `rule` covers a command whose leading literal words are `leading`
/// (`complete`: they are all its words). A rule naming a tool and its subcommand
/// (`cargo test`, `npm run build`) covers that subcommand with any further arguments;
/// any other rule covers exactly the command it names (`touch once.txt` does not cover
/// `touch once.txt /elsewhere`). A git subcommand's rule never covers arguments that
/// run programs or write where they say (`git rebase -x CMD`, `git log --output=F`: see
/// [`git::beyond_a_subcommand_rule`]).
pub(crate) fn matches_rule(leading: &[String], complete: bool, rule: &str) -> bool {
    let parts: Vec<&str> = rule.split_whitespace().collect();
    // `LC_ALL=C cargo test`: the assignments, then the tool.
    let assigned = parts
        .iter()
        .take_while(|part| part.split_once('=').is_some_and(|(name, _)| is_name(name)))
        .count();
    let command = &parts[assigned..];
    // A rule without assignments covers the command with harmless ones (`LC_ALL=C`).
    let harmless = |word: &String| {
        word.split_once('=').is_some_and(|(name, _)| HARMLESS_ASSIGNMENTS.contains(&name))
    };
    let skipped =
        if assigned == 0 { leading.iter().take_while(|word| harmless(word)).count() } else { 0 };
    let leading = &leading[skipped..];
    let Some(first) = command.first() else { return false };
    let program = first.rsplit('/').next().unwrap_or(first);
    let by_prefix = MULTI_COMMAND.contains(&program)
        && match command.len() {
            2 => !RUNNING_SUBCOMMANDS.contains(&command[1]),
            3 => RUNNING_SUBCOMMANDS.contains(&command[1]),
            _ => false,
        };
    let starts =
        leading.len() >= parts.len() && leading.iter().zip(&parts).all(|(word, part)| word == part);
    if by_prefix {
        let after = leading.get(assigned + 1..).unwrap_or_default();
        let words: Vec<&str> = after.iter().map(String::as_str).collect();
        starts && !(program == "git" && git::beyond_a_subcommand_rule(&words, complete))
    } else {
        starts && complete && leading.len() == parts.len()
    }
}
