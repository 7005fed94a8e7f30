//! Options of programs whose effect depends on their flags, checked against a list of
//! the flags known to be harmless (an allowlist: a flag not listed makes the command
//! "not known read-only"). Long options count only by their exact, full names: GNU
//! tools take any unambiguous prefix of a long option (`--outp` is `--output`), so a
//! prefix could name a writer that the list does not know.

/// The harmless options of one program.
pub(crate) struct Options {
    /// Short flags without a value (`-n`), also bundled (`-nr`).
    pub short: &'static str,
    /// Short flags with a value: the rest of the bundle, or else the next argument.
    pub short_valued: &'static str,
    /// Long flags without a value (`--quiet`).
    pub long: &'static [&'static str],
    /// Long flags with a value (`--key=V` or `--key V`).
    pub long_valued: &'static [&'static str],
    /// Long flags with an optional value (`--check` or `--check=quiet`, never separate).
    pub long_optional: &'static [&'static str],
}

/// The operands of `args` (everything that is not an option or an option's value), or
/// the reason the options are not known to be harmless.
pub(crate) fn operands<'a>(
    program: &str,
    args: &[&'a str],
    options: &Options,
) -> Result<Vec<&'a str>, String> {
    let mut operands = Vec::new();
    let mut iter = args.iter();
    while let Some(&arg) = iter.next() {
        if arg == "--" {
            operands.extend(iter.by_ref().copied());
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            let known = |list: &[&str]| list.contains(&name);
            if known(options.long) && value.is_none() || known(options.long_optional) {
                continue;
            }
            if known(options.long_valued) {
                if value.is_none() {
                    iter.next();
                }
                continue;
            }
            return Err(unknown_flag(program, arg));
        }
        let Some(bundle) = arg.strip_prefix('-').filter(|bundle| !bundle.is_empty()) else {
            operands.push(arg);
            continue;
        };
        for (index, flag) in bundle.char_indices() {
            if options.short.contains(flag) {
                continue;
            }
            if options.short_valued.contains(flag) {
                if index + flag.len_utf8() == bundle.len() {
                    iter.next();
                }
                break;
            }
            return Err(unknown_flag(program, arg));
        }
    }
    Ok(operands)
}

fn unknown_flag(program: &str, arg: &str) -> String {
    format!("`{program} {arg}`: the flag is not one known to be harmless")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SORT_LIKE: Options = Options {
        short: "nr",
        short_valued: "k",
        long: &["reverse"],
        long_valued: &["key"],
        long_optional: &["check"],
    };

    #[test]
    fn values_are_skipped_and_unknown_or_abbreviated_flags_refused() {
        let args = ["-nk", "2", "--key", "-o", "--check=quiet", "a", "--", "-o"];
        assert_eq!(operands("sort", &args, &SORT_LIKE).unwrap(), ["a", "-o"]);
        assert_eq!(operands("sort", &["-k2", "-n", "b"], &SORT_LIKE).unwrap(), ["b"]);
        for bad in [&["-o", "x"][..], &["--rev"], &["-nro"], &["--reverse=x"], &["--output=x"]] {
            assert!(operands("sort", bad, &SORT_LIKE).is_err(), "{bad:?}");
        }
        // An optional value is never the next argument.
        assert_eq!(operands("sort", &["--check", "x"], &SORT_LIKE).unwrap(), ["x"]);
    }
}
