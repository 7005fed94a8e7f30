//! Whether a `git` command only reads. Two things decide it: its words (a subcommand
//! that reads, with flags from a list of harmless ones, by exact name: git takes
//! abbreviations of long options too) and the repository it runs in, which must not
//! configure programs for itself (`repository.rs`).

use std::path::PathBuf;

/// Where a command may be running: each directory it might be in, or unknown.
pub(crate) type Places<'a> = Option<&'a [PathBuf]>;

type Verdict = Result<(), String>;

/// The flags (long: exact names, with or without `=value`) of the reading subcommands
/// that change nothing and run nothing.
const SAFE_LONG: &[&str] = &[
    // diff output
    "patch",
    "no-patch",
    "unified",
    "raw",
    "patch-with-raw",
    "patch-with-stat",
    "indent-heuristic",
    "no-indent-heuristic",
    "minimal",
    "patience",
    "histogram",
    "anchored",
    "diff-algorithm",
    "stat",
    "stat-width",
    "stat-name-width",
    "stat-count",
    "stat-graph-width",
    "compact-summary",
    "numstat",
    "shortstat",
    "dirstat",
    "cumulative",
    "dirstat-by-file",
    "summary",
    "name-only",
    "name-status",
    "submodule",
    "color",
    "no-color",
    "color-moved",
    "no-color-moved",
    "color-moved-ws",
    "no-color-moved-ws",
    "word-diff",
    "word-diff-regex",
    "color-words",
    "no-renames",
    "renames",
    "rename-empty",
    "no-rename-empty",
    "check",
    "ws-error-highlight",
    "full-index",
    "binary",
    "abbrev",
    "no-abbrev",
    "break-rewrites",
    "find-renames",
    "find-copies",
    "find-copies-harder",
    "irreversible-delete",
    "diff-filter",
    "pickaxe-all",
    "pickaxe-regex",
    "skip-to",
    "rotate-to",
    "relative",
    "no-relative",
    "text",
    "ignore-cr-at-eol",
    "ignore-space-at-eol",
    "ignore-space-change",
    "ignore-all-space",
    "ignore-blank-lines",
    "ignore-matching-lines",
    "inter-hunk-context",
    "function-context",
    "exit-code",
    "quiet",
    "no-ext-diff",
    "no-textconv",
    "ignore-submodules",
    "src-prefix",
    "dst-prefix",
    "no-prefix",
    "default-prefix",
    "line-prefix",
    "ita-invisible-in-index",
    "ita-visible-in-index",
    "cached",
    "staged",
    "merge-base",
    "no-index",
    "output-indicator-new",
    "output-indicator-old",
    "output-indicator-context",
    // log and revision walking
    "oneline",
    "pretty",
    "format",
    "abbrev-commit",
    "no-abbrev-commit",
    "encoding",
    "expand-tabs",
    "no-expand-tabs",
    "notes",
    "no-notes",
    "show-notes",
    "standard-notes",
    "no-standard-notes",
    "relative-date",
    "date",
    "parents",
    "children",
    "left-right",
    "graph",
    "show-linear-break",
    "decorate",
    "no-decorate",
    "decorate-refs",
    "decorate-refs-exclude",
    "clear-decorations",
    "source",
    "mailmap",
    "no-mailmap",
    "use-mailmap",
    "no-use-mailmap",
    "full-diff",
    "log-size",
    "max-count",
    "skip",
    "since",
    "after",
    "until",
    "before",
    "since-as-filter",
    "author",
    "committer",
    "grep-reflog",
    "grep",
    "all-match",
    "invert-grep",
    "regexp-ignore-case",
    "basic-regexp",
    "extended-regexp",
    "fixed-strings",
    "perl-regexp",
    "remove-empty",
    "merges",
    "no-merges",
    "min-parents",
    "max-parents",
    "no-min-parents",
    "no-max-parents",
    "first-parent",
    "exclude-first-parent-only",
    "not",
    "all",
    "branches",
    "tags",
    "remotes",
    "glob",
    "exclude",
    "exclude-hidden",
    "reflog",
    "alternate-refs",
    "single-worktree",
    "ignore-missing",
    "cherry-mark",
    "cherry-pick",
    "left-only",
    "right-only",
    "cherry",
    "walk-reflogs",
    "merge",
    "boundary",
    "simplify-by-decoration",
    "show-pulls",
    "full-history",
    "dense",
    "sparse",
    "simplify-merges",
    "ancestry-path",
    "topo-order",
    "date-order",
    "author-date-order",
    "reverse",
    "no-walk",
    "do-walk",
    "count",
    "diff-merges",
    "no-diff-merges",
    "combined-all-paths",
    "dd",
    "cc",
    "follow",
    "timestamp",
    "objects",
    "objects-edge",
    "in-commit-order",
    "no-object-names",
    // status
    "short",
    "branch",
    "show-stash",
    "porcelain",
    "long",
    "verbose",
    "untracked-files",
    "ignored",
    "column",
    "no-column",
    "ahead-behind",
    "no-ahead-behind",
    "null",
    // blame, shortlog, describe
    "root",
    "show-stats",
    "score-debug",
    "show-name",
    "show-number",
    "show-email",
    "line-porcelain",
    "incremental",
    "contents",
    "ignore-rev",
    "ignore-revs-file",
    "color-lines",
    "color-by-age",
    "no-progress",
    "numbered",
    "email",
    "group",
    "contains",
    "candidates",
    "exact-match",
    "debug",
    "match",
    "always",
    "dirty",
    "broken",
    // rev-parse
    "verify",
    "short",
    "abbrev-ref",
    "symbolic",
    "symbolic-full-name",
    "show-toplevel",
    "show-prefix",
    "show-cdup",
    "git-dir",
    "git-common-dir",
    "absolute-git-dir",
    "is-inside-work-tree",
    "is-inside-git-dir",
    "is-bare-repository",
    "is-shallow-repository",
    "show-superproject-working-tree",
    "shared-index-path",
    "sq",
    "default",
    "prefix",
    "local-env-vars",
    "path-format",
    "git-path",
    "show-object-format",
    "show-ref-format",
    "revs-only",
    "no-revs",
    "flags",
    "no-flags",
    "disambiguate",
    "symbolic",
    // ls-files, ls-tree, cat-file, show-ref, merge-base, name-rev, others
    "deleted",
    "modified",
    "others",
    "stage",
    "unmerged",
    "killed",
    "directory",
    "no-empty-directory",
    "eol",
    "deduplicate",
    "exclude-from",
    "exclude-per-directory",
    "exclude-standard",
    "no-exclude-standard",
    "error-unmatch",
    "with-tree",
    "full-name",
    "recurse-submodules",
    "resolve-undo",
    "full-tree",
    "object-only",
    "batch",
    "batch-check",
    "batch-all-objects",
    "buffer",
    "follow-symlinks",
    "unordered",
    "allow-unknown-type",
    "head",
    "heads",
    "hash",
    "dereference",
    "exists",
    "octopus",
    "independent",
    "is-ancestor",
    "fork-point",
    "refs",
    "name-only",
    "no-undefined",
    "human-readable",
    "non-matching",
    "sort",
    "points-at",
    "merged",
    "no-merged",
    "no-contains",
    "ignore-case",
    "omit-empty",
    "shell",
    "perl",
    "python",
    "tcl",
    "untracked",
    "word-regexp",
    "invert-match",
    "line-number",
    "files-with-matches",
    "files-without-match",
    "only-matching",
    "break",
    "heading",
    "show-function",
    "context",
    "after-context",
    "before-context",
    "max-depth",
    "threads",
    "and",
    "or",
    "creation-factor",
    "no-dual-color",
    "build-options",
    "end-of-options",
];

/// Short flags are letters and digits (`-5`, `-U3`, `-Sfoo`): every one of them is
/// harmless in the reading subcommands except `-O` (`git grep -O` opens files in a
/// pager that may be any program).
fn short_flags_ok(bundle: &str) -> bool {
    !bundle.is_empty()
        && bundle.chars().all(|c| (c.is_ascii_alphanumeric() && c != 'O') || c == '%')
}

/// Every flag in `args` is a harmless one.
fn flags_ok(args: &[&str]) -> Verdict {
    for arg in args {
        if *arg == "--" {
            break;
        }
        let harmless = match arg.strip_prefix("--") {
            Some(long) => SAFE_LONG.contains(&long.split('=').next().unwrap_or(long)),
            None => match arg.strip_prefix('-') {
                Some(bundle) => short_flags_ok(bundle),
                None => true,
            },
        };
        if !harmless {
            return Err(format!("`git {arg}` is not a flag known to be harmless"));
        }
    }
    Ok(())
}

/// Subcommands that only read, whatever their (listed) flags.
const READING: [&str; 23] = [
    "status",
    "log",
    "show",
    "diff",
    "blame",
    "shortlog",
    "describe",
    "rev-parse",
    "rev-list",
    "ls-files",
    "ls-tree",
    "cat-file",
    "show-ref",
    "merge-base",
    "name-rev",
    "whatchanged",
    "count-objects",
    "check-ignore",
    "cherry",
    "for-each-ref",
    "grep",
    "version",
    "range-diff",
];

/// Global options (before the subcommand) that change nothing and run nothing.
const HARMLESS_GLOBAL: [&str; 8] = [
    "--no-pager",
    "-P",
    "--no-optional-locks",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-replace-objects",
];

/// The directories `git ARGS` runs in when started in one of `places`: each moved by its
/// `-C` options. Empty when that is not known: a `-C` through a name and `..`, or any
/// other global option (`--git-dir`, `--work-tree`, `-c`...) that may choose another
/// repository or config.
pub(crate) fn run_dirs(args: &[&str], places: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = places.to_vec();
    let mut rest = args;
    loop {
        match rest {
            ["-C", dir, more @ ..] if super::analysis::lexical(dir) => {
                dirs = dirs
                    .iter()
                    .map(|place| crate::workspace::normalize(&place.join(dir)))
                    .collect();
                rest = more;
            }
            [arg, more @ ..] if HARMLESS_GLOBAL.contains(arg) => rest = more,
            [arg, ..] if arg.starts_with('-') => return Vec::new(),
            _ => return dirs,
        }
    }
}

/// `Ok(())` when `git ARGS` run in any of `places` only reads.
pub(crate) fn judge(args: &[&str], places: Places) -> Verdict {
    let mut rest = args;
    let mut directories: Vec<String> = Vec::new();
    // Global options before the subcommand: only those that change nothing. `-c`,
    // `--exec-path`, `--git-dir`, `--work-tree`, `-p` (a pager)... ask.
    loop {
        match rest.first() {
            Some(&"-C") if rest.len() > 1 => {
                // `link/..` is wherever the link points: the repository there is not known.
                if !super::analysis::lexical(rest[1]) {
                    return Err(format!("`git -C {}`: a directory not known here", rest[1]));
                }
                directories.push(rest[1].to_string());
                rest = &rest[2..];
            }
            Some(arg) if HARMLESS_GLOBAL.contains(arg) => rest = &rest[1..],
            Some(arg) if arg.starts_with('-') => {
                return Err(format!("`git {arg}` can make git run other programs"));
            }
            _ => break,
        }
    }
    let Some((subcommand, args)) = rest.split_first() else { return Ok(()) };
    subcommand_reads(subcommand, args)?;
    let Some(places) = places else {
        return Err("git runs in a directory that is not known before the command runs \
                    (after a `cd`), so its repository's config cannot be checked"
            .into());
    };
    for place in places {
        let mut dir = place.clone();
        for directory in &directories {
            dir = crate::workspace::normalize(&dir.join(directory));
        }
        if let Some(reason) = super::repository::risk(&dir) {
            return Err(reason);
        }
    }
    Ok(())
}

fn subcommand_reads(subcommand: &str, args: &[&str]) -> Verdict {
    let has =
        |flag: &str| args.iter().any(|arg| *arg == flag || arg.starts_with(&format!("{flag}=")));
    let only = |allowed: &[&str]| {
        args.iter().all(|arg| {
            !arg.starts_with('-')
                || allowed.iter().any(|flag| arg == flag || arg.starts_with(&format!("{flag}=")))
        })
    };
    let refuse = || Err(format!("`git {subcommand}` with these arguments can change things"));
    match subcommand {
        _ if READING.contains(&subcommand) => flags_ok(args),
        "branch" => {
            const LISTING: [&str; 22] = [
                "-a",
                "-r",
                "-v",
                "-vv",
                "--all",
                "--remotes",
                "--verbose",
                "--list",
                "-l",
                "--show-current",
                "--no-color",
                "--color",
                "--sort",
                "--format",
                "--merged",
                "--no-merged",
                "--contains",
                "--no-contains",
                "--points-at",
                "--column",
                "--no-column",
                "--ignore-case",
            ];
            let listing = has("--list") || has("-l");
            let operands = args.iter().any(|arg| !arg.starts_with('-'));
            if only(&LISTING) && (listing || !operands) { Ok(()) } else { refuse() }
        }
        "tag" => {
            const LISTING: [&str; 14] = [
                "-l",
                "--list",
                "-n",
                "--sort",
                "--format",
                "--contains",
                "--no-contains",
                "--merged",
                "--no-merged",
                "--points-at",
                "--column",
                "--no-column",
                "--color",
                "-i",
            ];
            let listing = args.is_empty() || has("-l") || has("--list");
            let operands = args.iter().any(|arg| !arg.starts_with('-'));
            if only(&LISTING) && (listing || !operands) { Ok(()) } else { refuse() }
        }
        "remote"
            if args.is_empty() || args.iter().all(|arg| matches!(*arg, "-v" | "--verbose")) =>
        {
            Ok(())
        }
        "remote" if args.first() == Some(&"get-url") && only(&["--push", "--all"]) => Ok(()),
        "stash" if matches!(args.first(), Some(&("list" | "show"))) => flags_ok(&args[1..]),
        "reflog" if args.is_empty() || args.first() == Some(&"show") => {
            flags_ok(args.get(1..).unwrap_or_default())
        }
        "worktree" if args.first() == Some(&"list") => flags_ok(&args[1..]),
        "config" => {
            const READS: [&str; 16] = [
                "--get",
                "--get-all",
                "--get-regexp",
                "--list",
                "-l",
                "--show-origin",
                "--show-scope",
                "--global",
                "--local",
                "--system",
                "--null",
                "-z",
                "--name-only",
                "--type",
                "--default",
                "--includes",
            ];
            let reading = has("--get")
                || has("--get-all")
                || has("--get-regexp")
                || has("--list")
                || has("-l");
            if reading && only(&READS) { Ok(()) } else { refuse() }
        }
        _ => refuse(),
    }
}

/// Options of git subcommands that run a program they name, or make git run one later
/// (a template's or a config's hooks, `core.fsmonitor`...): a rule for the subcommand
/// (`git rebase`) does not cover them. Long ones also match as `--name=value`, short
/// ones anywhere in a bundle (`-ix CMD`, `-xCMD`). `clone --recurse-submodules` clones
/// and checks out whatever the cloned `.gitmodules` names, the way git's recursive-clone
/// code execution bugs went (CVE-2024-32002): not for a rule either.
const RUNNING_OPTIONS: &[(&str, &[&str], &str)] = &[
    ("rebase", &["--exec"], "x"),
    ("push", &["--receive-pack", "--exec"], ""),
    ("fetch", &["--upload-pack"], ""),
    ("pull", &["--upload-pack"], ""),
    ("ls-remote", &["--upload-pack", "--exec"], ""),
    ("archive", &["--exec", "--remote"], ""),
    (
        "clone",
        &["--upload-pack", "--template", "--config", "--recurse-submodules", "--recursive"],
        "uc",
    ),
    ("init", &["--template"], ""),
    ("difftool", &["--extcmd"], "x"),
    ("grep", &["--open-files-in-pager"], "O"),
    (
        "send-email",
        &["--sendmail-cmd", "--smtp-server", "--to-cmd", "--cc-cmd", "--header-cmd"],
        "",
    ),
];

/// Options of git subcommands that write a file where they say (`--output=PATH`,
/// `format-patch -o DIR`...) or pick a program by name (`merge -s NAME` runs
/// `git-merge-NAME` from PATH): a rule for the subcommand does not cover them either.
/// Matched as [`RUNNING_OPTIONS`].
const WRITING_OPTIONS: &[(&str, &[&str], &str)] = &[
    ("log", &["--output"], ""),
    ("show", &["--output"], ""),
    ("diff", &["--output"], ""),
    ("whatchanged", &["--output"], ""),
    ("diff-tree", &["--output"], ""),
    ("diff-index", &["--output"], ""),
    ("diff-files", &["--output"], ""),
    ("range-diff", &["--output"], ""),
    ("format-patch", &["--output", "--output-directory"], "o"),
    ("archive", &["--output"], "o"),
    ("apply", &["--directory", "--unsafe-paths"], ""),
    ("am", &["--directory"], ""),
    ("checkout-index", &["--prefix"], ""),
    ("init", &["--separate-git-dir"], ""),
    ("clone", &["--separate-git-dir"], ""),
    ("merge", &["--strategy"], "s"),
    ("rebase", &["--strategy"], "s"),
    ("pull", &["--strategy"], "s"),
    ("cherry-pick", &["--strategy"], ""),
    ("revert", &["--strategy"], ""),
    ("fast-export", &["--export-marks"], ""),
    ("fast-import", &["--export-marks"], ""),
];

/// Subcommands whose words name a program to run (`submodule foreach CMD`,
/// `bisect run CMD`) or a path to write (`bundle create PATH`, `worktree add PATH`).
const RUNNING_WORDS: &[(&str, &[&str])] = &[
    ("submodule", &["foreach"]),
    ("bisect", &["run"]),
    ("bundle", &["create"]),
    ("worktree", &["add", "move"]),
];

/// Subcommands that can make git run anything later, whatever their arguments
/// (`config core.fsmonitor CMD`, `filter-branch --tree-filter CMD`).
const RUNS_ANYTHING: [&str; 3] = ["config", "filter-branch", "alias"];

/// Subcommands that create a repository at a path their operands name (`clone URL DIR`,
/// `init DIR`): with more operands than the one `clone` needs, not covered.
const CREATES_AT: &[(&str, usize)] = &[("clone", 1), ("init", 0)];

/// Options of a [`CREATES_AT`] subcommand whose value, the next word, is harmless
/// (`clone -b main URL`): that word is not an operand. Any other word that is not an
/// option counts as one, an unknown option's value too, which errs on the side of not
/// covering.
struct ValueOptions {
    subcommand: &'static str,
    long: &'static [&'static str],
    /// Short ones, also at the end of a bundle of `flags` (`-qb main`).
    short: &'static str,
    /// The short options that take no value (any other letter might take the rest of
    /// its bundle as its value: `-ub` is `-u b`).
    flags: &'static str,
}

const VALUE_OPTIONS: &[ValueOptions] = &[
    ValueOptions {
        subcommand: "clone",
        long: &[
            "--branch",
            "--origin",
            "--depth",
            "--shallow-since",
            "--shallow-exclude",
            "--filter",
            "--jobs",
        ],
        short: "boj",
        flags: "lsqvn46",
    },
    ValueOptions {
        subcommand: "init",
        long: &["--initial-branch", "--object-format", "--ref-format"],
        short: "b",
        flags: "q",
    },
];

/// Whether `git ARGS` (global options first) makes a new repository (`clone`, `init`)
/// rather than using the one it finds.
pub(crate) fn creates_repository(args: &[&str]) -> bool {
    subcommand(args)
        .is_some_and(|subcommand| CREATES_AT.iter().any(|(name, _)| *name == subcommand))
}

/// The subcommand of `git ARGS` (global options first), `None` when it cannot be told.
fn subcommand<'a>(args: &[&'a str]) -> Option<&'a str> {
    split_subcommand(args).map(|(subcommand, _)| subcommand)
}

/// The subcommand of `git ARGS` (global options first) and the words after it.
pub(crate) fn split_subcommand<'a, 'b>(args: &'b [&'a str]) -> Option<(&'a str, &'b [&'a str])> {
    let mut rest = args;
    loop {
        match rest {
            ["-C", _, more @ ..] => rest = more,
            [arg, more @ ..] if HARMLESS_GLOBAL.contains(arg) => rest = more,
            [option, ..] if option.starts_with('-') => return None,
            [subcommand, more @ ..] => return Some((subcommand, more)),
            [] => return None,
        }
    }
}

/// Whether `git ARGS` (the subcommand first) may run a program its arguments name, make
/// git run one later, or write where its arguments say, so that no rule for the
/// subcommand alone may cover it. `complete`: the arguments are all known (a computed
/// one could be any option).
pub(crate) fn beyond_a_subcommand_rule(args: &[&str], complete: bool) -> bool {
    let Some((subcommand, rest)) = args.split_first() else { return false };
    if RUNS_ANYTHING.contains(subcommand)
        || super::remote::changes_remotes(subcommand, rest, complete)
    {
        return true;
    }
    let options: Vec<_> = RUNNING_OPTIONS
        .iter()
        .chain(WRITING_OPTIONS)
        .filter(|(name, ..)| name == subcommand)
        .collect();
    let words = RUNNING_WORDS.iter().find(|(name, _)| name == subcommand);
    let creates = CREATES_AT.iter().find(|(name, _)| name == subcommand);
    if (!options.is_empty() || words.is_some() || creates.is_some()) && !complete {
        return true;
    }
    if super::remote::TALKS_TO_A_REMOTE.contains(subcommand)
        && (!complete
            || super::remote::repository_operand(subcommand, rest)
                .is_none_or(|repository| repository.is_some_and(|name| name.contains(':'))))
    {
        return true;
    }
    let before_dashes = || rest.iter().take_while(|arg| **arg != "--");
    if let Some((_, named)) = words
        && before_dashes().any(|arg| named.contains(arg))
    {
        return true;
    }
    if let Some((_, needed)) = creates
        && operand_count(subcommand, rest) > *needed
    {
        return true;
    }
    // Every word, after `--` too: an option's value may be `--` (`clone -b -- -uCMD URL`
    // runs CMD).
    rest.iter().any(|arg| {
        options.iter().any(|(_, long, short)| {
            if let Some(name) = arg.strip_prefix("--") {
                let name = name.split_once('=').map_or(name, |(name, _)| name);
                // git takes an unambiguous abbreviation (`--exe`) too.
                long.iter().any(|option| !name.is_empty() && option[2..].starts_with(name))
            } else if let Some(bundle) = arg.strip_prefix('-') {
                bundle.chars().any(|letter| short.contains(letter))
            } else {
                false
            }
        })
    })
}

/// The words after `git` in a git command's leading words (assignments before it
/// skipped).
pub(crate) fn arguments(leading: &[String]) -> Vec<&str> {
    leading.iter().skip_while(|word| word.contains('=')).skip(1).map(String::as_str).collect()
}

/// How many operands `git SUBCOMMAND ARGS` has: the words that are neither options nor
/// the value of one of its [`VALUE_OPTIONS`], and every word after `--`.
fn operand_count(subcommand: &str, args: &[&str]) -> usize {
    let options = VALUE_OPTIONS.iter().find(|options| options.subcommand == subcommand);
    let mut count = 0;
    let mut words = args.iter();
    while let Some(arg) = words.next() {
        if *arg == "--" {
            return count + words.count();
        }
        if options.is_some_and(|options| options.value_follows(arg)) {
            words.next();
        } else if !arg.starts_with('-') {
            count += 1;
        }
    }
    count
}

impl ValueOptions {
    /// Whether `arg` is one of the long options as a word of its own (not `--name=value`)
    /// or a short one, alone or ending a bundle of flags: its value is the next word.
    fn value_follows(&self, arg: &str) -> bool {
        if arg.starts_with("--") {
            return self.long.contains(&arg);
        }
        let Some(bundle) = arg.strip_prefix('-') else { return false };
        let mut letters = bundle.chars();
        letters.next_back().is_some_and(|last| self.short.contains(last))
            && letters.all(|letter| self.flags.contains(letter))
    }
}
