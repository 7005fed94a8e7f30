//! `kestrel swarm run`'s input through the real binary: what is wrong with the
//! repository, the graph or the configuration exits 2 naming the cause before anything
//! starts (no run directory, no branch, no daemon, no model request, the checkout as it
//! was); `--dry-run` prints the order; GOAL runs go through a planner (refusals, the
//! confirmation, `--yes`); `--json` prints the event log's objects and nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod swarm_support;

use serde_json::{Value, json};
use swarm_support::{
    ConfigParts, IMPLEMENTER, KEY_VAR, PLANNER, REVIEWER, SwarmTest, git, implement, of_type,
    plan_turn, review, stderr, stdout,
};

const ONE_TASK: &str = r#"
[[task]]
id = "greet"
title = "Write the greeting"
description = "Create hello.txt saying hello."
acceptance = ["grep -qx hello hello.txt"]
"#;

const FILES: &[(&str, &str)] = &[("README", "toy\n")];

/// Nothing was started: no run directory, no branch but `main`, no worktree, no daemon,
/// no model request.
fn assert_nothing_started(test: &SwarmTest) {
    assert!(test.run_ids().is_empty(), "runs: {:?}", test.run_ids());
    assert_eq!(test.branches(), ["main"]);
    let worktrees = git(test.repo.path(), &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
    assert!(!test.home.path().join("run/daemon.pid").exists(), "no daemon was started");
    assert!(test.model_requests().is_empty(), "no model was asked");
    let workdir: Vec<_> = std::fs::read_dir(test.workdir.path()).unwrap().collect();
    assert!(workdir.is_empty(), "nothing in the workdir: {workdir:?}");
}

/// Exit 2 with `needles` in the message.
fn assert_refused(output: &std::process::Output, needles: &[&str]) -> String {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "`{needle}` not in: {err}");
    }
    assert!(stdout(output).is_empty(), "nothing on stdout: {}", stdout(output));
    err
}

/// Uncommitted work in the user's checkout: a changed tracked file, a staged new file
/// and an untracked one. Returns what `git status` says, to compare after.
fn dirty_the_checkout(test: &SwarmTest) -> String {
    let repo = test.repo.path();
    std::fs::write(repo.join("README"), "toy, edited by hand\n").unwrap();
    std::fs::write(repo.join("staged.txt"), "staged\n").unwrap();
    git(repo, &["add", "staged.txt"]);
    std::fs::write(repo.join("notes.txt"), "mine\n").unwrap();
    git(repo, &["status", "--porcelain"])
}

fn assert_checkout_untouched(test: &SwarmTest, status_before: &str, main_before: &str) {
    let repo = test.repo.path();
    assert_eq!(git(repo, &["status", "--porcelain"]), status_before);
    assert_eq!(std::fs::read_to_string(repo.join("README")).unwrap(), "toy, edited by hand\n");
    assert_eq!(std::fs::read_to_string(repo.join("notes.txt")).unwrap(), "mine\n");
    assert_eq!(git(repo, &["diff", "--cached", "--name-only"]), "staged.txt\n");
    assert_eq!(git(repo, &["rev-parse", "main"]), main_before);
    assert_eq!(git(repo, &["symbolic-ref", "--short", "HEAD"]), "main\n");
}

#[test]
fn outside_a_git_repository_the_run_exits_2_and_starts_nothing() {
    let test = SwarmTest::new(FILES, Vec::new(), "");
    let graph = test.graph(ONE_TASK);
    let elsewhere = tempfile::tempdir().unwrap();
    let mut command = test.command(&["swarm", "run", "--graph", &graph]);
    command
        .current_dir(elsewhere.path())
        .env("GIT_CEILING_DIRECTORIES", elsewhere.path().parent().unwrap());
    let output = test.output_within(command);
    let shown = elsewhere.path().display().to_string();
    assert_refused(&output, &["not in a git repository", &shown, "git init"]);
    assert_nothing_started(&test);
}

#[test]
fn a_base_branch_that_does_not_exist_exits_2_naming_it() {
    let test = SwarmTest::new(FILES, Vec::new(), "");
    let graph = test.graph(&format!("base = \"release\"\n{ONE_TASK}"));
    let output = test.swarm_within(&["run", "--graph", &graph]);
    assert_refused(&output, &["base branch `release` does not exist", "set `base`"]);
    assert_nothing_started(&test);
}

#[test]
fn a_cycle_an_unknown_and_a_duplicate_id_are_all_listed() {
    let test = SwarmTest::new(FILES, Vec::new(), "");
    let graph = test.graph(
        r#"
[[task]]
id = "a"
title = "A"
depends_on = ["b"]
acceptance = ["true"]

[[task]]
id = "b"
title = "B"
depends_on = ["a"]
acceptance = ["true"]

[[task]]
id = "c"
title = "C"
depends_on = ["ghost"]
acceptance = ["true"]

[[task]]
id = "c"
title = "C again"
acceptance = ["true"]
"#,
    );
    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = assert_refused(
        &output,
        &[
            "the task graph cannot run",
            "the dependencies form a cycle: a -> b -> a",
            "task `c` depends on unknown task `ghost`",
            "task id `c` is used twice",
        ],
    );
    assert!(err.contains("graph.toml"), "the file is named: {err}");
    assert_nothing_started(&test);
}

#[test]
fn a_task_without_acceptance_commands_is_refused() {
    let test = SwarmTest::new(FILES, Vec::new(), "");
    let graph = test.graph(
        r#"
[[task]]
id = "vague"
title = "Make it better"
acceptance = []
"#,
    );
    let output = test.swarm_within(&["run", "--graph", &graph]);
    assert_refused(&output, &["task `vague` has no acceptance commands"]);
    assert_nothing_started(&test);
}

#[test]
fn a_reviewer_on_the_implementers_model_is_refused_unless_allowed() {
    // Allowed, the reviewer's turns go to the implementer's model.
    let route = "task=greet role=reviewer attempt=1";
    let mut steps = implement("greet", &[("hello.txt", "hello\n")]);
    steps.push(
        kestrel_testkit::Step::tool_call("swarm_review", json!({"approve": true, "findings": []}))
            .when(Some(IMPLEMENTER), Some(route)),
    );
    steps.push(kestrel_testkit::Step::text("reviewed").when(Some(IMPLEMENTER), Some(route)));
    let test = SwarmTest::new(FILES, steps, "");
    let same = format!("scripted/{IMPLEMENTER}");
    test.write_config_parts(&ConfigParts { reviewer: Some(&same), ..ConfigParts::default() });
    let graph = test.graph(ONE_TASK);

    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = assert_refused(&output, &["allow_same_model", "[swarm.roles.reviewer]"]);
    assert_eq!(err.matches(&same).count(), 2, "both models are named: {err}");
    assert_nothing_started(&test);

    test.write_config_parts(&ConfigParts {
        reviewer: Some(&same),
        reviewer_keys: "allow_same_model = true",
        ..ConfigParts::default()
    });
    let output = test.swarm_within(&["run", "--graph", &graph]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    let reviewers: Vec<&Value> = of_type(&events, "turn_started")
        .into_iter()
        .filter(|event| event["role"] == "reviewer")
        .collect();
    assert_eq!(reviewers.len(), 1, "{events:#?}");
    assert_eq!(reviewers[0]["model"], same.as_str());
    assert!(test.requests_for(REVIEWER).is_empty());
    assert_eq!(events.last().unwrap()["state"], "done");
}

#[test]
fn a_role_model_whose_key_variable_is_unset_exits_2_naming_the_variable() {
    let test = SwarmTest::new(FILES, Vec::new(), "");
    let extra = format!(
        "[providers.keyed]\nbase_url = \"{}\"\nwire_api = \"chat\"\napi_key_env = \"KESTREL_TEST_UNSET_KEY\"\n",
        test.server.base_url()
    );
    test.write_config_parts(&ConfigParts {
        reviewer: Some("keyed/review"),
        extra: &extra,
        ..ConfigParts::default()
    });
    let graph = test.graph(ONE_TASK);
    let mut command = test.command(&["swarm", "run", "--graph", &graph]);
    command.env_remove("KESTREL_TEST_UNSET_KEY");
    let output = test.output_within(command);
    assert_refused(&output, &["KESTREL_TEST_UNSET_KEY", "keyed/review"]);
    assert_nothing_started(&test);

    // The implementer's provider the same way.
    test.write_config_parts(&ConfigParts::default());
    let mut command = test.command(&["swarm", "run", "--graph", &graph]);
    command.env_remove(KEY_VAR);
    let output = test.output_within(command);
    assert_refused(&output, &[KEY_VAR, &format!("scripted/{IMPLEMENTER}")]);
    assert_nothing_started(&test);
}

#[test]
fn a_dry_run_prints_the_order_and_starts_nothing() {
    let test = SwarmTest::new(FILES, Vec::new(), "");
    let status_before = dirty_the_checkout(&test);
    let main_before = git(test.repo.path(), &["rev-parse", "main"]);
    let graph = test.graph(
        r#"
[[task]]
id = "docs"
title = "Document it"
depends_on = ["core", "cli"]
acceptance = ["true"]

[[task]]
id = "cli"
title = "The command line"
depends_on = ["core"]
acceptance = ["true"]

[[task]]
id = "core"
title = "The core"
acceptance = ["true"]
"#,
    );
    let output = test.swarm_within(&["run", "--graph", &graph, "--dry-run"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "1. core: The core\n2. cli: The command line  (after core)\n\
         3. docs: Document it  (after core, cli)\n"
    );
    assert_nothing_started(&test);
    assert_checkout_untouched(&test, &status_before, &main_before);
}

/// Two tasks a planner makes of the goal: `base` writes base.txt, `top` builds on it.
fn planned_tasks() -> Value {
    json!([
        {"id": "base", "title": "Base file", "description": "Write base.txt.",
         "depends_on": [], "acceptance": ["grep -qx base base.txt"]},
        {"id": "top", "title": "Top file", "description": "Write top.txt.",
         "depends_on": ["base"], "acceptance": ["grep -qx base base.txt", "grep -qx top top.txt"]}
    ])
}

#[test]
fn a_goal_without_a_terminal_or_yes_prints_the_plan_and_exits_2() {
    let test = SwarmTest::new(FILES, plan_turn(planned_tasks()), "");
    let output = test.swarm_within(&["run", "Two files"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("--yes") && err.contains("--graph"), "says how to go on: {err}");
    let printed = kestrel_store::parse_graph(&stdout(&output))
        .unwrap_or_else(|error| panic!("stdout is a graph ({error}): {}", stdout(&output)));
    assert_eq!(printed.goal.as_deref(), Some("Two files"));
    assert_eq!(printed.order(), ["base", "top"]);
    assert_eq!(printed.task("top").unwrap().depends_on, ["base"]);
    // Only the planner worked.
    assert_eq!(test.requests_for(PLANNER).len(), 2);
    assert_eq!(test.model_requests().len(), 2);
    let run = test.run_id();
    let events = test.events(&run);
    assert!(of_type(&events, "attempt_started").is_empty(), "{events:#?}");
    // `planned` means accepted: no one accepted this plan, and the run is over (its
    // planner's worktree and the empty branch gone); a resume does not run it unasked.
    assert!(of_type(&events, "planned").is_empty(), "{events:#?}");
    assert_eq!(events.last().unwrap()["state"], "cancelled", "{events:#?}");
    assert_eq!(git(test.repo.path(), &["worktree", "list"]).lines().count(), 1);
    assert!(!git(test.repo.path(), &["branch"]).contains("kestrel/"));
    let resumed = test.swarm_within(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(2), "{}", stderr(&resumed));
    assert!(stderr(&resumed).contains("was cancelled"), "{}", stderr(&resumed));
    assert_eq!(test.model_requests().len(), 2);
}

#[test]
fn an_invalid_plan_is_refused_as_a_tool_error_then_asked_again_twice_then_exits_2() {
    // Each of the planner's three prompts: the same bad plan, then a closing word.
    let bad = json!([
        {"id": "a", "title": "A", "depends_on": ["b"], "acceptance": ["true"]},
        {"id": "b", "title": "B", "depends_on": ["a"], "acceptance": []}
    ]);
    let mut steps = Vec::new();
    for _ in 0..3 {
        steps.extend(plan_turn(bad.clone()));
    }
    // A fourth prompt would find this one.
    steps.extend(plan_turn(planned_tasks()));
    let test = SwarmTest::new(FILES, steps, "");
    let output = test.swarm_within(&["run", "--yes", "Two files"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    let reasons =
        ["task `b` has no acceptance commands", "the dependencies form a cycle: a -> b -> a"];
    for reason in reasons {
        assert!(err.contains(&format!("\n  - {reason}")), "`{reason}` listed: {err}");
    }
    assert!(err.contains("the planner gave no valid plan"), "{err}");
    assert!(!err.contains("- - "), "each reason listed once, plainly: {err}");

    let requests = test.requests_for(PLANNER);
    assert_eq!(requests.len(), 6, "three prompts, no fourth");
    assert_eq!(test.server.remaining(), 2, "the good plan was never asked for");
    let text = |index: usize| requests[index]["messages"].to_string();
    // The refusal came back to the model as the tool's answer, in the same turn.
    let answered = text(1);
    for reason in reasons {
        assert!(answered.contains(reason), "the tool answered `{reason}`: {answered}");
    }
    assert!(answered.contains("the plan was not recorded"), "{answered}");
    // The second and third prompts carry the reasons.
    for (index, attempt) in [(2, 2), (4, 3)] {
        let messages = requests[index]["messages"].as_array().unwrap();
        let prompt = messages.last().unwrap()["content"].to_string();
        assert!(prompt.contains(&format!("role=planner attempt={attempt}")), "{prompt}");
        assert!(prompt.contains("Your plan was not accepted"), "{prompt}");
        for reason in reasons {
            assert!(prompt.contains(reason), "the new prompt names `{reason}`: {prompt}");
        }
    }
    let run = test.run_id();
    let events = test.events(&run);
    let failed = of_type(&events, "plan_failed");
    assert_eq!(failed.len(), 1, "{events:#?}");
    let listed: Vec<&str> =
        failed[0]["reasons"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(of_type(&events, "attempt_started").is_empty());
    // The run ended there: nothing is left to resume.
    assert_eq!(events.last().unwrap()["type"], "run_finished");
    assert_eq!(events.last().unwrap()["state"], "failed");
    assert_eq!(test.status_json(&run)["state"], "failed");
}

#[test]
fn a_goal_with_yes_runs_the_planned_graph_to_the_end() {
    let mut steps = plan_turn(planned_tasks());
    steps.extend(implement("base", &[("base.txt", "base\n")]));
    steps.extend(review("base", 1, true, &[]));
    steps.extend(implement("top", &[("top.txt", "top\n")]));
    steps.extend(review("top", 1, true, &[]));
    let test = SwarmTest::new(FILES, steps, "");
    let status_before = dirty_the_checkout(&test);
    let main_before = git(test.repo.path(), &["rev-parse", "main"]);

    let output = test.swarm_within(&["run", "--yes", "Two files"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
    assert!(err.contains("the plan:"), "the plan is shown: {err}");
    let run = test.run_id();
    let branch = format!("kestrel/{run}");
    for file in ["base", "top"] {
        let shown = git(test.repo.path(), &["show", &format!("{branch}:{file}.txt")]);
        assert_eq!(shown, format!("{file}\n"));
    }
    let stored = kestrel_store::parse_graph(
        &std::fs::read_to_string(test.home.path().join("swarm").join(&run).join("graph.toml"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(stored.order(), ["base", "top"]);
    let events = test.events(&run);
    assert_eq!(of_type(&events, "merged").len(), 2);
    assert_eq!(events.last().unwrap()["state"], "done");
    assert_eq!(test.server.remaining(), 0);
    assert_checkout_untouched(&test, &status_before, &main_before);
}

#[test]
fn json_prints_only_the_event_objects() {
    let mut steps = implement("greet", &[("hello.txt", "hello\n")]);
    steps.extend(review("greet", 1, true, &[]));
    let test = SwarmTest::new(FILES, steps, "");
    let graph = test.graph(ONE_TASK);
    let output = test.swarm_within(&["run", "--graph", &graph, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    let printed: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|_| panic!("not a JSON line: {line}"))
        })
        .collect();
    assert_eq!(printed[0]["type"], "run_started");
    assert_eq!(printed[0]["run"], run.as_str());
    assert_eq!(printed, test.events(&run), "stdout holds the objects of events.jsonl");
    assert_eq!(printed.last().unwrap()["type"], "run_finished");
}
