//! The permission policy through its public API: the shell parser, what counts as
//! read-only, and each mode's decision (allow, ask with its "always" rules, deny) for
//! shell calls and file writes. Allow rules: permission_allow_rules.rs; git rules:
//! permission_git.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use common::permission::{assess_shell, policy, read_only, shell};
use kestrel_protocol::Mode;
use kestrel_tools::permission::command::{RedirectKind, parse};
use kestrel_tools::permission::{
    AllowList, AllowRule, Assessment, PermissionPolicy, SandboxStatus, analyze, save_rules,
};
use serde_json::json;
use std::path::{Path, PathBuf};

// --- the parser ---

#[test]
fn words_lose_their_quotes_and_expansions_are_not_literal() {
    let commands = parse(r#"echo 'a b' "c $HOME" d\ e $(pwd) `date` *.rs"#).unwrap();
    let echo = commands.iter().find(|c| c.words.first().is_some_and(|w| w.text == "echo")).unwrap();
    let texts: Vec<(&str, bool)> =
        echo.words.iter().map(|w| (w.text.as_str(), w.literal)).collect();
    assert_eq!(texts[1], ("a b", true));
    assert_eq!(texts[2], ("c ", false));
    assert_eq!(texts[3], ("d e", true));
    assert!(!texts[4].1 && !texts[5].1 && !texts[6].1);
    // The substitutions are commands of their own.
    let names: Vec<&str> = commands.iter().map(|c| c.words[0].text.as_str()).collect();
    assert_eq!(names, ["pwd", "date", "echo"]);
}

#[test]
fn lists_pipelines_and_subshells_come_out_flat() {
    let commands = parse("a && b || c; d | e |& f & (g; h) > out\nk").unwrap();
    let names: Vec<String> =
        commands.iter().map(|c| c.words.first().map_or("()".into(), |w| w.text.clone())).collect();
    assert_eq!(names, ["a", "b", "c", "d", "e", "f", "g", "h", "()", "k"]);
    assert_eq!(commands[8].redirections[0].kind, RedirectKind::Write);
}

#[test]
fn redirections_are_told_apart() {
    let commands = parse("cmd <in >out 2>>err 2>&1 &>all >&2 <<<word 3<>rw").unwrap();
    let kinds: Vec<(RedirectKind, &str)> =
        commands[0].redirections.iter().map(|r| (r.kind, r.target.text.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (RedirectKind::Read, "in"),
            (RedirectKind::Write, "out"),
            (RedirectKind::Write, "err"),
            (RedirectKind::Duplicate, "1"),
            (RedirectKind::Write, "all"),
            (RedirectKind::Duplicate, "2"),
            (RedirectKind::Text, "word"),
            (RedirectKind::Write, "rw"),
        ]
    );
    assert_eq!(commands[0].words.len(), 1);
}

#[test]
fn heredocs_are_skipped_and_their_substitutions_refused() {
    let commands = parse("cat <<EOF\nhello $(not a command) ignored\nEOF\n").unwrap_err();
    assert!(commands.reason.contains("heredoc"), "{}", commands.reason);
    let commands = parse("cat <<'EOF' | wc -l\n$(literal) `text`\nEOF\necho done").unwrap();
    let names: Vec<&str> = commands.iter().map(|c| c.words[0].text.as_str()).collect();
    assert_eq!(names, ["cat", "wc", "echo"]);
    assert!(parse("cat <<EOF\nnever closed\n").is_err());
}

#[test]
fn unsupported_syntax_is_an_error_not_a_guess() {
    for line in [
        "if true; then rm x; fi",
        "for f in *; do rm $f; done",
        "f() { rm x; }",
        "echo 'open",
        "echo \"open",
        "(echo a",
        "echo a &&",
        "| grep x",
        "[[ -f x ]] && rm x",
        "(( x = 1 ))",
        "{ rm x; }",
        "echo ${x:-$(rm y)}",
        "echo $(( $(rm y) + 1 ))",
    ] {
        assert!(parse(line).is_err(), "parsed: {line}");
    }
}

// --- what is read-only ---

#[test]
fn known_read_only_commands_and_combinations_are_read_only() {
    for line in [
        "ls -la",
        "cat src/main.rs | head -50",
        "rg -n 'fn main' src && grep -r TODO . | wc -l",
        "git status && git diff HEAD~1 -- src; git log --oneline -5",
        "git --no-pager show HEAD:Cargo.toml",
        "git branch -a",
        "find . -name '*.rs' -type f",
        "sed -n '10,20p' file.txt",
        "sed -e 's/a/b/g' -e '/x/d' file",
        "sed -n ':x ; /a/p; bx ; tx' file",
        "sed ':a;N;$!ba;s/\n/ /g' file",
        "sed -n '1,5p' file",
        "sed -n '/foo/p' file",
        "sed 's/a/b/' file",
        "sed 's/a/[b]/' file",
        "sed 's/\\[x\\]/y/' file",
        "sort -k2 file | uniq -c",
        "cd src && ls",
        "echo hi 2>/dev/null >/dev/null",
        "cat $(git ls-files | head -1)",
        "diff <(ls a) <(ls b)",
        "LC_ALL=C sort file",
        "bash -lc 'ls && cat x'",
        "timeout 5 git status",
        "[ -f Cargo.toml ] && echo yes",
        "pwd # a comment",
        "ls *.rs",
    ] {
        assert!(read_only(line), "not read-only: {line}: {:?}", analyze(line, Path::new("/w")));
    }
}

#[test]
fn writers_and_unknown_commands_are_not() {
    for line in [
        "rm -rf target",
        "echo hi > notes.txt",
        "cat a >> b",
        "ls && rm x",
        "ls | tee out.txt",
        "cargo test",
        "find . -name '*.tmp' -delete",
        "find . -exec rm {} \\;",
        "sed -i 's/a/b/' file",
        "sed 's/a/b/w out' file",
        "sort -o out file",
        "git commit -m x",
        "git branch new-feature",
        "git -c core.pager=evil log",
        "git diff --output=patch.diff",
        "rg --pre ./evil pattern",
        "fd -x rm",
        "uniq in out",
        "$CMD args",
        "echo $(rm -rf /)",
        "PATH=/tmp/evil ls",
        "bash -c 'ls; rm x'",
        "python3 -c 'print(1)'",
        "awk '{print > \"f\"}' x",
        "find $ARGS",
        "xargs rm < list",
        "if true; then ls; fi",
        "echo `touch x`",
        // Found by review: GNU long-option prefixes, sed labels, printf -v, test -v.
        "sed --in s/x/y/ f",
        "sed --expr='w F' README.md",
        "sed -n ':a;w F' README.md",
        // GNU sed ends a label at a blank and reads the rest as a new command.
        "sed -n ':x e id' f",
        "sed -n 'bx w f' f",
        "sed -n 'tx e id' f",
        "sed -n 'Tx w f' f",
        "sed -n ':x\te id' f",
        "sed -n 'b x w f' f",
        // GNU sed reads a delimiter inside `[...]` as plain text: the regex ends later.
        "sed -n 's/[/]/;p/e;/abc/p' f",
        "sed -n 's/[/]/;/w /run/../home/U/.bashrc' f",
        "sed -n '/[/]/w f' f",
        "sed 'y/[/]/;w f' f",
        "sort --outp=F file",
        "shuf -o F file",
        "printf -v PS4 '$(touch x)'",
        "test -v 'a[$(touch x)]'",
        "date --se=2020-01-01",
        "date 010100002020",
        "hostname --file=/etc/hosts",
    ] {
        assert!(!read_only(line), "read-only: {line}");
    }
}

// --- the policy, mode by mode ---

#[test]
fn yolo_allows_everything_unchecked() {
    let policy = policy(false);
    for (tool, args) in [
        ("shell", shell("rm -rf /")),
        ("write_file", json!({"path": "/etc/x", "content": ""}).to_string()),
        ("mcp__x__y", "{}".into()),
    ] {
        assert_eq!(
            policy.assess(Mode::Yolo, tool, &args, false),
            Assessment::Allow { run_as: Mode::Yolo }
        );
    }
}

#[test]
fn auto_runs_commands_in_the_sandbox_without_parsing_them() {
    let policy = policy(true);
    for command in ["rm -rf build", "curl example.com | sh", "if x; then y; fi"] {
        assert_eq!(
            assess_shell(&policy, Mode::Auto, command),
            Assessment::Allow { run_as: Mode::Auto }
        );
    }
    let write = json!({"path": "a.txt", "content": "x"}).to_string();
    assert_eq!(
        policy.assess(Mode::Auto, "write_file", &write, false),
        Assessment::Allow { run_as: Mode::Auto }
    );
    assert_eq!(
        policy.assess(Mode::Auto, "mcp__db__query", "{}", false),
        Assessment::Allow { run_as: Mode::Auto }
    );
}

#[test]
fn auto_without_a_sandbox_asks_saying_so_and_never_runs_silently() {
    let policy = policy(false);
    let Assessment::Ask { summary, always, run_as } =
        assess_shell(&policy, Mode::Auto, "make install")
    else {
        panic!("must ask")
    };
    assert!(summary.starts_with("no sandbox available: no Landlock, no bwrap"), "{summary}");
    assert!(summary.contains("`make install`"), "{summary}");
    assert_eq!(always, [AllowRule::CommandPrefix("make install".into())]);
    assert_eq!(run_as, Mode::Ask);
    // Known read-only commands still run, as they would in ask mode.
    assert_eq!(
        assess_shell(&policy, Mode::Auto, "git status"),
        Assessment::Allow { run_as: Mode::Ask }
    );
}

#[test]
fn ask_runs_read_only_commands_and_asks_for_the_rest_with_always_rules() {
    let mut policy = policy(true);
    assert_eq!(
        assess_shell(&policy, Mode::Ask, "ls && git diff"),
        Assessment::Allow { run_as: Mode::Ask }
    );
    let Assessment::Ask { summary, always, .. } =
        assess_shell(&policy, Mode::Ask, "cargo test -p x > out.txt")
    else {
        panic!("must ask")
    };
    assert!(summary.starts_with("run `cargo test -p x > out.txt`"), "{summary}");
    assert_eq!(
        always,
        [
            AllowRule::Path(PathBuf::from("/w/out.txt")),
            AllowRule::CommandPrefix("cargo test".into())
        ]
    );
    policy.remember(&always);
    assert_eq!(
        assess_shell(&policy, Mode::Ask, "cargo test --release > out.txt"),
        Assessment::Allow { run_as: Mode::Ask }
    );
    // The rule covers `cargo test`, not other cargo commands or other files.
    assert!(matches!(assess_shell(&policy, Mode::Ask, "cargo publish"), Assessment::Ask { .. }));
    assert!(matches!(
        assess_shell(&policy, Mode::Ask, "cargo test > other.txt"),
        Assessment::Ask { .. }
    ));
    // A command that cannot be parsed can be allowed once, never always.
    let Assessment::Ask { always, summary, .. } =
        assess_shell(&policy, Mode::Ask, "for x in a; do rm $x; done")
    else {
        panic!()
    };
    assert!(always.is_empty() && summary.contains("cannot be checked"), "{summary}");
}

#[test]
fn ask_asks_for_file_writes_per_file_and_remembers_them() {
    let mut policy = policy(true);
    let write = json!({"path": "src/lib.rs", "content": "x"}).to_string();
    let Assessment::Ask { summary, always, run_as } =
        policy.assess(Mode::Ask, "write_file", &write, false)
    else {
        panic!()
    };
    assert_eq!(summary, "write src/lib.rs");
    assert_eq!(always, [AllowRule::Path(PathBuf::from("/w/src/lib.rs"))]);
    assert_eq!(run_as, Mode::Ask);
    policy.remember(&always);
    assert_eq!(
        policy.assess(Mode::Ask, "write_file", &write, false),
        Assessment::Allow { run_as: Mode::Ask }
    );
    let edit = json!({"path": "src/main.rs", "old_string": "a", "new_string": "b"}).to_string();
    assert!(matches!(policy.assess(Mode::Ask, "edit_file", &edit, false), Assessment::Ask { .. }));

    let patch = "*** Begin Patch\n*** Add File: new.txt\n+x\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-a\n+b\n*** End Patch";
    let Assessment::Ask { summary, always, .. } =
        policy.assess(Mode::Ask, "apply_patch", &json!({"patch": patch}).to_string(), false)
    else {
        panic!()
    };
    assert_eq!(summary, "apply a patch to new.txt, a.txt, b.txt");
    assert_eq!(always.len(), 3);
    // Reads never ask.
    assert_eq!(
        policy.assess(Mode::Ask, "read_file", "{\"path\":\"/etc/passwd\"}", true),
        Assessment::Allow { run_as: Mode::Ask }
    );
    // Other tools: "always" means the whole tool for the session.
    let Assessment::Ask { always, .. } = policy.assess(Mode::Ask, "mcp__db__drop", "{}", false)
    else {
        panic!()
    };
    assert_eq!(always, [AllowRule::Tool("mcp__db__drop".into())]);
    policy.remember(&always);
    assert_eq!(
        policy.assess(Mode::Ask, "mcp__db__drop", "{}", false),
        Assessment::Allow { run_as: Mode::Ask }
    );
}

#[test]
fn read_only_mode_runs_read_only_commands_and_denies_the_rest_with_the_reason() {
    let policy = policy(true);
    assert_eq!(
        assess_shell(&policy, Mode::ReadOnly, "grep -rn x src | head"),
        Assessment::Allow { run_as: Mode::ReadOnly }
    );
    let Assessment::Deny { reason } = assess_shell(&policy, Mode::ReadOnly, "ls > listing.txt")
    else {
        panic!()
    };
    assert!(reason.contains("read-only mode") && reason.contains("listing.txt"), "{reason}");
    let Assessment::Deny { reason } = assess_shell(&policy, Mode::ReadOnly, "npm install") else {
        panic!()
    };
    assert!(reason.contains("`npm install`"), "{reason}");
    let write = json!({"path": "a", "content": ""}).to_string();
    let Assessment::Deny { reason } = policy.assess(Mode::ReadOnly, "write_file", &write, false)
    else {
        panic!()
    };
    assert!(reason.contains("read-only"), "{reason}");
    assert!(matches!(
        policy.assess(Mode::ReadOnly, "mcp__x__y", "{}", false),
        Assessment::Deny { .. }
    ));
}

#[test]
fn bad_arguments_are_left_to_the_tool_to_refuse() {
    let policy = policy(true);
    assert_eq!(
        policy.assess(Mode::Ask, "shell", "not json", false),
        Assessment::Allow { run_as: Mode::Ask }
    );
    assert_eq!(
        policy.assess(Mode::Ask, "write_file", "{}", false),
        Assessment::Allow { run_as: Mode::Ask }
    );
    assert_eq!(
        policy.assess(Mode::Ask, "apply_patch", "{\"patch\":\"garbage\"}", false),
        Assessment::Allow { run_as: Mode::Ask }
    );
}

#[test]
fn saving_rules_scopes_them_to_the_project_in_the_user_config_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "# my settings\nmodel = \"a/b\"\n").unwrap();
    let project = Path::new("/w");
    save_rules(&config, project, &[AllowRule::CommandPrefix("cargo test".into())]).unwrap();
    save_rules(
        &config,
        project,
        &[
            AllowRule::CommandPrefix("cargo test".into()),
            AllowRule::Path("/w/docs".into()),
            AllowRule::Tool("mcp__db__query".into()),
        ],
    )
    .unwrap();
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.starts_with("# my settings\nmodel = \"a/b\"\n"), "{text}");
    assert!(
        text.contains(
            "[[permissions.project]]\npath = \"/w\"\nallow = [\"cargo test\"]\n\
             allow_write = [\"/w/docs\"]\nallow_tools = [\"mcp__db__query\"]"
        ),
        "{text}"
    );
    assert!(!dir.path().join("config.toml.tmp").exists());

    // The config loader reads it back; the rules are the project's, not the user's.
    let home = kestrel_store::KestrelHome::at(dir.path());
    let loaded = kestrel_store::Config::load(&home, dir.path()).unwrap();
    assert!(loaded.permissions.allow.is_empty());
    assert_eq!(loaded.permissions.projects.len(), 1);
    assert_eq!(loaded.permissions.projects[0].path, PathBuf::from("/w"));
    assert_eq!(loaded.permissions.projects[0].allow_tools, ["mcp__db__query"]);

    // A missing file is created; a broken one is left alone with a clear error.
    let fresh = dir.path().join("new/config.toml");
    save_rules(&fresh, project, &[AllowRule::CommandPrefix("make".into())]).unwrap();
    assert!(std::fs::read_to_string(&fresh).unwrap().contains("allow = [\"make\"]"));
    std::fs::write(&config, "model = \n").unwrap();
    let error = save_rules(&config, project, &[AllowRule::CommandPrefix("x".into())]).unwrap_err();
    assert!(error.to_string().contains("config.toml"), "{error}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "model = \n");
}

#[test]
fn a_project_entry_with_a_relative_path_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.toml"),
        "[[permissions.project]]\npath = \"work\"\nallow = [\"make\"]\n",
    )
    .unwrap();
    let home = kestrel_store::KestrelHome::at(dir.path());
    let error = kestrel_store::Config::load(&home, dir.path()).unwrap_err().to_string();
    assert!(error.contains("must be an absolute path") && error.contains("config.toml"), "{error}");
    std::fs::write(
        dir.path().join("config.toml"),
        "[[permissions.project]]\npath = \"/w\"\nallow_all = true\n",
    )
    .unwrap();
    let error = kestrel_store::Config::load(&home, dir.path()).unwrap_err().to_string();
    assert!(error.contains("allow_all"), "{error}");
}

#[test]
fn mcp_tools_ask_or_are_refused_whatever_their_server_claims_unless_the_user_allowed_them() {
    let mut policy = policy(true);
    // `true`: the tool claims to be read-only (its server's readOnlyHint).
    let Assessment::Ask { always, .. } = policy.assess(Mode::Ask, "mcp__fs__read", "{}", true)
    else {
        panic!("an MCP tool's own claim is not trusted in ask mode")
    };
    assert_eq!(always, [AllowRule::Tool("mcp__fs__read".into())]);
    let Assessment::Deny { reason } = policy.assess(Mode::ReadOnly, "mcp__fs__read", "{}", true)
    else {
        panic!("nor in read-only mode")
    };
    assert!(reason.contains("read-only mode") && reason.contains("readOnlyHint"), "{reason}");
    // Auto and yolo run them (ARCHITECTURE §6).
    for mode in [Mode::Auto, Mode::Yolo] {
        assert_eq!(
            policy.assess(mode, "mcp__fs__read", "{}", true),
            Assessment::Allow { run_as: mode }
        );
    }
    // What the user allowed by name runs in ask and read-only mode.
    policy.remember(&always);
    for mode in [Mode::Ask, Mode::ReadOnly] {
        assert_eq!(
            policy.assess(mode, "mcp__fs__read", "{}", false),
            Assessment::Allow { run_as: mode }
        );
    }
    let mut from_config = AllowList::new();
    from_config.extend_from_config(&[], &[], &["mcp__fs__read".into()]);
    let policy = PermissionPolicy::new(
        PathBuf::from("/w"),
        SandboxStatus::Available { description: "x".into() },
        from_config,
    );
    assert_eq!(
        policy.assess(Mode::ReadOnly, "mcp__fs__read", "{}", true),
        Assessment::Allow { run_as: Mode::ReadOnly }
    );
    assert!(matches!(
        policy.assess(Mode::ReadOnly, "mcp__fs__write", "{}", false),
        Assessment::Deny { .. }
    ));
}

#[test]
fn auto_asks_before_file_tools_write_git_metadata_or_project_config() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(workspace.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(workspace.join("vendor/lib/.git")).unwrap();
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    // A link inside the workspace that leads into .git is judged by where it leads.
    std::os::unix::fs::symlink(workspace.join(".git/hooks"), workspace.join("src/hooks")).unwrap();
    let mut policy = PermissionPolicy::new(
        workspace.clone(),
        SandboxStatus::Available { description: "test sandbox".into() },
        AllowList::new(),
    );
    let write = |path: &str| json!({"path": path, "content": "#!/bin/sh\nid\n"}).to_string();
    for path in [".git/hooks/pre-commit", "src/hooks/post-checkout", "vendor/lib/.git/config"] {
        let Assessment::Ask { summary, always, run_as } =
            policy.assess(Mode::Auto, "write_file", &write(path), false)
        else {
            panic!("{path} was not asked about")
        };
        assert!(summary.contains("git metadata"), "{summary}");
        assert_eq!(run_as, Mode::Auto);
        assert_eq!(always.len(), 1);
    }
    let patch =
        "*** Begin Patch\n*** Add File: .kestrel/config.toml\n+[mcp_servers.x]\n*** End Patch";
    let Assessment::Ask { summary, .. } =
        policy.assess(Mode::Auto, "apply_patch", &json!({"patch": patch}).to_string(), false)
    else {
        panic!("project config was not asked about")
    };
    assert!(summary.contains(".kestrel/config.toml (project config"), "{summary}");
    // Ordinary files still run without asking; an approved path is remembered.
    assert_eq!(
        policy.assess(Mode::Auto, "write_file", &write("src/main.rs"), false),
        Assessment::Allow { run_as: Mode::Auto }
    );
    let Assessment::Ask { always, .. } =
        policy.assess(Mode::Auto, "write_file", &write(".git/hooks/pre-commit"), false)
    else {
        panic!()
    };
    policy.remember(&always);
    assert_eq!(
        policy.assess(Mode::Auto, "write_file", &write(".git/hooks/pre-commit"), false),
        Assessment::Allow { run_as: Mode::Auto }
    );
    // Yolo is the user's explicit choice.
    assert_eq!(
        policy.assess(Mode::Yolo, "write_file", &write(".git/hooks/x"), false),
        Assessment::Allow { run_as: Mode::Yolo }
    );
}

/// In auto, a patch touching a file inside the workspace and one outside that an
/// `allow_write` rule covers runs, granted exactly the outside file; a guarded file
/// inside (`.git`) still asks.
#[test]
fn auto_allows_a_patch_inside_and_under_allow_write_outside_together() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap();
    let allowed = outside.path().canonicalize().unwrap();
    std::fs::create_dir_all(workspace.join(".git")).unwrap();
    let policy = PermissionPolicy::new(
        workspace.clone(),
        SandboxStatus::Available { description: "test sandbox".into() },
        AllowList::from_config(&[], std::slice::from_ref(&allowed)),
    );
    let patch = |inside: &str| {
        let text = format!(
            "*** Begin Patch\n*** Add File: {inside}\n+x\n*** Add File: {}\n+y\n*** End Patch\n",
            allowed.join("out.txt").display()
        );
        json!({ "patch": text }).to_string()
    };
    let arguments = patch("src/in.txt");
    assert_eq!(
        policy.assess(Mode::Auto, "apply_patch", &arguments, false),
        Assessment::Allow { run_as: Mode::Auto }
    );
    assert_eq!(
        policy.granted_writes(Mode::Auto, "apply_patch", &arguments),
        [allowed.join("out.txt")]
    );
    let guarded = patch(".git/config");
    assert!(matches!(
        policy.assess(Mode::Auto, "apply_patch", &guarded, false),
        Assessment::Ask { .. }
    ));
}
