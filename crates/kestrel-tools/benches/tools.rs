//! Latency of the `shell`, `grep` and `apply_patch` tools, called through the registry
//! with JSON text exactly as the agent calls them, each next to a baseline run in the
//! same loop (interleaved, so machine noise hits both): `bash -lc` spawned directly for
//! shell, ripgrep (or GNU grep) for grep.
//!
//! `cargo bench -p kestrel-tools --bench tools -- [--runs N] [--tree DIR] [--only shell,grep,apply_patch] [--json]`
//! The grep tree defaults to `$CARGO_HOME/registry/src` (crate sources: a large
//! checkout that is already on every Rust machine); `--tree` picks another.

#![allow(clippy::print_stdout)]

use kestrel_protocol::Mode;
use kestrel_tools::{ToolContext, ToolRegistry, Unconfined, builtin_tools};
use serde_json::json;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

type BenchResult<T> = Result<T, Box<dyn Error>>;

/// A pattern that matches nothing, so grep reads every file of the tree.
const NO_MATCH: &str = "kestrel_bench_no_match_[0-9]{4}";

struct Flags {
    runs: usize,
    json: bool,
    tree: Option<PathBuf>,
    only: Option<Vec<String>>,
    /// Added to every measurement's parameter, e.g. the environment it ran in.
    label: Option<String>,
}

fn parse_flags() -> BenchResult<Flags> {
    let mut flags = Flags { runs: 9, json: false, tree: None, only: None, label: None };
    let mut arguments = std::env::args().skip(1);
    while let Some(argument) = arguments.next() {
        let mut value = || arguments.next().ok_or_else(|| format!("{argument} needs a value"));
        match argument.as_str() {
            "--bench" => {}
            "--json" => flags.json = true,
            "--runs" => {
                let text = value()?;
                flags.runs = text.parse().map_err(|_| format!("--runs {text:?}: not a number"))?;
                if flags.runs == 0 {
                    return Err("--runs must be at least 1".into());
                }
            }
            "--tree" => flags.tree = Some(PathBuf::from(value()?)),
            "--only" => flags.only = Some(value()?.split(',').map(str::to_owned).collect()),
            "--label" => flags.label = Some(value()?),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    Ok(flags)
}

impl Flags {
    fn wants(&self, group: &str) -> bool {
        self.only.as_ref().is_none_or(|only| only.iter().any(|name| name == group))
    }
}

fn main() -> BenchResult<()> {
    let flags = parse_flags()?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let bench = Bench { flags, runtime, registry: builtin_tools() };
    if bench.flags.wants("shell") {
        bench.shell()?;
    }
    if bench.flags.wants("grep") {
        bench.grep()?;
    }
    if bench.flags.wants("apply_patch") {
        bench.apply_patch()?;
    }
    Ok(())
}

struct Bench {
    flags: Flags,
    runtime: tokio::runtime::Runtime,
    registry: ToolRegistry,
}

impl Bench {
    /// Reports a measurement with the `--label` added to its parameter.
    fn report(&self, name: &str, param: &str, unit: &str, values: Vec<f64>) {
        let param = match &self.flags.label {
            Some(label) => format!("{param} ({label})"),
            None => param.to_owned(),
        };
        report(self.flags.json, name, &param, unit, values);
    }

    /// One tool call, timed in ms; a tool error fails the bench (it would measure nothing).
    fn call(
        &self,
        context: &ToolContext,
        name: &str,
        arguments: &serde_json::Value,
    ) -> BenchResult<f64> {
        let text = arguments.to_string();
        let started = Instant::now();
        let output = self.runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(120), self.registry.call(name, &text, context))
                .await
        })?;
        let millis = elapsed_ms(started);
        if output.is_error {
            let head: String = output.content.chars().take(300).collect();
            return Err(format!("{name} {text} failed: {head}").into());
        }
        Ok(millis)
    }

    /// The tool next to `bash -lc` (what it ran before it took the login shell's
    /// environment once per session) and `bash -c` (the command alone); for `true`, also
    /// what the tool adds per call (its time minus `bash -c`'s, pair by pair).
    fn shell(&self) -> BenchResult<()> {
        let dir = tempfile::tempdir()?;
        let context = context(dir.path());
        for command in ["true", "echo hello", "seq 1 200000"] {
            let (mut tool, mut login, mut plain) = (Vec::new(), Vec::new(), Vec::new());
            self.call(&context, "shell", &json!({"command": command}))?;
            for _ in 0..self.flags.runs {
                tool.push(self.call(&context, "shell", &json!({"command": command}))?);
                let bash = |flag: &str| {
                    timed_process(
                        Command::new("bash").args([flag, command]).current_dir(dir.path()),
                    )
                };
                login.push(bash("-lc")?);
                plain.push(bash("-c")?);
            }
            if command == "true" {
                let overhead = tool.iter().zip(&plain).map(|(tool, plain)| tool - plain).collect();
                self.report(
                    "tools.shell call overhead",
                    "per call, vs `bash -c true`",
                    "ms",
                    overhead,
                );
            }
            self.report("tools.shell", command, "ms", tool);
            self.report("baseline.bash_lc", command, "ms", login);
            self.report("baseline.bash_c", command, "ms", plain);
        }
        Ok(())
    }

    fn grep(&self) -> BenchResult<()> {
        let tree = match &self.flags.tree {
            Some(tree) => tree.clone(),
            None => default_tree().ok_or("no $CARGO_HOME/registry/src here: pass --tree DIR")?,
        };
        let (files, bytes) = tree_size(&tree)?;
        report(
            self.flags.json,
            "tools.grep_tree_files",
            &tree.display().to_string(),
            "files",
            vec![files as f64],
        );
        report(
            self.flags.json,
            "tools.grep_tree_size",
            &tree.display().to_string(),
            "MB",
            vec![bytes as f64 / 1e6],
        );
        let context = context(&tree);
        let rg = which("rg");
        let cases = [
            ("fn main (first 100)", json!({"pattern": "fn main"}), None),
            ("no match, whole tree", json!({"pattern": NO_MATCH}), Some(NO_MATCH)),
            ("no match, *.rs", json!({"pattern": NO_MATCH, "glob": "*.rs"}), None),
            ("no match, -i", json!({"pattern": NO_MATCH, "case_insensitive": true}), None),
        ];
        for (label, arguments, baseline_pattern) in cases {
            // The first call warms the page cache for this and the baseline alike.
            self.call(&context, "grep", &arguments)?;
            let (mut tool, mut baseline) = (Vec::new(), Vec::new());
            for _ in 0..self.flags.runs {
                tool.push(self.call(&context, "grep", &arguments)?);
                if let Some(pattern) = baseline_pattern {
                    let mut command = match &rg {
                        Some(rg) => {
                            let mut command = Command::new(rg);
                            command.args(["-n", "--no-messages", pattern]).arg(&tree);
                            command
                        }
                        None => {
                            let mut command = Command::new("grep");
                            command
                                .args(["-rnE", "--binary-files=without-match", pattern])
                                .arg(&tree);
                            command
                        }
                    };
                    baseline.push(timed_process(&mut command)?);
                }
            }
            self.report("tools.grep", label, "ms", tool);
            let name = if rg.is_some() { "baseline.ripgrep" } else { "baseline.gnu_grep_r" };
            self.report(name, label, "ms", baseline);
        }
        Ok(())
    }

    fn apply_patch(&self) -> BenchResult<()> {
        let dir = tempfile::tempdir()?;
        let context = context(dir.path());
        for (name, count) in [("small.rs", 200), ("big.rs", 20_000)] {
            let lines: Vec<String> = (0..count)
                .map(|i| format!("    let value_{i:05} = compute({i}); // step {i}"))
                .collect();
            std::fs::write(dir.path().join(name), lines.join("\n") + "\n")?;
            let targets: Vec<usize> =
                [10, 50, 90].iter().map(|percent| count * percent / 100).collect();
            let forward = json!({"patch": update_patch(name, &lines, &targets, true)});
            let backward = json!({"patch": update_patch(name, &lines, &targets, false)});
            let mut millis = Vec::new();
            for _ in 0..self.flags.runs {
                millis.push(self.call(&context, "apply_patch", &forward)?);
                millis.push(self.call(&context, "apply_patch", &backward)?);
            }
            report(
                self.flags.json,
                "tools.apply_patch",
                &format!("3 hunks, {count} lines"),
                "ms",
                millis,
            );
        }
        let add = json!({"patch": "*** Begin Patch\n*** Add File: new/notes.md\n+one\n+two\n*** End Patch\n"});
        let delete =
            json!({"patch": "*** Begin Patch\n*** Delete File: new/notes.md\n*** End Patch\n"});
        let mut millis = Vec::new();
        for _ in 0..self.flags.runs {
            millis.push(self.call(&context, "apply_patch", &add)?);
            millis.push(self.call(&context, "apply_patch", &delete)?);
        }
        self.report("tools.apply_patch", "add or delete a file", "ms", millis);
        Ok(())
    }
}

/// A patch replacing each target line (forward) or restoring it (backward), with three
/// lines of context on each side; the generated lines are unique, so every hunk matches once.
fn update_patch(file: &str, lines: &[String], targets: &[usize], forward: bool) -> String {
    let mut patch = format!("*** Begin Patch\n*** Update File: {file}\n");
    for &target in targets {
        let changed = format!("{} // patched", lines[target]);
        let (old, new) =
            if forward { (&lines[target], &changed) } else { (&changed, &lines[target]) };
        patch.push_str("@@\n");
        for line in &lines[target.saturating_sub(3)..target] {
            patch.push_str(&format!(" {line}\n"));
        }
        patch.push_str(&format!("-{old}\n+{new}\n"));
        for line in lines.iter().skip(target + 1).take(3) {
            patch.push_str(&format!(" {line}\n"));
        }
    }
    patch.push_str("*** End Patch\n");
    patch
}

fn context(root: &Path) -> ToolContext {
    ToolContext {
        cwd: root.to_path_buf(),
        workspace: root.to_path_buf(),
        mode: Mode::Auto,
        network: false,
        cancel: CancellationToken::new(),
        granted_writes: Vec::new(),
        unconfined: Unconfined::No,
        workspace_pin: None,
    }
}

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

/// Wall time of a process run to its end with output discarded; a failure to start fails.
fn timed_process(command: &mut Command) -> BenchResult<f64> {
    let started = Instant::now();
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status()?;
    Ok(elapsed_ms(started))
}

fn default_tree() -> Option<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))?;
    let tree = cargo_home.join("registry").join("src");
    tree.is_dir().then_some(tree)
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// Files and bytes under `dir` (symlinks not followed).
fn tree_size(dir: &Path) -> BenchResult<(u64, u64)> {
    let (mut files, mut bytes) = (0, 0);
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                files += 1;
                bytes += entry.metadata()?.len();
            }
        }
    }
    Ok((files, bytes))
}

/// Prints one measurement: a JSON line (`bench/run.py` collects these) or a readable line.
fn report(json: bool, name: &str, param: &str, unit: &str, mut values: Vec<f64>) {
    values.sort_by(f64::total_cmp);
    let (Some(&min), Some(&max)) = (values.first(), values.last()) else { return };
    let middle = values.len() / 2;
    let median = if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    };
    if json {
        let line = json!({
            "bench": name, "param": param, "unit": unit, "runs": values.len(),
            "median": median, "min": min, "max": max, "values": values,
        });
        println!("{line}");
    } else {
        println!(
            "{name:<24} {param:<24} median {median:>10.3} {unit:<5} (min {min:.3}, max {max:.3}, {} runs)",
            values.len()
        );
    }
}
