//! How the permission policy judges shell commands, through the public API: which
//! programs and flags write or run other commands (git config and hooks included), what an
//! allow rule covers, where `cd` and symlinks make a command write, and how broad an
//! "always" rule may be.

use kestrel_protocol::Mode;
use kestrel_tools::permission::{
    AllowList, AllowRule, Assessment, Concern, PermissionPolicy, SandboxStatus, analyze,
};
use serde_json::json;
use std::path::{Path, PathBuf};

fn read_only(line: &str) -> bool {
    analyze(line, Path::new("/w")).is_read_only()
}

fn policy_with(commands: &[&str], paths: &[&str]) -> PermissionPolicy {
    let commands: Vec<String> = commands.iter().map(|c| c.to_string()).collect();
    let paths: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
    PermissionPolicy::new(
        PathBuf::from("/w"),
        SandboxStatus::Available { description: "test sandbox".into() },
        AllowList::from_config(&commands, &paths),
    )
}

fn assess(policy: &PermissionPolicy, mode: Mode, command: &str) -> Assessment {
    policy.assess(mode, "shell", &json!({ "command": command }).to_string(), false)
}

/// The "always" rules offered for `command` in ask mode.
fn always(command: &str) -> Vec<AllowRule> {
    match assess(&policy_with(&[], &[]), Mode::Ask, command) {
        Assessment::Ask { always, .. } => always,
        other => panic!("{command}: expected a question, got {other:?}"),
    }
}

#[test]
fn programs_that_write_or_run_commands_with_some_flags_are_not_read_only() {
    for line in [
        // GNU long options by prefix, and flags outside the harmless list.
        "sort --outp=F file",
        "sort --output F file",
        "sort -T /tmp/x file",
        "sort --compress-program=sh file",
        "sort --rev file",
        "uniq --sk=1 in",
        "tree -o F",
        "tree --fromfile list",
        "tree -R -H x",
        "file -C -m magic",
        "file --preserve-date x",
        "rg --pre ./evil x",
        "rg --pre=./evil x",
        "rg --hostname-bin=./evil x",
        "rg -z x",
        "rg --search-zip x",
        "fd -x rm",
        "fd --exec rm",
        "fd -HX rm",
        "find . -fprint F",
        "find . -fprintf F %p",
        "find . -fls F",
        "find . -execdir rm {} +",
        "find . -ok rm {} ;",
        "find . -okdir rm {} ;",
        "find . -delete",
        "find . -newer x -exec rm {} ;",
        // sed: writing or running from the script, a script file, any option not listed.
        "sed -n 'w out' f",
        "sed -n '1W out' f",
        "sed '1e id' f",
        "sed 's/a/b/e' f",
        "sed 's/a/b/gw out' f",
        "sed -n ':a;w F' f",
        "sed -e p -e 'w out' f",
        "sed -ne 'w out' f",
        "sed -es/a/b/w\\ x f",
        "sed -f script.sed f",
        "sed --file=script.sed f",
        "sed --in-place s/a/b/ f",
        "sed -si s/a/b/ f",
        // Builtins that assign or evaluate.
        "printf -v x '%s' y",
        "printf -- -v",
        "test -v 'a[$(touch x)]'",
        "[ -R ref ]",
        "echo ${x@P}",
        "echo ${!x}",
        "echo ${a[$i]}",
        "echo ${x:$n:1}",
        "echo $((a[1]))",
        "echo $((x))",
        "echo $[x]",
        "(( x ))",
        "let x=1",
        "[[ -v x ]]",
        // Keyword mode makes `NAME=value` arguments environment assignments.
        "set -k; git diff GIT_EXTERNAL_DIFF=./x",
        "set -ek",
        "set -o keyword",
        "bash -kc 'git diff GIT_EXTERNAL_DIFF=./x'",
        "bash -ic 'ls'",
        // Heredocs: a line continuation can build `$(` across lines.
        "cat <<EOF\n$\\\n(touch x)\nEOF",
        "cat <<EOF\n${x@P}\nEOF",
        // A continuation inside the delimiter does not quote it: the body is expanded.
        "cat <<EO\\\nF\n$(touch x)\nEOF",
        // Programs whose effect cannot be judged by flags, pagers, writers.
        "shuf -o F x",
        "shuf x",
        "date --se=2020-01-01",
        "date -s x",
        "date +%s",
        "hostname NAME",
        "awk '{print}' x",
        "xargs echo",
        "env",
        "env X=1 ls",
        "less x",
        "more x",
        "man ls",
        "tee out",
        "uniq in out",
        "xxd in out",
        "xxd -c 8 in out",
        // git: flags that run programs or write, global options, other subcommands.
        "git grep -O'sh -c x' pattern",
        "git grep -Ovim pattern",
        "git grep --open-files-in-pager=x pattern",
        "git grep --open pattern",
        "git diff --ext-diff",
        "git diff --textconv",
        "git log --output=F",
        "git log --out=F",
        "git log $\"--output=F\"",
        "git log --show-signature",
        "git show --show-sig",
        "git cat-file --textconv HEAD:x",
        "git cat-file --filters HEAD:x",
        "git -c core.pager=sh log",
        "git -c diff.external=x diff",
        "git --config-env=core.pager=X log",
        "git --exec-path=/tmp log",
        "git --git-dir=/tmp/evil log",
        "git --work-tree=/tmp log",
        "git -C link/.. log",
        "git -p log",
        "git --paginate log",
        "git help log",
        "git stash show --ext-diff",
        "git reflog show --output=F",
        "git tag -l -d v1",
        "git tag v1",
        "git branch -D main",
        "git config core.pager x",
        "git config --file x --get a.b",
    ] {
        assert!(!read_only(line), "judged read-only: {line}");
    }
}

#[test]
fn harmless_uses_of_those_programs_stay_read_only() {
    for line in [
        "sort -rn -k2,2 -t: file",
        "sort --key=2 --reverse --check=quiet file",
        "uniq -c in",
        "tree -L 2 -a --dirsfirst",
        "file -b --mime-type x",
        "rg -n -i --hidden -g '*.rs' -e pattern src",
        "rg --type rust -C3 pattern",
        "fd -t f -e rs src",
        "find . -name '*.rs' -newermt 2020-01-01 -print0",
        "find . -name -exec -print",
        "find -O2 . -maxdepth 2 -type d -printf '%p\\n'",
        "sed -n '1,5p' f",
        "sed -ne 's/a/b/p' f",
        "sed -E -e 's/x/y/g;/z/d' f",
        "printf '%s\\n' x",
        "set -euo pipefail; set +o xtrace",
        "bash -ec 'ls'",
        "test -f x && [ -n y ]",
        "echo ${HOME} ${#x} ${x:-none} ${x%.rs} ${1}",
        "echo $((1 + 2 * 3))",
        "cat <<EOF\nplain $HOME text\nEOF",
        "cat <<'EOF'\n$(literal) ${x@P}\\\nEOF",
        "xxd -l 64 in",
        "git log --oneline -5 --stat -- src",
        "git log -S needle -p --no-ext-diff --no-textconv",
        "git diff --cached --name-only HEAD~1",
        "git show HEAD:Cargo.toml",
        "git grep -n -i pattern -- src",
        "git -C sub status --porcelain",
        "git --no-pager blame -L 1,5 x",
        "git tag -l 'v*'",
        "git branch --list 'feat*'",
        "git stash list",
        "git config --get user.name",
    ] {
        assert!(read_only(line), "not read-only: {line}: {:?}", analyze(line, Path::new("/w")));
    }
}

/// A repository directory with `config` as its own configuration.
fn repository(config: &str) -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join(".git/objects"))?;
    std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n")?;
    std::fs::write(dir.path().join(".git/config"), config)?;
    Ok(dir)
}

#[test]
fn git_in_a_repository_whose_own_config_runs_programs_is_not_read_only() {
    let clean = repository("[core]\n\tbare = false\n\tfsmonitor = false\n").unwrap();
    std::fs::create_dir(clean.path().join("src")).unwrap();
    assert!(analyze("git status && git log -p", clean.path()).is_read_only());
    assert!(analyze("git diff", &clean.path().join("src")).is_read_only());

    for config in [
        "[core]\n\tfsmonitor = ./.hooks/fs\n",
        "[core]\n\tpager = sh -c 'touch x'\n",
        "[diff \"bin\"]\n\ttextconv = ./conv\n",
        "[diff]\n\texternal = ./x\n",
        "[filter \"f\"]\n\tclean = ./x\n",
        "[pager]\n\tlog = ./x\n",
        "[alias]\n\tl = !./x\n",
        "[include]\n\tpath = ../elsewhere\n",
        "[core]\n\tsshCommand = ./x\n",
    ] {
        let repo = repository(config).unwrap();
        let analysis = analyze("git diff", repo.path());
        let [Concern::Command { reason, .. }] = &analysis.concerns[..] else {
            panic!("{config}: {analysis:?}")
        };
        assert!(reason.contains("repository's own config"), "{reason}");
        // From a subdirectory, and through `-C`, the same repository is found.
        std::fs::create_dir(repo.path().join("sub")).unwrap();
        assert!(!analyze("git log", &repo.path().join("sub")).is_read_only(), "{config}");
        let parent = repo.path().parent().unwrap();
        let name = repo.path().file_name().unwrap().to_str().unwrap();
        assert!(!analyze(&format!("git -C {name} log"), parent).is_read_only(), "{config}");
    }

    // A bare repository in the workspace, and a `.git` file pointing at a git directory.
    let bare = tempfile::tempdir().unwrap();
    std::fs::create_dir(bare.path().join("objects")).unwrap();
    std::fs::write(bare.path().join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(bare.path().join("config"), "[core]\n\tfsmonitor = ./x\n").unwrap();
    assert!(!analyze("git status", bare.path()).is_read_only());
    let linked = tempfile::tempdir().unwrap();
    let target = bare.path().display();
    std::fs::write(linked.path().join(".git"), format!("gitdir: {target}\n")).unwrap();
    assert!(!analyze("git log", linked.path()).is_read_only());
    // A submodule's config counts too.
    let parent = repository("").unwrap();
    std::fs::create_dir_all(parent.path().join(".git/modules/lib")).unwrap();
    std::fs::write(parent.path().join(".git/modules/lib/config"), "[core]\n\tpager = x\n").unwrap();
    assert!(!analyze("git status", parent.path()).is_read_only());
}

#[test]
fn git_in_a_repository_with_a_hook_that_reading_commands_fire_is_not_read_only() {
    // `git status` and `git diff` refresh the index, which runs `post-index-change`.
    let repo = repository("").unwrap();
    assert!(analyze("git status", repo.path()).is_read_only());
    std::fs::create_dir_all(repo.path().join(".git/hooks")).unwrap();
    std::fs::write(repo.path().join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
    assert!(analyze("git status", repo.path()).is_read_only(), "other hooks do not fire");
    std::fs::write(repo.path().join(".git/hooks/post-index-change"), "#!/bin/sh\n").unwrap();
    let analysis = analyze("git status", repo.path());
    let [Concern::Command { reason, .. }] = &analysis.concerns[..] else { panic!("{analysis:?}") };
    assert!(reason.contains("post-index-change"), "{reason}");

    // Where core.hooksPath points, relative to the working tree.
    let repo = repository("[core]\n\thooksPath = .githooks\n").unwrap();
    assert!(analyze("git diff", repo.path()).is_read_only());
    std::fs::create_dir(repo.path().join(".githooks")).unwrap();
    std::fs::write(repo.path().join(".githooks/post-index-change"), "#!/bin/sh\n").unwrap();
    assert!(!analyze("git diff", repo.path()).is_read_only());

    // A submodule with its own `.git` directory, listed in .gitmodules.
    let repo = repository("").unwrap();
    std::fs::create_dir_all(repo.path().join("lib/.git/objects")).unwrap();
    std::fs::write(repo.path().join("lib/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(repo.path().join("lib/.git/config"), "[core]\n\tfsmonitor = ./x\n").unwrap();
    assert!(analyze("git status", repo.path()).is_read_only(), "not a submodule yet");
    std::fs::write(
        repo.path().join(".gitmodules"),
        "[submodule \"lib\"]\n\tpath = lib\n\turl = ./lib\n",
    )
    .unwrap();
    assert!(!analyze("git status", repo.path()).is_read_only());
}

#[test]
fn an_assignment_prefix_is_not_covered_by_a_rule_without_it() {
    let policy = policy_with(&["git diff", "make", "LC_ALL=C make test", "A=1"], &[]);
    assert_eq!(
        assess(&policy, Mode::Ask, "git diff HEAD"),
        Assessment::Allow { run_as: Mode::Ask }
    );
    for command in [
        "GIT_EXTERNAL_DIFF=./x git diff",
        "PAGER=./x git diff",
        "LD_PRELOAD=./x.so make",
        "BASH_ENV=./x make",
        "LC_ALL=C LD_PRELOAD=./x.so make",
        "X=$(./x) make",
        "A=1 B=$HOME make",
    ] {
        let Assessment::Ask { always, .. } = assess(&policy, Mode::Ask, command) else {
            panic!("{command} must ask")
        };
        // And "always" is never offered for it.
        assert!(always.is_empty(), "{command}: {always:?}");
    }
    // A rule that names the assignment covers it.
    assert_eq!(
        assess(&policy, Mode::Ask, "LC_ALL=C make test -j4"),
        Assessment::Allow { run_as: Mode::Ask }
    );
}

#[test]
fn cd_moves_where_relative_writes_land() {
    // Allowed: writes under /w/allowed only.
    let policy = policy_with(&["rm"], &["/w/allowed"]);
    for command in [
        "cd .. && echo x > allowed/f",
        "cd /etc; cat /dev/null > x",
        "(cd allowed); echo x > f",
        "cd allowed || true; echo x > f",
        "cd $DIR && echo x > allowed/f",
        "cd - && echo x > allowed/f",
        "pushd /tmp && echo x > allowed/f",
        "bash -c 'cd /etc' && echo x > allowed/f",
    ] {
        assert!(
            matches!(assess(&policy, Mode::Ask, command), Assessment::Ask { .. }),
            "{command} ran without asking"
        );
    }
    // Every place a write may land is named, and an unknown one has no path to allow.
    let analysis = analyze("cd sub; echo x > out", Path::new("/w"));
    let paths: Vec<_> = analysis
        .concerns
        .iter()
        .map(|concern| match concern {
            Concern::Write { path, .. } => path.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(paths, [Some(PathBuf::from("/w/out")), Some(PathBuf::from("/w/sub/out"))]);
    let analysis = analyze("cd \"$X\" && echo x > out", Path::new("/w"));
    assert!(matches!(&analysis.concerns[..], [Concern::Write { path: None, .. }]), "{analysis:?}");
    // Absolute targets do not depend on `cd`; a relative one needs a rule for every
    // place it may land (each `cd` may or may not have happened).
    assert_eq!(
        assess(&policy, Mode::Ask, "cd /etc && echo x > /w/allowed/f"),
        Assessment::Allow { run_as: Mode::Ask }
    );
    assert_eq!(
        assess(&policy, Mode::Ask, "cd allowed/a && cd b && echo x > allowed/c"),
        Assessment::Ask {
            summary: assess_summary(&policy, "cd allowed/a && cd b && echo x > allowed/c"),
            always: vec![
                AllowRule::Path(PathBuf::from("/w/allowed/c")),
                AllowRule::Path(PathBuf::from("/w/allowed/a/allowed/c")),
                AllowRule::Path(PathBuf::from("/w/b/allowed/c")),
                AllowRule::Path(PathBuf::from("/w/allowed/a/b/allowed/c")),
            ],
            run_as: Mode::Ask,
        }
    );
    // `..` after a name goes wherever a symlink of that name points: no path to allow.
    let policy = policy_with(&[], &["/w"]);
    for command in ["echo x > link/../f", "cd link/.. && echo x > f", "cd /w/l/../x; echo > f"] {
        assert!(
            matches!(assess(&policy, Mode::Ask, command), Assessment::Ask { .. }),
            "{command} ran without asking"
        );
    }
    assert_eq!(
        assess(&policy, Mode::Ask, "cd ../w/sub && echo x > ./f"),
        Assessment::Allow { run_as: Mode::Ask }
    );
    // The file tools too.
    let write = json!({"path": "docs/link/../f", "content": "x"}).to_string();
    let Assessment::Ask { always, .. } = policy.assess(Mode::Ask, "write_file", &write, false)
    else {
        panic!("a write through `..` after a name must ask")
    };
    assert!(always.is_empty(), "{always:?}");
    let write = json!({"path": "../w/docs/f", "content": "x"}).to_string();
    assert_eq!(
        policy.assess(Mode::Ask, "write_file", &write, false),
        Assessment::Allow { run_as: Mode::Ask }
    );

    // Each `cd` to a new name may double the places: past a few dozen they are unknown.
    let many: Vec<String> = (0..10).map(|n| format!("cd d{n}")).collect();
    let analysis = analyze(&format!("{}; echo x > f", many.join("; ")), Path::new("/w"));
    assert!(
        matches!(&analysis.concerns[..], [Concern::Write { path: None, .. }]),
        "{} concerns",
        analysis.concerns.len()
    );

    // git after a cd somewhere unknown cannot have its repository checked.
    assert!(!read_only("cd \"$X\" && git status"));
}

fn assess_summary(policy: &PermissionPolicy, command: &str) -> String {
    match assess(policy, Mode::Ask, command) {
        Assessment::Ask { summary, .. } => summary,
        other => panic!("{other:?}"),
    }
}

#[test]
fn always_rules_are_no_broader_than_the_command_needs() {
    let command = |rule: &str| vec![AllowRule::CommandPrefix(rule.into())];
    assert_eq!(always("cargo test --release"), command("cargo test"));
    assert_eq!(always("git push origin main"), command("git push"));
    assert_eq!(always("npm run build -- --prod"), command("npm run build"));
    assert_eq!(always("docker compose up -d"), command("docker compose up"));
    assert_eq!(always("python3 x.py --flag"), command("python3 x.py --flag"));
    assert_eq!(always("python3.12 -m pytest"), command("python3.12 -m pytest"));
    assert_eq!(always("node build.js"), command("node build.js"));
    assert_eq!(always("find . -delete"), command("find . -delete"));
    assert_eq!(always("rm -rf build"), command("rm -rf build"));
    assert_eq!(always("make install"), command("make install"));
    for none in [
        "git -c a=b status",
        "git -C /x push",
        "cargo +nightly build",
        "make -j4 install",
        "python3",
        "node",
        "xargs",
        "GIT_DIR=x git push",
        "rm \"$X\"",
        "rm 'a b'",
    ] {
        assert_eq!(always(none), [], "{none}");
    }
    // The rule offered covers what was asked and not more.
    let mut policy = policy_with(&[], &[]);
    policy.remember(&always("python3 x.py"));
    assert_eq!(assess(&policy, Mode::Ask, "python3 x.py"), Assessment::Allow { run_as: Mode::Ask });
    assert!(matches!(assess(&policy, Mode::Ask, "python3 y.py"), Assessment::Ask { .. }));
    assert!(matches!(assess(&policy, Mode::Ask, "python3 -c 'x'"), Assessment::Ask { .. }));
}

// Findings of the second review (issue 3): each line below ran a program while judged
// read-only, or wrote where no rule allowed.

#[test]
fn quoting_the_parser_got_wrong_no_longer_hides_a_command() {
    for line in [
        // Inside "..." there is no $'...': the `;` ends the command.
        "echo \"$'\" ; touch X ; echo \"'\"",
        "echo \"$\\\"\" ; touch X",
        // A backslash-newline joins `$` and `(`: bash removes it before reading words.
        "echo \"$\\\n(touch X)\"",
        "echo $\\\n{x:='$(touch X)'} $\\\n{x@P}",
        "echo a$\\\n(touch X)",
        "echo hi >\\\n> X",
        "echo a &\\\n& touch X",
        "echo a |\\\n| touch X",
        "echo $(\\\n(x))",
        // In backquotes inside "...", `\"` is a plain quote.
        "echo \"`echo \\\" ' \\\" ; touch X ; \\\" ' \\\"`\"",
        // bash reads the delimiter `$'E\x4fF'` as `EOF`, and `$X` as written.
        "cat <<$'E\\x4fF'\nEOF\ntouch X\nEx4fF",
        "cat <<$X\n$X\ntouch X\n\n",
        "cat <<`x`\nbody\n`x`",
        // Defaults that assign, and exporting what is assigned.
        "echo ${X=1}",
        "echo ${X:=1}",
        "set -a",
        "set -o allexport",
        "set -ea",
        "bash -a -c 'echo hi'",
        "set -a; echo ${GIT_CONFIG_COUNT=1} ${GIT_CONFIG_KEY_0=core.fsmonitor} \
         \"${GIT_CONFIG_VALUE_0=touch X}\" >/dev/null; git status",
        // `--` makes every later word an operand: `xxd IN OUT` writes OUT.
        "xxd -- -name out",
        "xxd -c 8 -- in out",
        "sed -n -- 'w out' in",
        "uniq -- a b",
    ] {
        assert!(!read_only(line), "read-only: {line:?}");
    }
    // What bash reads the same way stays read-only.
    for line in [
        "echo \"$\" '$' \"a $ b\"",
        "echo \"$HOME\" a\\\nb",
        "ls \\\n  -la \\\n  src",
        "ls &&\\\n  pwd |\\\n  wc -l;\\\nls",
        "echo \"`echo hi`\"",
        "cat <<'EOF'\n$(not run)\nEOF",
        "cat <<\\EOF\n$(not run)\nEOF",
        "echo ${X:-default} ${#X} ${X%.rs}",
        "set -eu -o pipefail",
        "xxd -c 8 -- in",
        "sed -n -- 1p in",
    ] {
        assert!(read_only(line), "not read-only: {line:?}: {:?}", analyze(line, Path::new("/w")));
    }
}

#[test]
fn git_after_the_line_may_have_set_its_variables_is_not_read_only() {
    let repo = repository("").unwrap();
    assert!(analyze("echo hi; git status", repo.path()).is_read_only());
    assert!(analyze("echo \"$PATH\" | tr : x; git status", repo.path()).is_read_only());
    for line in [
        "export GIT_DIR=/elsewhere; git status",
        "declare -x GIT_CONFIG_COUNT=1; git status",
        "read GIT_EXTERNAL_DIFF < f; git diff",
        "GIT_PAGER=./x; git log",
        "export \"$N=x\"; git status",
        "export PATH=.:$PATH; ls",
        "eval \"export GI\\T_DIR=/x\"; git status",
        "printf -v GIT_DIR /x; git status",
    ] {
        let analysis = analyze(line, repo.path());
        let program = line.rsplit("; ").next().unwrap();
        assert!(
            analysis.concerns.iter().any(|concern| matches!(
                concern,
                Concern::Command { text, reason, .. }
                    if text == program && reason.contains("earlier command")
            )),
            "{line}: {analysis:?}"
        );
    }
    // CDPATH changed: where a later `cd` goes is not known.
    let analysis = analyze("CDPATH=/tmp; cd x; echo hi > f", repo.path());
    assert!(analysis.concerns.contains(&Concern::Write { target: "f".into(), path: None }));
}

#[test]
fn the_repository_config_is_read_with_gits_own_grammar() {
    for config in [
        // A comment is never continued by a trailing backslash.
        "[core]\n# note \\\n\tfsmonitor = ./hook\n",
        // A value ending in an escaped backslash is not continued either.
        "[core]\n\teditor = \"vi\\\\\"\n\tfsmonitor = ./hook\n",
        // Several headers on one line, the setting after the last.
        "[user][core]fsmonitor = ./hook\n",
    ] {
        let repo = repository(config).unwrap();
        let analysis = analyze("git status", repo.path());
        assert!(
            matches!(&analysis.concerns[..], [Concern::Command { reason, .. }]
                if reason.contains("core.fsmonitor")),
            "{config}: {analysis:?}"
        );
    }
    // A file git cannot read is not trusted.
    let broken = repository("[core\n").unwrap();
    assert!(!analyze("git status", broken.path()).is_read_only());
}

#[test]
fn a_rule_for_a_command_covers_that_command_only() {
    let policy = policy_with(&["touch once.txt", "cargo test", "npm run build", "npm run"], &[]);
    let allowed = Assessment::Allow { run_as: Mode::Ask };
    for command in ["touch once.txt", "cargo test --release", "npm run build -- --prod"] {
        assert_eq!(assess(&policy, Mode::Ask, command), allowed, "{command}");
    }
    for command in [
        "touch once.txt /outside/extra.txt",
        "touch once.txt $X",
        "touch once.txt; touch other.txt",
        "cargo testing",
        "npm run lint",
    ] {
        assert!(matches!(assess(&policy, Mode::Ask, command), Assessment::Ask { .. }), "{command}");
    }
}

#[cfg(unix)]
#[test]
fn writes_are_judged_where_symlinks_land_and_git_metadata_always_asks() {
    use std::os::unix::fs::symlink;
    let work = tempfile::tempdir().unwrap();
    let work = work.path().canonicalize().unwrap();
    std::fs::create_dir_all(work.join(".git")).unwrap();
    std::fs::write(work.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir(work.join("docs")).unwrap();
    symlink("../.git/config", work.join("docs/settings.ini")).unwrap();
    let docs = work.join("docs");
    let policy = PermissionPolicy::new(
        work.clone(),
        SandboxStatus::Available { description: "test sandbox".into() },
        AllowList::from_config(&[], std::slice::from_ref(&docs)),
    );
    let write = |path: &str| json!({ "path": path, "content": "x" }).to_string();
    let allowed = |mode| Assessment::Allow { run_as: mode };
    assert_eq!(
        policy.assess(Mode::Ask, "write_file", &write("docs/a.md"), false),
        allowed(Mode::Ask)
    );
    for mode in [Mode::Ask, Mode::Auto] {
        let Assessment::Ask { summary, always, .. } =
            policy.assess(mode, "write_file", &write("docs/settings.ini"), false)
        else {
            panic!("{mode:?}: a write through a link into .git must ask")
        };
        assert!(summary.contains("git metadata"), "{summary}");
        // "Always" names the file the write lands in, and only it covers it.
        assert_eq!(always, [AllowRule::Path(work.join(".git/config"))]);
        let mut remembered = policy.clone();
        remembered.remember(&always);
        assert_eq!(
            remembered.assess(mode, "write_file", &write("docs/settings.ini"), false),
            allowed(mode)
        );
    }
    // A rule for a directory does not cover git metadata beneath it either.
    let broad = PermissionPolicy::new(
        work.clone(),
        SandboxStatus::Available { description: "test sandbox".into() },
        AllowList::from_config(&[], std::slice::from_ref(&work)),
    );
    for mode in [Mode::Ask, Mode::Auto] {
        let call = write(".git/hooks/pre-commit");
        assert!(matches!(broad.assess(mode, "write_file", &call, false), Assessment::Ask { .. }));
    }
    // The same for a shell redirection in ask mode.
    let command = json!({ "command": "echo x > docs/settings.ini" }).to_string();
    assert!(matches!(policy.assess(Mode::Ask, "shell", &command, false), Assessment::Ask { .. }));
}

#[cfg(unix)]
#[test]
fn a_workdir_through_a_symlink_is_judged_where_the_command_runs() {
    use std::os::unix::fs::symlink;
    let work = tempfile::tempdir().unwrap();
    let work = work.path().canonicalize().unwrap();
    let evil = repository("[core]\n\tfsmonitor = ./hook\n").unwrap();
    std::fs::create_dir(evil.path().join("sub")).unwrap();
    symlink(evil.path().join("sub"), work.join("l")).unwrap();
    let policy = PermissionPolicy::new(
        work.clone(),
        SandboxStatus::Available { description: "test sandbox".into() },
        AllowList::from_config(&[], &[work.join("notes.txt")]),
    );
    let shell = |command: &str, workdir: &str| {
        json!({ "command": command, "workdir": workdir }).to_string()
    };
    let git = policy.assess(Mode::ReadOnly, "shell", &shell("git status", "l/.."), false);
    assert!(
        matches!(&git, Assessment::Deny { reason } if reason.contains("core.fsmonitor")),
        "{git:?}"
    );
    // `notes.txt` in `l/..` is the evil repository's, which no rule allows.
    let echo = policy.assess(Mode::Ask, "shell", &shell("echo hi > notes.txt", "l/.."), false);
    assert!(matches!(&echo, Assessment::Ask { summary, .. } if summary.contains("notes.txt")));
    assert_eq!(
        policy.assess(Mode::Ask, "shell", &shell("echo hi > notes.txt", "."), false),
        Assessment::Allow { run_as: Mode::Ask }
    );
    // A workdir that does not exist is refused, saying so.
    let missing = policy.assess(Mode::Ask, "shell", &shell("ls", "nowhere"), false);
    assert!(
        matches!(&missing, Assessment::Deny { reason } if reason.contains("not an existing directory")),
        "{missing:?}"
    );
}

/// Runs `git` in `dir` with no inherited repository.
fn git_in(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .stdout(std::process::Stdio::null())
        .status();
    assert!(status.is_ok_and(|status| status.success()), "git {args:?}");
}

/// The analysis of `git status` in `dir`, or `None` when it does not end within 20 s.
fn status_within_bound(dir: &Path) -> Option<bool> {
    let dir = dir.to_path_buf();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(analyze("git status", &dir).is_read_only());
    });
    receive.recv_timeout(std::time::Duration::from_secs(20)).ok()
}

#[test]
fn a_submodule_only_in_the_index_is_checked_like_one_in_gitmodules() {
    let top = tempfile::tempdir().unwrap();
    git_in(top.path(), &["init", "-q"]);
    let sub = top.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    git_in(&sub, &["init", "-q"]);
    std::fs::write(sub.join("f"), "x").unwrap();
    git_in(&sub, &["add", "f"]);
    git_in(&sub, &["commit", "-qm", "x"]);
    git_in(top.path(), &["add", "sub"]);
    assert!(!top.path().join(".gitmodules").exists());
    assert_eq!(status_within_bound(top.path()), Some(true), "a clean gitlink is fine");
    git_in(&sub, &["config", "core.fsmonitor", "./hook"]);
    for version in ["2", "3", "4"] {
        git_in(top.path(), &["update-index", "--index-version", version]);
        let analysis = analyze("git status", top.path());
        assert!(
            matches!(&analysis.concerns[..], [Concern::Command { reason, .. }]
                if reason.contains("core.fsmonitor")),
            "index version {version}: {analysis:?}"
        );
    }
    // An index that cannot be read is a risk, not "no submodules".
    std::fs::write(top.path().join(".git/index"), b"DIRC garbage").unwrap();
    let analysis = analyze("git status", top.path());
    assert!(
        matches!(&analysis.concerns[..], [Concern::Command { reason, .. }]
            if reason.contains("index")),
        "{analysis:?}"
    );
}

#[test]
fn repository_files_that_are_fifos_devices_or_huge_are_not_trusted_and_never_hang() {
    let mkfifo = |path: &Path| {
        let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
        assert!(status.success());
    };
    // `.gitmodules` as a FIFO, or a symlink to an endless device.
    let repo = repository("").unwrap();
    mkfifo(&repo.path().join(".gitmodules"));
    assert_eq!(status_within_bound(repo.path()), Some(false), ".gitmodules FIFO");
    let repo = repository("").unwrap();
    std::os::unix::fs::symlink("/dev/zero", repo.path().join(".gitmodules")).unwrap();
    let analysis = analyze("git status", repo.path());
    assert!(
        matches!(&analysis.concerns[..], [Concern::Command { reason, .. }]
            if reason.contains(".gitmodules")),
        "{analysis:?}"
    );
    // The config itself as a FIFO, a symlink to a device, larger than 1 MiB.
    let repo = repository("").unwrap();
    std::fs::remove_file(repo.path().join(".git/config")).unwrap();
    mkfifo(&repo.path().join(".git/config"));
    assert_eq!(status_within_bound(repo.path()), Some(false), "config FIFO");
    let repo = repository("").unwrap();
    std::fs::remove_file(repo.path().join(".git/config")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", repo.path().join(".git/config")).unwrap();
    assert_eq!(status_within_bound(repo.path()), Some(false), "config -> /dev/zero");
    let mut huge = String::from("[core]\n\tbare = false\n");
    huge.push_str(&"# padding padding padding padding\n".repeat(40_000));
    let repo = repository(&huge).unwrap();
    assert_eq!(status_within_bound(repo.path()), Some(false), "config over 1 MiB");
    // `commondir` and the `.git` file as FIFOs.
    let repo = repository("").unwrap();
    mkfifo(&repo.path().join(".git/commondir"));
    assert_eq!(status_within_bound(repo.path()), Some(false), "commondir FIFO");
    let linked = tempfile::tempdir().unwrap();
    mkfifo(&linked.path().join(".git"));
    assert_eq!(status_within_bound(linked.path()), Some(false), ".git FIFO");
}

#[test]
fn more_submodules_than_are_checked_is_not_read_only() {
    // Git directories of submodules under `.git/modules`, past what the check reads.
    let repo = repository("").unwrap();
    assert!(analyze("git status", repo.path()).is_read_only());
    for index in 0..600 {
        let module = repo.path().join(format!(".git/modules/m{index}"));
        std::fs::create_dir_all(&module).unwrap();
        std::fs::write(module.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }
    let analysis = analyze("git status", repo.path());
    assert!(
        matches!(&analysis.concerns[..], [Concern::Command { reason, .. }]
            if reason.contains("more submodules")),
        "{analysis:?}"
    );
    // Working-tree submodules with a `.git` of their own, past what the check follows.
    let repo = repository("").unwrap();
    let mut gitmodules = String::new();
    for index in 0..300 {
        std::fs::create_dir_all(repo.path().join(format!("s{index}/.git"))).unwrap();
        gitmodules.push_str(&format!("[submodule \"s{index}\"]\n\tpath = s{index}\n"));
    }
    std::fs::write(repo.path().join(".gitmodules"), gitmodules).unwrap();
    let analysis = analyze("git status", repo.path());
    assert!(
        matches!(&analysis.concerns[..], [Concern::Command { reason, .. }]
            if reason.contains("more submodules")),
        "{analysis:?}"
    );
}
