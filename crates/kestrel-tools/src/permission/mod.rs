//! The permission policy (ARCHITECTURE §6–§7): whether a tool call runs, must be
//! approved, or is refused, by mode. It reads only the call and what the session knows
//! (directories, the sandbox, the allow rules), and for `git` commands the config of the
//! repository they would run in (see `git.rs`), so every decision is testable.
//!
//! - `yolo`: everything runs, unconfined.
//! - `auto`: everything runs; the file tools confine themselves to the workspace and
//!   `shell` runs in the OS sandbox. Writes to what the sandbox keeps read-only inside
//!   the workspace (`.git`, `.kestrel`, `$KESTREL_HOME`) need approval. A shell command is
//!   never refused by parsing; only when no sandbox can be had does a command that is not
//!   known read-only need approval. A line the user's rules cover in every part still
//!   runs in the sandbox, with only the `allow_write` places it writes added (`Lift`):
//!   never `.git` writable nor the network on, since what git reads from a workspace the
//!   model writes freely is the model's (docs/permissions.md). A covered file write
//!   outside the workspace runs as in ask.
//! - `ask`: reads and known read-only commands run; writes, other commands and other
//!   tools need approval, unless an "always" rule covers them. An approved or covered
//!   file write outside the workspace writes exactly the file its path resolved to
//!   when it was judged (`granted_writes`), never where a symlink leads later.
//! - `read-only`: reads and known read-only commands run, and tools the user allowed by
//!   name; everything else is refused.
//!
//! An MCP tool is never taken to be read-only on its server's word (`readOnlyHint`).

mod allow;
mod analysis;
pub mod command;
mod flags;
mod git;
mod operands;
mod read_only;
mod remote;
mod repository;
mod writable;

pub use allow::{AllowList, AllowRule, SaveError, save_rules};
pub use analysis::{CommandAnalysis, Concern, analyze};
#[cfg(test)]
pub(crate) use repository::pinned;
pub use repository::{PinnedRepository, note_made, workspace_repository};

use crate::apply_patch::{FileOperation, parse_patch};
use crate::workspace::{guarded_place, normalize, resolve_existing};
use crate::{Lift, Unconfined};
use kestrel_platform::Sandbox;
use kestrel_protocol::{Mode, WorkspaceRepository};
use serde_json::Value;
use std::path::{Path, PathBuf};
use writable::ModelWritable;

/// Whether commands can be confined here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// A sandbox works ("Landlock (ABI 7)").
    Available { description: String },
    /// None does; the reason says why and what would fix it.
    Unavailable { reason: String },
}

impl SandboxStatus {
    /// The sandbox the `shell` tool would use for this network setting (probed once).
    pub fn detect(network: bool) -> Self {
        match Sandbox::detect(network) {
            Ok(sandbox) => SandboxStatus::Available { description: sandbox.describe() },
            Err(unavailable) => SandboxStatus::Unavailable { reason: unavailable.reason },
        }
    }
}

/// The decision about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assessment {
    /// Run it, with the tool context's mode set to `run_as`.
    Allow { run_as: Mode },
    /// Ask the user. Approved, it runs as `run_as`; `always` lists the rules that
    /// "allow always" would add (empty: only "allow once" makes sense).
    Ask { summary: String, always: Vec<AllowRule>, run_as: Mode },
    /// Refuse; the reason goes back to the model.
    Deny { reason: String },
}

/// A session's policy: where it runs, whether a sandbox exists, what is allowed.
#[derive(Debug, Clone)]
pub struct PermissionPolicy {
    cwd: PathBuf,
    sandbox: SandboxStatus,
    allowed: AllowList,
    /// The repository of the workspace when the session's line began (its record keeps
    /// it): the only one whose git commands a rule lets out of the sandbox.
    repository: Option<PinnedRepository>,
}

/// Why the rules do not cover a part of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Uncovered {
    NoRule,
    /// No rule can cover it (a computed redirection, syntax not followed).
    Uncoverable,
    /// A rule matches, but an operand leads through a symlink out of the workspace.
    Redirected,
    /// A rule matches, but what it would run is not trusted (said why).
    Because(String),
}

/// The names of MCP tools start with this (`mcp__<server>__<tool>`).
const MCP_PREFIX: &str = "mcp__";

/// The file-writing tools and the paths a call of theirs would write.
const FILE_TOOLS: [&str; 3] = ["write_file", "edit_file", "apply_patch"];

impl PermissionPolicy {
    /// It pins the repository of `cwd` as it is now; a session takes the one its record
    /// keeps instead ([`with_repository`](Self::with_repository)).
    pub fn new(cwd: PathBuf, sandbox: SandboxStatus, allowed: AllowList) -> Self {
        let repository = repository::pinned(&cwd);
        Self { cwd, sandbox, allowed, repository }
    }

    /// The policy trusting `repository` (a record's [`workspace_repository`]) rather than
    /// the one `cwd` is in now: a subagent or a resumed session must not trust a `.git`
    /// made since its line began (by a sandboxed command, hooks and all).
    pub fn with_repository(mut self, repository: &WorkspaceRepository) -> Self {
        self.repository = PinnedRepository::from_record(repository);
        self
    }

    /// The rules in force (from config and "allow always" answers).
    pub fn allowed(&self) -> &AllowList {
        &self.allowed
    }

    pub fn sandbox(&self) -> &SandboxStatus {
        &self.sandbox
    }

    /// Adds "allow always" rules for the rest of the session.
    pub fn remember(&mut self, rules: &[AllowRule]) {
        for rule in rules {
            self.allowed.add(rule.clone());
        }
    }

    /// Decides about a call of `tool` with `arguments` (JSON text as the model sent it)
    /// in `mode`. `read_only_tool` is the tool's own claim (`Tool::is_read_only`).
    pub fn assess(
        &self,
        mode: Mode,
        tool: &str,
        arguments: &str,
        read_only_tool: bool,
    ) -> Assessment {
        self.assess_confinement(mode, tool, arguments, read_only_tool).0
    }

    /// [`assess`](Self::assess), and how an `Allow`ed `shell` line the allow rules
    /// cover runs: outside the sandbox in ask (`ByRules`), in it with only its
    /// `allow_write` places added in auto (`Lifted`). Pass it to the tool as
    /// `ToolContext::unconfined`, with `Approved` for a call the user approved. Judged
    /// once, here: a line let through as known read-only stays sandboxed even if what
    /// made it read-only (a repository's config) changes before it runs.
    pub fn assess_confinement(
        &self,
        mode: Mode,
        tool: &str,
        arguments: &str,
        read_only_tool: bool,
    ) -> (Assessment, Unconfined) {
        // An MCP tool's claim to be read-only is its server's (`readOnlyHint`): untrusted.
        let mcp = tool.starts_with(MCP_PREFIX);
        if mode == Mode::Yolo || (read_only_tool && !mcp) {
            return (Assessment::Allow { run_as: mode }, Unconfined::No);
        }
        let arguments: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        if tool == "shell" {
            return self.assess_shell(mode, &arguments);
        }
        if FILE_TOOLS.contains(&tool) {
            return (self.assess_file_tool(mode, tool, &arguments), Unconfined::No);
        }
        let assessment = match mode {
            Mode::Auto | Mode::Yolo => Assessment::Allow { run_as: mode },
            // What the user allowed by name runs in read-only mode too: the user, not
            // the server, vouched for it.
            Mode::ReadOnly | Mode::Ask if self.allowed.allows_tool(tool) => {
                Assessment::Allow { run_as: mode }
            }
            Mode::ReadOnly => Assessment::Deny {
                reason: format!(
                    "`{tool}` is not allowed: the session is in read-only mode, where only \
                     tools the user allowed by name run (an MCP server's readOnlyHint is not \
                     trusted)"
                ),
            },
            Mode::Ask => Assessment::Ask {
                summary: format!("call `{tool}`"),
                always: vec![AllowRule::Tool(tool.to_string())],
                run_as: mode,
            },
        };
        (assessment, Unconfined::No)
    }

    /// The assessment of a `shell` call, and whether the rules cover it.
    fn assess_shell(&self, mode: Mode, arguments: &Value) -> (Assessment, Unconfined) {
        // Bad arguments are the tool's to report; there is nothing to run.
        let Some(command) = arguments.get("command").and_then(Value::as_str) else {
            return (Assessment::Allow { run_as: mode }, Unconfined::No);
        };
        let workdir = arguments.get("workdir").and_then(Value::as_str);
        let dir = match shell_workdir(&self.cwd, workdir) {
            Ok(dir) => dir,
            Err(error) => {
                let reason = format!(
                    "not run: workdir {} is not an existing directory ({error})",
                    workdir.unwrap_or(".")
                );
                return (Assessment::Deny { reason }, Unconfined::No);
            }
        };
        let analysis = analyze(command, &dir);
        let sandboxed =
            mode == Mode::Auto && matches!(self.sandbox, SandboxStatus::Available { .. });
        let writable = self.model_writable();
        let lift =
            if analysis.is_read_only() { None } else { self.lift(&analysis, sandboxed, &writable) };
        let unsandboxed = match (&self.sandbox, mode) {
            // A line the user's rules cover still runs in the sandbox, with the
            // `allow_write` places it writes added and contained: see `Lift`.
            (SandboxStatus::Available { .. }, Mode::Auto) => {
                let lift = lift.unwrap_or_default();
                return (Assessment::Allow { run_as: Mode::Auto }, lift);
            }
            (SandboxStatus::Unavailable { reason }, Mode::Auto) => Some(reason.as_str()),
            (SandboxStatus::Available { .. } | SandboxStatus::Unavailable { .. }, _) => None,
        };
        if analysis.is_read_only() {
            // Known read-only: never asks. In auto without a sandbox it runs as in ask.
            let run_as = if mode == Mode::Auto { Mode::Ask } else { mode };
            return (Assessment::Allow { run_as }, Unconfined::No);
        }
        let concerns: Vec<String> = analysis.concerns.iter().map(Concern::describe).collect();
        if mode == Mode::ReadOnly {
            let reason = format!(
                "not run: the session is in read-only mode, where only known read-only \
                 commands run; {}",
                concerns.join("; ")
            );
            return (Assessment::Deny { reason }, Unconfined::No);
        }
        if let Some(lift) = lift {
            return (Assessment::Allow { run_as: Mode::Ask }, lift);
        }
        let mut summary = match unsandboxed {
            Some(reason) => {
                format!("no sandbox available: {reason}. Run `{command}` without a sandbox?")
            }
            None => format!("run `{command}`"),
        };
        summary.push_str(&format!(" ({})", concerns.join("; ")));
        // Why a rule the user has does not let it through: asking again will not help.
        let parts = analysis.concerns.iter().chain(&analysis.judged_on_files);
        for reason in parts.filter_map(|part| match self.uncovered(part, &writable) {
            Some(Uncovered::Because(reason)) => Some(reason),
            Some(Uncovered::Redirected) => {
                Some("an operand leads through a symlink out of the workspace".into())
            }
            _ => None,
        }) {
            summary.push_str(&format!("; no rule covers it here: {reason}"));
        }
        let always = self.rules_for(&analysis, &writable);
        (Assessment::Ask { summary, always, run_as: Mode::Ask }, Unconfined::No)
    }

    /// How a line the allow rules cover runs, `None` when they do not cover it: with
    /// `sandboxed` (auto with a sandbox) in the sandbox with the `allow_write` places its
    /// redirections write added, otherwise outside it with its git commands pinned to
    /// the workspace's repository (a `git -C elsewhere` in it too).
    fn lift(
        &self,
        analysis: &CommandAnalysis,
        sandboxed: bool,
        writable: &ModelWritable,
    ) -> Option<Unconfined> {
        if !self.covers(analysis, writable) {
            return None;
        }
        if !sandboxed {
            if line_not_lifted(analysis).is_some() {
                return None;
            }
            // Pinned also when no covered part is git: a read-only `git status` that runs
            // first needs no rule, but would otherwise find whatever repository is there
            // then. A line that only makes repositories has none to pin.
            let git = git_parts(analysis);
            let repository = if git.creates && !git.uses { None } else { self.repository.clone() };
            return Some(Unconfined::ByRules { repository });
        }
        let writable = analysis
            .concerns
            .iter()
            .filter_map(|concern| match concern {
                // Only what the sandbox would refuse, never git's or Kestrel's metadata.
                Concern::Write { path: Some(path), .. }
                    if !self.sandbox_writes(path) && guarded_place(&self.cwd, path).is_none() =>
                {
                    self.covering_rule(path)
                }
                _ => None,
            })
            .collect();
        Some(Unconfined::Lifted(Lift { writable }))
    }

    /// Whether the allow rules cover every concern, and every part known read-only
    /// only by the files as they were (git): in ask a covered line runs outside the
    /// sandbox, after its covered parts may have changed those files. A covered command whose
    /// operand a symlink leads out of the workspace is not covered (see `operands.rs`).
    fn covers(&self, analysis: &CommandAnalysis, writable: &ModelWritable) -> bool {
        let parts = analysis.concerns.iter().chain(&analysis.judged_on_files);
        parts.into_iter().all(|concern| self.uncovered(concern, writable).is_none())
    }

    /// Why the rules do not cover one part of a line, `None` when they do.
    fn uncovered(&self, concern: &Concern, writable: &ModelWritable) -> Option<Uncovered> {
        match concern {
            Concern::Command { leading, complete, git_dirs, operands: paths, .. } => {
                if !self.allowed.allows_command(leading, *complete) {
                    return Some(Uncovered::NoRule);
                }
                if let Some(dirs) = git_dirs
                    && let Some(reason) = self.foreign_repository(dirs, writable)
                {
                    return Some(Uncovered::Because(reason));
                }
                if git_dirs.is_some()
                    && let Some(reason) = self.unknown_remote(leading, writable)
                {
                    return Some(Uncovered::Because(reason));
                }
                match paths {
                    None => Some(Uncovered::Because(
                        "its operands are in a directory not known before the line runs".into(),
                    )),
                    Some(paths)
                        if paths.iter().any(|path| operands::redirected(&self.cwd, path)) =>
                    {
                        Some(Uncovered::Redirected)
                    }
                    Some(_) => None,
                }
            }
            Concern::Write { path: Some(path), .. } if self.write_covered(path) => None,
            Concern::Write { path: Some(_), .. } => Some(Uncovered::NoRule),
            Concern::Write { path: None, .. }
            | Concern::Opens { .. }
            | Concern::Unparsed { .. } => Some(Uncovered::Uncoverable),
        }
    }

    /// For a shell call that failed in auto's sandbox although the allow rules cover
    /// part of its line: which parts they do not cover and why. `None` when no rule
    /// covers any part, or every part (then [`Self::lifted_note`]).
    pub fn sandbox_note(&self, arguments: &str) -> Option<String> {
        let arguments: Value = serde_json::from_str(arguments).ok()?;
        let command = arguments.get("command").and_then(Value::as_str)?;
        let workdir = arguments.get("workdir").and_then(Value::as_str);
        let analysis = analyze(command, &shell_workdir(&self.cwd, workdir).ok()?);
        let writable = self.model_writable();
        let parts: Vec<&Concern> =
            analysis.concerns.iter().chain(&analysis.judged_on_files).collect();
        let reasons: Vec<(&Concern, Uncovered)> = parts
            .iter()
            .filter_map(|part| Some((*part, self.uncovered(part, &writable)?)))
            .collect();
        if reasons.is_empty() {
            return None;
        }
        // Nothing a rule touched.
        let covered_some = reasons.len() < parts.len();
        let blocked = reasons
            .iter()
            .any(|(_, why)| matches!(why, Uncovered::Redirected | Uncovered::Because(_)));
        if reasons.is_empty() || !(covered_some || blocked) {
            return None;
        }
        let listed: Vec<String> = reasons
            .iter()
            .map(|(part, why)| match why {
                Uncovered::NoRule => format!("{} (no rule covers it)", part.describe()),
                Uncovered::Uncoverable => format!("{} (no rule can cover it)", part.describe()),
                Uncovered::Redirected => format!(
                    "{} (an operand leads through a symlink out of the workspace or into its \
                     metadata)",
                    part.describe()
                ),
                Uncovered::Because(reason) => format!("{} ({reason})", part.describe()),
            })
            .collect();
        Some(format!(
            "Note: the user's allow rules cover part of this line, but not {}; so the whole \
             line ran in the sandbox. In auto a line the rules cover entirely runs unasked \
             but in the sandbox all the same: a command that needs more (`.git`, the \
             network) needs ask mode, where the rules let a covered line run outside it.",
            listed.join("; ")
        ))
    }

    /// For a line the rules cover that failed in auto's sandbox: what the rules gave it
    /// and what they do not give in auto.
    pub fn lifted_note(lift: &Lift) -> String {
        let places: Vec<String> =
            lift.writable.iter().map(|place| place.display().to_string()).collect();
        let given = if places.is_empty() {
            String::new()
        } else {
            format!(" with {} writable", places.join(", "))
        };
        format!(
            "Note: the user's allow rules cover this line, so it ran unasked, in the sandbox \
             all the same{given}. In auto a rule does not make `.git` writable, turn the \
             network on or open anything else the sandbox refuses: the programs such a line \
             runs (git reading a nested repository's config, hooks, the login profile) can be \
             ones the model changed. If that is why it failed, the user can run it in ask \
             mode, where the rules let a covered line run outside the sandbox, or run it \
             themselves."
        )
    }

    /// Why a git command running in each of `dirs` is not trusted, if it is not: each
    /// must use the workspace's repository, the one pinned when the session started,
    /// which sets nothing that makes git run programs and lies where the model cannot
    /// change it (not a bare repository it made at the workspace's top). A repository
    /// the model made (`git init sub` in the sandbox, then `cd sub && git commit`) has
    /// hooks and config of its making: its git commands get nothing from the rules.
    fn foreign_repository(&self, dirs: &[PathBuf], writable: &ModelWritable) -> Option<String> {
        let not_pinned = || {
            "its repository is not the one the session began with, or which it is cannot be \
             told (git through `timeout`, `nice`, a nested shell, after `cd $X`, with `GIT_*`)"
                .to_string()
        };
        let Some(pinned) = &self.repository else { return Some(not_pinned()) };
        let pin = repository::RepositoryPin::of_record(pinned);
        if dirs.is_empty() {
            return Some(not_pinned());
        }
        dirs.iter().find_map(|dir| {
            if repository::RepositoryPin::of(dir) != Some(pin) {
                return Some(not_pinned());
            }
            let Ok(real) = dir.canonicalize() else { return Some(not_pinned()) };
            repository::risk_unconfined(&real, &|path| writable.contains(path))
        })
    }

    /// Whether a rule covers writing `path`. Judged where the write lands (symlinks
    /// followed): a rule for `docs` does not cover `docs/x -> ../.git/config`. A place
    /// guarded even from the sandbox (`.git`, `.kestrel`...) is covered only by a rule
    /// for exactly that file.
    fn write_covered(&self, path: &Path) -> bool {
        self.covering_rule(path).is_some()
    }

    /// The place an `allow_write` rule covering `path` allows (symlinks resolved), the
    /// narrowest when several do.
    fn covering_rule(&self, path: &Path) -> Option<PathBuf> {
        let real = resolve_existing(path);
        if guarded_place(&self.cwd, path).is_some() {
            return self.allowed.rules().contains(&AllowRule::Path(real.clone())).then_some(real);
        }
        let places = self.allowed.rules().iter().filter_map(|rule| match rule {
            AllowRule::Path(allowed) => {
                let allowed = resolve_existing(allowed);
                real.starts_with(&allowed).then_some(allowed)
            }
            _ => None,
        });
        places.max_by_key(|place| place.components().count())
    }

    /// Whether auto's sandbox lets a command write `path` anyway (the workspace, a temp
    /// directory).
    fn sandbox_writes(&self, path: &Path) -> bool {
        let real = resolve_existing(path);
        real.starts_with(resolve_existing(&self.cwd))
            || real.parent().is_some_and(kestrel_platform::SandboxPolicy::is_scratch)
    }

    /// The rules that would cover every concern; empty when some cannot be covered.
    fn rules_for(&self, analysis: &CommandAnalysis, writable: &ModelWritable) -> Vec<AllowRule> {
        let mut rules = Vec::new();
        for concern in analysis.concerns.iter().chain(&analysis.judged_on_files) {
            let rule = match concern {
                // The rule would not cover it either: "always" would ask again.
                Concern::Command { .. }
                    if matches!(
                        self.uncovered(concern, writable),
                        Some(Uncovered::Redirected | Uncovered::Because(_))
                    ) =>
                {
                    return Vec::new();
                }
                Concern::Command { prefix: Some(prefix), .. } => {
                    AllowRule::CommandPrefix(prefix.clone())
                }
                Concern::Write { path: Some(path), .. } => AllowRule::Path(resolve_existing(path)),
                Concern::Command { prefix: None, .. }
                | Concern::Write { path: None, .. }
                | Concern::Opens { .. }
                | Concern::Unparsed { .. } => return Vec::new(),
            };
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
        rules
    }

    fn assess_file_tool(&self, mode: Mode, tool: &str, arguments: &Value) -> Assessment {
        match mode {
            Mode::Yolo => return Assessment::Allow { run_as: mode },
            // The tools confine themselves to the workspace; inside it, what the sandbox
            // keeps read-only for commands needs the user's word for the file tools too.
            Mode::Auto => return self.assess_guarded_write(tool, arguments),
            Mode::ReadOnly => {
                return Assessment::Deny {
                    reason: format!("`{tool}` is not allowed: the session is in read-only mode"),
                };
            }
            Mode::Ask => {}
        }
        let paths = written_paths(tool, arguments, &self.cwd);
        // `link/../f` lands wherever `link` points: no rule can say it is covered.
        let lexical = written_names(tool, arguments).iter().all(|name| analysis::lexical(name));
        // An approved or allowed write outside the workspace writes exactly the files
        // the paths resolve to now (`granted_writes`), nothing else.
        let run_as = mode;
        // Arguments the tool will refuse change nothing: let it say what is wrong.
        if paths.is_empty() || (lexical && paths.iter().all(|path| self.write_covered(path))) {
            return Assessment::Allow { run_as };
        }
        let shown: Vec<String> = paths
            .iter()
            .map(|path| {
                let real = resolve_existing(path);
                let shown = if self.inside(path) || real == *path {
                    self.show(path)
                } else {
                    format!("{} (it resolves to {})", self.show(path), real.display())
                };
                match guarded_place(&self.cwd, path) {
                    Some(why) => format!("{shown} ({why})"),
                    None => shown,
                }
            })
            .collect();
        let verb = match tool {
            "write_file" => "write",
            "edit_file" => "edit",
            _ => "apply a patch to",
        };
        Assessment::Ask {
            summary: format!("{verb} {}", shown.join(", ")),
            always: if lexical {
                paths.iter().map(|path| AllowRule::Path(resolve_existing(path))).collect()
            } else {
                Vec::new()
            },
            run_as,
        }
    }

    /// Whether `path` lands inside the workspace (symlinks followed).
    fn inside(&self, path: &Path) -> bool {
        resolve_existing(path).starts_with(resolve_existing(&normalize(&self.cwd)))
    }

    /// Whether a call of a file tool in auto writes outside the workspace with every
    /// path outside covered by `allow_write` (then it may, as an allowed write does in
    /// ask; the paths inside are judged as any write inside).
    fn auto_outside_covered(&self, tool: &str, arguments: &Value) -> bool {
        let paths = written_paths(tool, arguments, &self.cwd);
        let lexical = written_names(tool, arguments).iter().all(|name| analysis::lexical(name));
        let outside: Vec<&PathBuf> = paths.iter().filter(|path| !self.inside(path)).collect();
        !outside.is_empty() && lexical && outside.iter().all(|path| self.write_covered(path))
    }

    /// The files outside the workspace a call of a file tool in `mode` may write once
    /// the policy allows it (an `allow_write` rule covers it) or the user approves it
    /// (ask): each path outside the workspace as it resolves now, symlinks followed.
    /// Call it with [`assess`](Self::assess) and pass the result to the tool
    /// (`ToolContext::granted_writes`): the tool then writes exactly these files and
    /// refuses a path that has come to lead elsewhere since. Empty for every other
    /// call, and in auto when some path is not covered (the tool refuses it then).
    pub fn granted_writes(&self, mode: Mode, tool: &str, arguments: &str) -> Vec<PathBuf> {
        if !FILE_TOOLS.contains(&tool) {
            return Vec::new();
        }
        let arguments: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        let granted = match mode {
            Mode::Ask => true,
            Mode::Auto => self.auto_outside_covered(tool, &arguments),
            Mode::Yolo | Mode::ReadOnly => false,
        };
        if !granted {
            return Vec::new();
        }
        written_paths(tool, &arguments, &self.cwd)
            .iter()
            .filter(|path| !self.inside(path))
            .map(|path| resolve_existing(path))
            .collect()
    }

    fn assess_guarded_write(&self, tool: &str, arguments: &Value) -> Assessment {
        // Outside the workspace the tools refuse, unless `allow_write` covers every path
        // there (see `granted_writes`); inside, what is guarded asks, covered or not.
        let paths = written_paths(tool, arguments, &self.cwd);
        let guarded: Vec<(PathBuf, &str)> = paths
            .into_iter()
            .filter(|path| !self.write_covered(path))
            .filter_map(|path| guarded_place(&self.cwd, &path).map(|why| (path, why)))
            .collect();
        if guarded.is_empty() {
            return Assessment::Allow { run_as: Mode::Auto };
        }
        let shown: Vec<String> =
            guarded.iter().map(|(path, why)| format!("{} ({why})", self.show(path))).collect();
        Assessment::Ask {
            summary: format!("write {}", shown.join(", ")),
            always: guarded
                .into_iter()
                .map(|(path, _)| AllowRule::Path(resolve_existing(&path)))
                .collect(),
            run_as: Mode::Auto,
        }
    }

    fn show(&self, path: &Path) -> String {
        match path.strip_prefix(&self.cwd) {
            Ok(relative) => relative.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

/// The directory a `shell` call runs in: `cwd`, or its `workdir` argument resolved
/// against `cwd` with symlinks followed (`link/..` is the parent of where `link`
/// points, as the OS resolves it). The policy judges and the tool runs in this same
/// directory.
///
/// Fails when `workdir` does not name an existing directory.
pub fn shell_workdir(cwd: &Path, workdir: Option<&str>) -> std::io::Result<PathBuf> {
    let Some(dir) = workdir else { return Ok(cwd.to_path_buf()) };
    let real = cwd.join(dir).canonicalize()?;
    if !real.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"));
    }
    Ok(real)
}

/// The files a call of a file tool would write (absolute, normalised): `path` of
/// write_file and edit_file, every source and destination of apply_patch. Empty when
/// the arguments do not say (the tool will refuse them).
pub fn written_paths(tool: &str, arguments: &Value, cwd: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for name in written_names(tool, arguments) {
        let path = normalize(&cwd.join(name));
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

/// The paths as the call names them.
fn written_names(tool: &str, arguments: &Value) -> Vec<String> {
    match tool {
        "write_file" | "edit_file" => arguments
            .get("path")
            .and_then(Value::as_str)
            .filter(|path| !path.trim().is_empty())
            .map(str::to_string)
            .into_iter()
            .collect(),
        "apply_patch" => {
            let Some(Ok(patch)) = arguments.get("patch").and_then(Value::as_str).map(parse_patch)
            else {
                return Vec::new();
            };
            let mut names = Vec::new();
            for operation in &patch.operations {
                names.push(operation.path().to_string());
                if let FileOperation::Update { move_to: Some(destination), .. } = operation {
                    names.push(destination.to_string());
                }
            }
            names
        }
        _ => Vec::new(),
    }
}

/// What the git commands of a line do with repositories.
#[derive(Default)]
struct GitParts {
    /// A git command uses the repository it finds (reading ones too).
    uses: bool,
    /// A git command makes a repository (`clone`, `init`).
    creates: bool,
}

fn git_parts(analysis: &CommandAnalysis) -> GitParts {
    let mut parts = GitParts::default();
    for concern in analysis.concerns.iter().chain(&analysis.judged_on_files) {
        let Concern::Command { leading, git_dirs: Some(_), .. } = concern else { continue };
        let args = git::arguments(leading);
        if git::creates_repository(&args) {
            parts.creates = true;
        } else {
            parts.uses = true;
        }
    }
    parts
}

/// Why a line every part of which the rules cover is still not covered, `None` when it
/// is: a line that makes a repository and uses one (pinned, its git would write into
/// the workspace's).
fn line_not_lifted(analysis: &CommandAnalysis) -> Option<&'static str> {
    let git = git_parts(analysis);
    (git.creates && git.uses)
        .then_some("it both makes a repository and uses one: run them on separate lines")
}
