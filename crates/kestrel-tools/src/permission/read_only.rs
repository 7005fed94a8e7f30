//! Which commands are known to change nothing: a list of programs that never write,
//! and for programs that write only with some flags (`find -delete`, `sed -i`,
//! `sort -o`, `git branch NAME`...), the flags that make them writers. Anything not
//! listed is not known to be read-only. Arguments that the shell would expand cannot
//! be judged, so a program whose verdict depends on its flags needs literal ones.

use super::command::Word;

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
    "file",
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

/// `None` when `words` (a simple command with its name first) is known to be
/// read-only, else the reason it is not.
pub(crate) fn judge(words: &[Word]) -> Option<String> {
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
        "rg" => rg(&texts),
        "fd" | "fdfind" => fd(&texts),
        "sed" => sed(&texts),
        "sort" => flagged(&texts, &["--output", "--compress-program"], 'o'),
        "tree" => flagged(&texts, &["--output", "--fromfile"], 'o'),
        "shuf" => flagged(&texts, &["--output", "--random-source"], 'o'),
        // `printf -v NAME` assigns (and bash evaluates some of what it assigns);
        // `test -v 'a[$(cmd)]'` runs the command.
        "printf" => flagged(&texts, &[], 'v'),
        "test" | "[" => {
            match texts.iter().find(|arg| arg.starts_with("-v") || arg.starts_with("-R")) {
                Some(arg) => writes(program, arg),
                None => Ok(()),
            }
        }
        "uniq" => at_most_positional(&texts, 1, &["-f", "-s", "-w"]),
        "xxd" => at_most_positional(&texts, 1, &["-c", "-g", "-l", "-s", "-o", "-n"]),
        "env" if texts.is_empty() => Ok(()),
        "command" if matches!(texts.first(), Some(&("-v" | "-V"))) => Ok(()),
        "set" => set(&texts),
        "git" => git(&texts),
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

type Verdict = Result<(), String>;

fn writes(program: &str, flag: &str) -> Verdict {
    Err(format!("`{program} {flag}` can change files or run commands"))
}

/// Refuses any of `long` flags (also as `--flag=value`) and a short flag `short`,
/// alone or in a bundle (`-uo`).
fn flagged(args: &[&str], long: &[&str], short: char) -> Verdict {
    for arg in args {
        // GNU tools take any unambiguous prefix of a long option (`--outp` is `--output`).
        let name = arg.split('=').next().unwrap_or(arg);
        if name.len() > 2
            && name.starts_with("--")
            && long.iter().any(|flag| flag.starts_with(name))
        {
            return Err(format!("the `{arg}` flag can change files or run commands"));
        }
        if let Some(bundle) = arg.strip_prefix('-')
            && !bundle.starts_with('-')
            && bundle.contains(short)
        {
            return Err(format!("the `{arg}` flag can change files"));
        }
    }
    Ok(())
}

/// Programs that write their second operand (`uniq IN OUT`).
fn at_most_positional(args: &[&str], max: usize, valued: &[&str]) -> Verdict {
    let mut positional = 0;
    let mut skip = false;
    for arg in args {
        if skip {
            skip = false;
        } else if valued.contains(arg) {
            skip = true;
        } else if !arg.starts_with('-') || *arg == "-" {
            positional += 1;
        }
    }
    if positional > max {
        return Err(format!("with {positional} operands it can write a file"));
    }
    Ok(())
}

fn find(args: &[&str]) -> Verdict {
    const UNSAFE: [&str; 9] = [
        "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
    ];
    match args.iter().find(|arg| UNSAFE.contains(arg)) {
        Some(flag) => writes("find", flag),
        None => Ok(()),
    }
}

fn rg(args: &[&str]) -> Verdict {
    for flag in ["--pre", "--hostname-bin"] {
        if let Some(arg) =
            args.iter().find(|arg| **arg == flag || arg.starts_with(&format!("{flag}=")))
        {
            return writes("rg", arg);
        }
    }
    Ok(())
}

fn fd(args: &[&str]) -> Verdict {
    for arg in args {
        let short_exec = arg.strip_prefix('-').is_some_and(|bundle| {
            !bundle.starts_with('-') && (bundle.contains('x') || bundle.contains('X'))
        });
        if short_exec || arg.starts_with("--exec") {
            return writes("fd", arg);
        }
    }
    Ok(())
}

/// `set -e`, `set -o pipefail`...: options only, never positional parameters.
fn set(args: &[&str]) -> Verdict {
    let mut after_o = false;
    for arg in args {
        if after_o || arg.starts_with('-') || arg.starts_with('+') {
            after_o = matches!(*arg, "-o" | "+o");
        } else {
            return Err("`set` with operands changes the shell's parameters".into());
        }
    }
    Ok(())
}

/// `sed` without `-i`, `-f` and without scripts that write (`w`) or execute (`e`).
/// The long options of sed that neither write nor hide a script.
const SED_SAFE_LONG: [&str; 7] = [
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
        } else if let Some(bundle) = arg.strip_prefix('-') {
            if bundle.is_empty() || *arg == "--" {
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
            if !bundle.chars().all(|c| "nErsuz".contains(c)) {
                return writes("sed", arg);
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
                '/' => match skip_delimited(&chars, i + 1, '/') {
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
            'b' | 't' | 'T' | ':' | 'a' | 'i' | 'c' | 'r' | 'R' => {
                // A label or text to the end of the line (or script).
                while i < chars.len()
                    && chars[i] != '\n'
                    && !(matches!(command, 'b' | 't' | 'T' | ':') && chars[i] == ';')
                {
                    i += 1;
                }
            }
            's' | 'y' => {
                let Some(&delimiter) = chars.get(i) else { return unknown() };
                if delimiter == '\\' || delimiter == '\n' {
                    return unknown();
                }
                let Some(after_pattern) = skip_delimited(&chars, i + 1, delimiter) else {
                    return unknown();
                };
                let Some(after_replacement) = skip_delimited(&chars, after_pattern, delimiter)
                else {
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

/// `git` subcommands that only read, with the flags that would make them write.
fn git(args: &[&str]) -> Verdict {
    let mut rest = args;
    // Global options before the subcommand.
    loop {
        match rest.first() {
            Some(&("-C" | "--git-dir" | "--work-tree")) if rest.len() > 1 => rest = &rest[2..],
            Some(&("--no-pager" | "-P" | "--no-optional-locks" | "--bare")) => rest = &rest[1..],
            Some(arg) if arg.starts_with("--git-dir=") || arg.starts_with("--work-tree=") => {
                rest = &rest[1..]
            }
            Some(arg) if arg.starts_with('-') => return writes("git", arg),
            _ => break,
        }
    }
    let Some((subcommand, args)) = rest.split_first() else { return Ok(()) };
    let has =
        |flag: &str| args.iter().any(|arg| *arg == flag || arg.starts_with(&format!("{flag}=")));
    let only_flags = |allowed: &[&str]| {
        args.iter().all(|arg| {
            allowed.iter().any(|flag| arg == flag || arg.starts_with(&format!("{flag}=")))
        })
    };
    let refuse = || writes("git", subcommand);
    match *subcommand {
        "status" | "log" | "show" | "diff" | "blame" | "shortlog" | "describe" | "rev-parse"
        | "rev-list" | "ls-files" | "ls-tree" | "cat-file" | "show-ref" | "merge-base"
        | "name-rev" | "whatchanged" | "count-objects" | "check-ignore" | "cherry"
        | "for-each-ref" | "grep" | "help" | "version" | "range-diff" => {
            if has("--output") || has("-O") || has("--open-files-in-pager") || has("--ext-diff") {
                return refuse();
            }
            Ok(())
        }
        "branch" => {
            let listing = [
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
            ];
            let list_mode = has("--list") || has("-l");
            let flags_only = args.iter().all(|arg| {
                (!arg.starts_with('-') && list_mode)
                    || listing
                        .iter()
                        .any(|flag| arg == flag || arg.starts_with(&format!("{flag}=")))
            });
            if flags_only { Ok(()) } else { refuse() }
        }
        "tag" => {
            if args.is_empty() || has("-l") || has("--list") {
                if has("-d") || has("--delete") || has("-a") || has("-s") || has("-f") {
                    refuse()
                } else {
                    Ok(())
                }
            } else {
                refuse()
            }
        }
        "remote"
            if args.is_empty()
                || only_flags(&["-v", "--verbose"])
                || args.first() == Some(&"get-url") =>
        {
            Ok(())
        }
        "stash" if matches!(args.first(), Some(&("list" | "show"))) => Ok(()),
        "reflog" if args.is_empty() || args.first() == Some(&"show") => Ok(()),
        "worktree" if args.first() == Some(&"list") => Ok(()),
        "submodule" if args.first() == Some(&"status") => Ok(()),
        "config" => {
            let reads = [
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
            let writing = args.iter().any(|arg| {
                arg.starts_with('-')
                    && !reads.iter().any(|flag| arg == flag || arg.starts_with(&format!("{flag}=")))
            });
            if reading && !writing { Ok(()) } else { refuse() }
        }
        _ => refuse(),
    }
}
