//! Which commands are known to change nothing: a list of programs that never write or
//! run other programs, whatever their arguments, and for programs that do with some
//! flags (`find -delete`, `sed -i`, `sort -o`, `git -c`...), the flags known to be
//! harmless (an allowlist: any other flag makes the command not known read-only).
//! Anything not listed is not known to be read-only. Arguments that the shell would
//! expand cannot be judged, so a program whose verdict depends on its flags needs
//! literal ones.

use super::command::Word;
use super::flags::{Options, operands};
use super::git::{self, Places};

/// Programs that cannot write files or run other programs, whatever their arguments.
const ALWAYS_READ_ONLY: &[&str] = &[
    "cat",
    "head",
    "tail",
    "wc",
    "ls",
    "pwd",
    "echo",
    "true",
    "false",
    "which",
    "whoami",
    "id",
    "uname",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "stat",
    "du",
    "df",
    "nl",
    "cut",
    "tr",
    "rev",
    "tac",
    "column",
    "fold",
    "paste",
    "expand",
    "unexpand",
    "seq",
    "sleep",
    "cmp",
    "comm",
    "diff",
    "grep",
    "egrep",
    "fgrep",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "base64",
    "base32",
    "od",
    "hexdump",
    "strings",
    "jq",
    "type",
    "locale",
    "printenv",
    "ps",
    "free",
    "uptime",
    "nproc",
    "cd",
    "pushd",
    "popd",
    "groups",
    "tty",
    "arch",
    "look",
    "numfmt",
    "join",
    "fmt",
    "pr",
    "yes",
    "getconf",
    "lsblk",
    "hostid",
    "logname",
];

const SORT: Options = Options {
    // Not `-o` (writes), `-T` (temporary files in a directory of choice).
    short: "bdfgiMhnRrVcCmsuz",
    short_valued: "ktS",
    long: &[
        "ignore-leading-blanks",
        "dictionary-order",
        "ignore-case",
        "general-numeric-sort",
        "ignore-nonprinting",
        "month-sort",
        "human-numeric-sort",
        "numeric-sort",
        "random-sort",
        "reverse",
        "version-sort",
        "merge",
        "stable",
        "unique",
        "zero-terminated",
        "debug",
        "help",
        "version",
    ],
    long_valued: &["key", "field-separator", "buffer-size", "parallel", "sort", "files0-from"],
    long_optional: &["check"],
};

const UNIQ: Options = Options {
    short: "cdDiuz",
    short_valued: "fsw",
    long: &["count", "repeated", "ignore-case", "unique", "zero-terminated", "help", "version"],
    long_valued: &["skip-fields", "skip-chars", "check-chars"],
    long_optional: &["all-repeated", "group"],
};

const TREE: Options = Options {
    // Not `-o` (writes), `-R` (writes an index file per directory with `-H`).
    short: "adlfxpsughDFqNQrtvcUCnAJXSi",
    short_valued: "LPI",
    long: &[
        "help",
        "version",
        "inodes",
        "device",
        "noreport",
        "nolinks",
        "dirsfirst",
        "filesfirst",
        "du",
        "si",
        "prune",
        "matchdirs",
        "ignore-case",
        "gitignore",
        "metafirst",
    ],
    long_valued: &["charset", "filelimit", "timefmt", "sort"],
    long_optional: &[],
};

const FILE: Options = Options {
    // Not `-C` (compiles a magic file), `-p` (resets access times).
    short: "bcdEhiklLNn0rsSvzZ",
    short_valued: "eFfmP",
    long: &[
        "brief",
        "mime",
        "mime-type",
        "mime-encoding",
        "apple",
        "extension",
        "keep-going",
        "list",
        "dereference",
        "no-dereference",
        "no-pad",
        "no-buffer",
        "print0",
        "raw",
        "special-files",
        "uncompress",
        "uncompress-noreport",
        "help",
        "version",
    ],
    long_valued: &[
        "exclude",
        "exclude-quiet",
        "files-from",
        "separator",
        "magic-file",
        "parameter",
    ],
    long_optional: &[],
};

const RG: Options = Options {
    // Not `-z` (runs decompression programs); `--pre` and `--hostname-bin` run any.
    short: "abcFHhIiLlNnoPpqSsUuvVwx0.",
    short_valued: "ABCegtTmjMdEfr",
    long: &[
        "hidden",
        "no-hidden",
        "no-ignore",
        "ignore",
        "no-ignore-vcs",
        "no-ignore-parent",
        "no-ignore-dot",
        "no-ignore-global",
        "no-ignore-exclude",
        "no-ignore-files",
        "unrestricted",
        "files",
        "count",
        "count-matches",
        "files-with-matches",
        "files-without-match",
        "fixed-strings",
        "word-regexp",
        "line-regexp",
        "line-number",
        "no-line-number",
        "heading",
        "no-heading",
        "json",
        "ignore-case",
        "smart-case",
        "case-sensitive",
        "multiline",
        "multiline-dotall",
        "follow",
        "type-list",
        "no-messages",
        "stats",
        "trim",
        "vimgrep",
        "only-matching",
        "null",
        "null-data",
        "pcre2",
        "text",
        "binary",
        "column",
        "no-column",
        "passthru",
        "no-filename",
        "with-filename",
        "invert-match",
        "quiet",
        "debug",
        "trace",
        "version",
        "help",
        "glob-case-insensitive",
        "no-config",
        "one-file-system",
        "max-columns-preview",
        "line-buffered",
        "block-buffered",
        "crlf",
        "byte-offset",
        "include-zero",
        "mmap",
        "no-mmap",
        "no-unicode",
        "pretty",
        "no-require-git",
        "no-context-separator",
        "sort-files",
    ],
    long_valued: &[
        "type",
        "type-not",
        "glob",
        "iglob",
        "max-count",
        "max-depth",
        "max-filesize",
        "sort",
        "sortr",
        "replace",
        "engine",
        "encoding",
        "threads",
        "regexp",
        "file",
        "context",
        "before-context",
        "after-context",
        "max-columns",
        "path-separator",
        "type-add",
        "type-clear",
        "ignore-file",
        "dfa-size-limit",
        "regex-size-limit",
        "color",
        "colors",
        "field-match-separator",
        "field-context-separator",
        "context-separator",
    ],
    long_optional: &[],
};

const FD: Options = Options {
    // Not `-x`/`-X` (run a command per result).
    short: "HIusiLpgFal0q1",
    short_valued: "dteEcjSo",
    long: &[
        "hidden",
        "no-hidden",
        "no-ignore",
        "ignore",
        "no-ignore-vcs",
        "no-ignore-parent",
        "unrestricted",
        "case-sensitive",
        "ignore-case",
        "glob",
        "regex",
        "fixed-strings",
        "absolute-path",
        "relative-path",
        "list-details",
        "follow",
        "no-follow",
        "full-path",
        "print0",
        "quiet",
        "show-errors",
        "one-file-system",
        "prune",
        "help",
        "version",
        "require-git",
        "no-require-git",
    ],
    long_valued: &[
        "max-depth",
        "min-depth",
        "exact-depth",
        "type",
        "extension",
        "exclude",
        "color",
        "threads",
        "size",
        "changed-within",
        "changed-before",
        "owner",
        "max-results",
        "base-directory",
        "search-path",
        "path-separator",
        "ignore-file",
        "and",
        "format",
    ],
    long_optional: &["strip-cwd-prefix", "hyperlink"],
};

/// `None` when `words` (a simple command with its name first) is known to be
/// read-only when run in any of `places`, else the reason it is not.
pub(crate) fn judge(words: &[Word], places: Places) -> Option<String> {
    let name = words.first()?;
    if !name.literal {
        return Some("its program name is computed when the command runs".into());
    }
    let args = &words[1..];
    let program = name.text.as_str();
    if ALWAYS_READ_ONLY.contains(&program) {
        return None;
    }
    let dynamic = args.iter().any(|word| !word.literal);
    let texts: Vec<&str> = args.iter().map(|word| word.text.as_str()).collect();
    let verdict = match program {
        "find" => find(&texts),
        "rg" => operands("rg", &texts, &RG).map(drop),
        "fd" | "fdfind" => operands(program, &texts, &FD).map(drop),
        "sed" => sed(&texts),
        "sort" => operands("sort", &texts, &SORT).map(drop),
        "tree" => operands("tree", &texts, &TREE).map(drop),
        "file" => operands("file", &texts, &FILE).map(drop),
        "uniq" => operands("uniq", &texts, &UNIQ).and_then(|operands| at_most_one(&operands)),
        "xxd" => xxd(&texts),
        // `printf -v NAME` assigns (and bash evaluates some of what it assigns).
        "printf" => match texts.first() {
            Some(first) if first.starts_with('-') => writes("printf", first),
            Some(_) | None => Ok(()),
        },
        "test" | "[" => test(&texts),
        "command" if matches!(texts.first(), Some(&("-v" | "-V"))) => Ok(()),
        "set" => set(&texts),
        "git" => git::judge(&texts, places),
        _ => return Some(format!("`{program}` is not a known read-only command")),
    };
    match verdict {
        Ok(()) if dynamic => Some(format!(
            "`{program}` has arguments computed when the command runs, so its flags cannot be checked"
        )),
        Ok(()) => None,
        Err(reason) => Some(reason),
    }
}

/// Whether a read-only verdict on `words` came from the files as they were when it
/// was judged rather than from the words alone: only git's (it reads the repository's
/// config, which may run programs), which also depends on where a `cd` led.
pub(crate) fn judged_on_files(words: &[Word]) -> bool {
    words.first().is_some_and(|name| name.literal && name.text == "git")
}

type Verdict = Result<(), String>;

fn writes(program: &str, flag: &str) -> Verdict {
    Err(format!("`{program} {flag}` can change files or run commands"))
}

/// `uniq IN OUT` writes OUT.
fn at_most_one(operands: &[&str]) -> Verdict {
    if operands.len() > 1 {
        return Err(format!("with {} operands it writes the last one", operands.len()));
    }
    Ok(())
}

/// `xxd IN OUT` writes OUT; its flags (`-c8`, `-cols 8`...) never write.
fn xxd(args: &[&str]) -> Verdict {
    const VALUED: [&str; 13] = [
        "-c",
        "-cols",
        "-g",
        "-groupsize",
        "-l",
        "-len",
        "-o",
        "-offset",
        "-s",
        "-seek",
        "-n",
        "-name",
        "-R",
    ];
    let mut operands = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        // After `--` every word is an operand (`xxd -- -name out` writes `out`).
        if *arg == "--" {
            operands.extend(iter.by_ref().copied());
            break;
        }
        if VALUED.contains(arg) {
            iter.next();
        } else if !arg.starts_with('-') || *arg == "-" {
            operands.push(*arg);
        }
    }
    at_most_one(&operands)
}

/// `test` and `[`: every operator but `-v` and `-R`, which evaluate array subscripts
/// (`test -v 'a[$(cmd)]'` runs the command).
fn test(args: &[&str]) -> Verdict {
    const OPERATORS: [&str; 33] = [
        "-a", "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t", "-u", "-w",
        "-x", "-G", "-L", "-N", "-O", "-S", "-z", "-n", "-o", "-ef", "-nt", "-ot", "-eq", "-ne",
        "-lt", "-le", "-gt", "-ge",
    ];
    match args.iter().find(|arg| arg.len() > 1 && arg.starts_with('-') && !OPERATORS.contains(arg))
    {
        Some(arg) => writes("test", arg),
        None => Ok(()),
    }
}

/// `find` with only the tests, options and actions that neither write nor run anything
/// (not `-exec`, `-execdir`, `-ok`, `-okdir`, `-delete`, `-fprint*`, `-fls`).
fn find(args: &[&str]) -> Verdict {
    const PLAIN: [&str; 37] = [
        "-print",
        "-print0",
        "-ls",
        "-prune",
        "-quit",
        "-true",
        "-false",
        "-empty",
        "-readable",
        "-writable",
        "-executable",
        "-nouser",
        "-nogroup",
        "-depth",
        "-d",
        "-xdev",
        "-mount",
        "-follow",
        "-noleaf",
        "-daystart",
        "-ignore_readdir_race",
        "-noignore_readdir_race",
        "-nowarn",
        "-warn",
        "-not",
        "-a",
        "-and",
        "-o",
        "-or",
        "-H",
        "-L",
        "-P",
        "-help",
        "--help",
        "-version",
        "--version",
        "--",
    ];
    const VALUED: [&str; 36] = [
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-regextype",
        "-lname",
        "-ilname",
        "-type",
        "-xtype",
        "-size",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-newer",
        "-anewer",
        "-cnewer",
        "-used",
        "-perm",
        "-user",
        "-group",
        "-uid",
        "-gid",
        "-links",
        "-inum",
        "-samefile",
        "-maxdepth",
        "-mindepth",
        "-printf",
        "-fstype",
    ];
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let newer_xy = arg.len() == 8
            && arg.starts_with("-newer")
            && arg[6..].chars().all(|c| "amctB".contains(c));
        if VALUED.contains(arg) || newer_xy || *arg == "-D" {
            iter.next();
        } else if arg.starts_with('-') && arg.len() > 1 && !PLAIN.contains(arg) {
            let optimisation = arg.len() == 3 && arg.starts_with("-O");
            if !optimisation {
                return writes("find", arg);
            }
        }
    }
    Ok(())
}

/// `set -e`, `set -o pipefail`...: options only, never positional parameters, and not
/// `-k`/`-o keyword`, after which a `NAME=value` anywhere in a command's arguments is an
/// environment assignment (`git diff GIT_EXTERNAL_DIFF=./x` would run `./x`), nor
/// `-a`/`-o allexport`, which exports every variable set later (`GIT_*` for git).
fn set(args: &[&str]) -> Verdict {
    let mut after_o = false;
    for arg in args {
        if after_o {
            after_o = false;
            if matches!(*arg, "keyword" | "allexport") {
                return writes("set -o", arg);
            }
        } else if let Some(flags) = arg.strip_prefix('-') {
            if flags.contains(['k', 'a']) {
                return writes("set", arg);
            }
            after_o = flags.ends_with('o');
        } else if let Some(flags) = arg.strip_prefix('+') {
            after_o = flags.ends_with('o');
        } else {
            return Err("`set` with operands changes the shell's parameters".into());
        }
    }
    Ok(())
}

/// `sed` without `-i`, `-f` and without scripts that write (`w`) or execute (`e`).
/// The long options of sed that neither write nor hide a script.
const SED_SAFE_LONG: [&str; 8] = [
    "--debug",
    "--quiet",
    "--silent",
    "--regexp-extended",
    "--null-data",
    "--separate",
    "--posix",
    "--sandbox",
];

fn sed(args: &[&str]) -> Verdict {
    let mut scripts = Vec::new();
    let mut explicit_script = false;
    let mut iter = args.iter();
    let mut first_operand = None;
    while let Some(arg) = iter.next() {
        if *arg == "-e" || *arg == "--expression" {
            explicit_script = true;
            scripts.push(*iter.next().ok_or("`sed -e` without a script")?);
        } else if let Some(script) = arg.strip_prefix("--expression=") {
            explicit_script = true;
            scripts.push(script);
        } else if *arg == "-f" {
            return writes("sed", arg);
        } else if *arg == "--" {
            // Every word after it is an operand: the first one the script, if none yet.
            if first_operand.is_none() {
                first_operand = iter.next().copied();
            }
            break;
        } else if let Some(bundle) = arg.strip_prefix('-') {
            if bundle.is_empty() {
                continue;
            }
            // Long options only by their full, harmless names: GNU sed takes prefixes
            // (`--in` is `--in-place`, `--expr=` hides a script from the check).
            if bundle.starts_with('-') {
                if SED_SAFE_LONG.contains(arg) {
                    continue;
                }
                return writes("sed", arg);
            }
            // `-ne SCRIPT`, `-es/a/b/`: `e` takes the rest of the bundle or the next word.
            for (index, flag) in bundle.char_indices() {
                if flag == 'e' {
                    let attached = &bundle[index + 1..];
                    let script = if attached.is_empty() {
                        *iter.next().ok_or("`sed -e` without a script")?
                    } else {
                        attached
                    };
                    explicit_script = true;
                    scripts.push(script);
                    break;
                }
                if !"nErsuz".contains(flag) {
                    return writes("sed", arg);
                }
            }
        } else if first_operand.is_none() {
            first_operand = Some(*arg);
        }
    }
    if !explicit_script {
        scripts.extend(first_operand);
    }
    for script in scripts {
        sed_script(script)?;
    }
    Ok(())
}

/// Walks a sed script's commands, refusing `w`, `W`, `e` and the `w`/`e` flags of `s`.
fn sed_script(script: &str) -> Verdict {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let unsafe_script =
        || Err(format!("the sed script `{script}` can write files or run commands"));
    let unknown = || Err(format!("the sed script `{script}` is too complex to check"));
    while i < chars.len() {
        // Addresses: numbers, `$`, `/regex/`, `,`, `!`, `~`, blanks.
        while i < chars.len() {
            match chars[i] {
                c if c.is_ascii_digit()
                    || matches!(c, '$' | ',' | '!' | '~' | ' ' | '\t' | '+') =>
                {
                    i += 1
                }
                '/' => match skip_regex(&chars, i + 1, '/') {
                    Some(next) => i = next,
                    None => return unknown(),
                },
                _ => break,
            }
        }
        let Some(&command) = chars.get(i) else { break };
        i += 1;
        match command {
            ';' | '\n' | '{' | '}' | 'p' | 'P' | 'd' | 'D' | 'q' | 'Q' | 'n' | 'N' | 'g' | 'G'
            | 'h' | 'H' | 'x' | 'l' | '=' | 'z' | 'F' => {}
            'b' | 't' | 'T' | ':' => {
                // GNU sed ends a label at a blank and reads what follows as a new command,
                // so only blanks may follow it before the command ends.
                while i < chars.len() && matches!(chars[i], ' ' | '\t') {
                    i += 1;
                }
                while i < chars.len() && !matches!(chars[i], ' ' | '\t' | ';' | '\n' | '}') {
                    i += 1;
                }
                while i < chars.len() && matches!(chars[i], ' ' | '\t') {
                    i += 1;
                }
                if i < chars.len() && !matches!(chars[i], ';' | '\n' | '}') {
                    return unknown();
                }
            }
            'a' | 'i' | 'c' | 'r' | 'R' => {
                // Text or a file name to the end of the line (or script).
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            's' | 'y' => {
                let Some(&delimiter) = chars.get(i) else { return unknown() };
                if delimiter == '\\' || delimiter == '\n' {
                    return unknown();
                }
                let Some(after_pattern) = skip_regex(&chars, i + 1, delimiter) else {
                    return unknown();
                };
                // `y` takes a second character list, `s` a replacement (where `[` is plain).
                let rest = if command == 'y' {
                    skip_regex(&chars, after_pattern, delimiter)
                } else {
                    skip_delimited(&chars, after_pattern, delimiter)
                };
                let Some(after_replacement) = rest else {
                    return unknown();
                };
                i = after_replacement;
                while i < chars.len() && !matches!(chars[i], ';' | '\n' | '}') {
                    if command == 's' && matches!(chars[i], 'w' | 'W' | 'e') {
                        return unsafe_script();
                    }
                    if !(chars[i].is_ascii_alphanumeric() || chars[i] == ' ') {
                        return unknown();
                    }
                    i += 1;
                }
            }
            'w' | 'W' | 'e' => return unsafe_script(),
            ' ' | '\t' => {}
            _ => return unknown(),
        }
    }
    Ok(())
}

/// Like `skip_delimited`, for a regex: `None` (too complex) at an unescaped `[`,
/// since GNU sed reads a delimiter inside `[...]` as plain text and the regex
/// would end later than this walk thinks (`s/[/]/;p/e` hides an `e` flag).
fn skip_regex(chars: &[char], i: usize, delimiter: char) -> Option<usize> {
    let end = skip_delimited(chars, i, delimiter)?;
    let mut j = i;
    while j < end {
        match chars[j] {
            '\\' => j += 2,
            '[' => return None,
            _ => j += 1,
        }
    }
    Some(end)
}

/// The index after the next unescaped `delimiter` from `start`.
fn skip_delimited(chars: &[char], mut i: usize, delimiter: char) -> Option<usize> {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == delimiter => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}
