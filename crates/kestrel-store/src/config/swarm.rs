//! `[swarm]` (ARCHITECTURE §10): limits of a run, where its worktrees go, which executor
//! runs its role turns, and the roles' models. A project's file may set the limits and the
//! roles' models only (see `layer`): never where the orchestrator writes or which cluster
//! it uses.

use super::file::{ReviewerTable, RoleTable, SwarmTable};
use super::{ConfigError, split_model_ref};
use serde::Deserialize;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Role turns at once when `[swarm] max_parallel` is unset.
pub const DEFAULT_SWARM_MAX_PARALLEL: usize = 4;
/// Attempts per task when `[swarm] max_attempts` is unset.
pub const DEFAULT_SWARM_MAX_ATTEMPTS: u32 = 3;
/// Seconds each acceptance command may take when `[swarm] verify_timeout_s` is unset.
pub const DEFAULT_SWARM_VERIFY_TIMEOUT_S: u64 = 600;

/// `[swarm]`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwarmSettings {
    /// Role turns running at once; at least 1.
    pub max_parallel: usize,
    /// Attempts per task before it fails; at least 1.
    pub max_attempts: u32,
    /// Seconds each acceptance command may run in verification; at least 1.
    pub verify_timeout_s: u64,
    /// Absolute, `~` expanded, never inside `$KESTREL_HOME`: worktrees and clones go
    /// under `<workdir>/<run>/`.
    pub workdir: PathBuf,
    pub executor: Executor,
    pub planner: SwarmRoleSettings,
    pub implementer: SwarmRoleSettings,
    pub reviewer: ReviewerSettings,
}

/// Where role turns and verifications run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executor {
    /// Daemon sessions, worktrees and temporary clones on this machine.
    Local,
    /// Jobs on a Ray cluster.
    Ray(RaySettings),
}

impl Executor {
    /// The name used in config files.
    pub fn as_str(&self) -> &'static str {
        match self {
            Executor::Local => "local",
            Executor::Ray(_) => "ray",
        }
    }
}

/// Seconds a Ray job may run when `[swarm.ray] job_timeout_s` is unset.
pub const DEFAULT_RAY_JOB_TIMEOUT_S: u64 = 3600;

/// `[swarm.ray]`: the cluster that runs a run's jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct RaySettings {
    /// The Jobs API, e.g. `http://127.0.0.1:8265` (no trailing `/`).
    pub address: String,
    /// The git remote nodes fetch from and push branches to.
    pub remote: String,
    /// The `kestrel` binary on every node (default `kestrel`, found on the node's PATH).
    pub kestrel: String,
    /// CPUs each job reserves (`entrypoint_num_cpus`); default 1.
    pub num_cpus: f64,
    /// Memory each job reserves, in MiB (`entrypoint_memory`); 0: none reserved.
    pub memory_mb: u64,
    /// Seconds a job may run before it is stopped and its attempt fails.
    pub job_timeout_s: u64,
    /// Variables every job gets; names that look secret are refused (keys come from
    /// the node's own environment or `env_file`, never through the cluster).
    pub env: std::collections::BTreeMap<String, String>,
    /// A `NAME=value` file on each node that the job reads into the environment of the
    /// `kestrel` it runs (provider keys).
    pub env_file: Option<String>,
}

impl Eq for RaySettings {}

/// `[swarm.roles.planner]`, `[swarm.roles.implementer]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwarmRoleSettings {
    /// `"<provider>/<model id>"`; `None`: the session's default model.
    pub model: Option<String>,
}

/// `[swarm.roles.reviewer]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReviewerSettings {
    /// `"<provider>/<model id>"`; `None`: the session's default model.
    pub model: Option<String>,
    /// Whether the reviewer may use the implementer's model (default false: a second
    /// opinion from the same model finds little).
    pub allow_same_model: bool,
}

impl SwarmSettings {
    /// Every default, as when no file sets `[swarm]`.
    pub(super) fn defaults(env: &SwarmEnv) -> Self {
        Self {
            max_parallel: DEFAULT_SWARM_MAX_PARALLEL,
            max_attempts: DEFAULT_SWARM_MAX_ATTEMPTS,
            verify_timeout_s: DEFAULT_SWARM_VERIFY_TIMEOUT_S,
            workdir: env.default_workdir(),
            executor: Executor::Local,
            planner: SwarmRoleSettings::default(),
            implementer: SwarmRoleSettings::default(),
            reviewer: ReviewerSettings::default(),
        }
    }
}

/// `executor = "local" | "ray"` as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ExecutorKind {
    Local,
    Ray,
}

/// What the defaults and `~` depend on besides the files: the process environment
/// (tests give their own).
#[derive(Debug, Clone, Default)]
pub(super) struct SwarmEnv {
    /// `$KESTREL_HOME` resolved; `None` skips the inside-home check (no home known).
    pub(super) kestrel_home: Option<PathBuf>,
    /// `$HOME`, for `~`.
    pub(super) home: Option<PathBuf>,
    /// `$XDG_CACHE_HOME`, for the default workdir.
    pub(super) xdg_cache_home: Option<PathBuf>,
}

impl SwarmEnv {
    pub(super) fn from_process(kestrel_home: Option<&Path>) -> Self {
        let var = |name: &str| {
            std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from)
        };
        Self {
            kestrel_home: kestrel_home.map(Path::to_path_buf),
            home: var("HOME"),
            xdg_cache_home: var("XDG_CACHE_HOME").filter(|path| path.is_absolute()),
        }
    }

    /// `$XDG_CACHE_HOME/kestrel/swarm`, else `~/.cache/kestrel/swarm`, else (no home at
    /// all, as in some containers) under the temporary directory.
    fn default_workdir(&self) -> PathBuf {
        let cache = match (&self.xdg_cache_home, &self.home) {
            (Some(cache), _) => cache.clone(),
            (None, Some(home)) => home.join(".cache"),
            (None, None) => std::env::temp_dir(),
        };
        cache.join("kestrel").join("swarm")
    }
}

/// Checks the merged `[swarm]` and fills in the defaults. `path_of` gives the file an
/// error about a dotted key (`["swarm", "max_parallel"]`) names.
pub(super) fn resolve_swarm(
    table: SwarmTable,
    env: &SwarmEnv,
    path_of: impl Fn(&[&str]) -> PathBuf,
) -> Result<SwarmSettings, ConfigError> {
    let at_least_one = |key: &str, zero: bool| match zero {
        true => Err(ConfigError::Invalid {
            path: path_of(&["swarm", key]),
            message: format!("`[swarm] {key}` must be at least 1"),
        }),
        false => Ok(()),
    };
    at_least_one("max_parallel", table.max_parallel == Some(0))?;
    at_least_one("max_attempts", table.max_attempts == Some(0))?;
    at_least_one("verify_timeout_s", table.verify_timeout_s == Some(0))?;

    let workdir = match &table.workdir {
        Some(text) => expand_workdir(text, env).map_err(|message| ConfigError::Invalid {
            path: path_of(&["swarm", "workdir"]),
            message,
        })?,
        None => env.default_workdir(),
    };
    if let Some(home) = &env.kestrel_home
        && is_inside(&workdir, home)
    {
        let (path, setting) = match table.workdir {
            Some(_) => (path_of(&["swarm", "workdir"]), "`[swarm] workdir`"),
            None => (home.join("config.toml"), "the default `[swarm] workdir`"),
        };
        return Err(ConfigError::Invalid {
            path,
            message: format!(
                "{setting} ({}) is inside Kestrel's home ({}): the orchestrator's worktrees \
                 must lie outside it (its paths are guarded); set `[swarm] workdir` in \
                 {} to another directory, e.g. \"~/.cache/kestrel/swarm\"",
                workdir.display(),
                home.display(),
                home.join("config.toml").display()
            ),
        });
    }

    let executor = match table.executor.unwrap_or(ExecutorKind::Local) {
        ExecutorKind::Local => Executor::Local,
        ExecutorKind::Ray => Executor::Ray(resolve_ray(table.ray, &path_of)?),
    };
    let model = |role: &str, model: Option<String>| -> Result<Option<String>, ConfigError> {
        if let Some(model_ref) = &model {
            split_model_ref(model_ref).map_err(|error| ConfigError::Invalid {
                path: path_of(&["swarm", "roles", role, "model"]),
                message: format!("[swarm.roles.{role}] model: {error}"),
            })?;
        }
        Ok(model)
    };
    let RoleTable { model: planner } = table.roles.planner;
    let RoleTable { model: implementer } = table.roles.implementer;
    let ReviewerTable { model: reviewer, allow_same_model } = table.roles.reviewer;
    Ok(SwarmSettings {
        max_parallel: table.max_parallel.unwrap_or(DEFAULT_SWARM_MAX_PARALLEL),
        max_attempts: table.max_attempts.unwrap_or(DEFAULT_SWARM_MAX_ATTEMPTS),
        verify_timeout_s: table.verify_timeout_s.unwrap_or(DEFAULT_SWARM_VERIFY_TIMEOUT_S),
        workdir,
        executor,
        planner: SwarmRoleSettings { model: model("planner", planner)? },
        implementer: SwarmRoleSettings { model: model("implementer", implementer)? },
        reviewer: ReviewerSettings {
            model: model("reviewer", reviewer)?,
            allow_same_model: allow_same_model.unwrap_or(false),
        },
    })
}

/// `executor = "ray"` needs both keys of `[swarm.ray]`.
fn resolve_ray(
    table: Option<super::file::RayTable>,
    path_of: impl Fn(&[&str]) -> PathBuf,
) -> Result<RaySettings, ConfigError> {
    let table = table.unwrap_or_default();
    // A missing key is the fault of the file that asked for ray.
    let missing = |key: &str, example: &str| ConfigError::Invalid {
        path: path_of(&["swarm", "executor"]),
        message: format!(
            "`executor = \"ray\"` needs `{key}` in [swarm.ray], e.g. {key} = \"{example}\""
        ),
    };
    let address = table
        .address
        .filter(|address| !address.trim().is_empty())
        .ok_or_else(|| missing("address", "http://127.0.0.1:8265"))?;
    if !(address.starts_with("http://") || address.starts_with("https://")) {
        return Err(ConfigError::Invalid {
            path: path_of(&["swarm", "ray", "address"]),
            message: format!(
                "[swarm.ray] address `{address}` is not an http:// or https:// URL of the Ray \
                 Jobs API (e.g. \"http://127.0.0.1:8265\")"
            ),
        });
    }
    let remote = table
        .remote
        .filter(|remote| !remote.trim().is_empty())
        .ok_or_else(|| missing("remote", "git@example.org:team/repo.git"))?;
    // The remote is in every job's command line, which the cluster shows to anyone.
    if let Some((_, rest)) = remote.split_once("://")
        && rest
            .split('/')
            .next()
            .is_some_and(|authority| authority.contains(':') && authority.contains('@'))
    {
        return Err(ConfigError::Invalid {
            path: path_of(&["swarm", "ray", "remote"]),
            message: "[swarm.ray] remote holds a password (user:secret@): every job's command \
                      line shows it; give the nodes SSH keys or a git credential helper instead"
                .to_string(),
        });
    }
    if let Some(name) = table.env.keys().find(|name| kestrel_platform::is_secret_name(name)) {
        return Err(ConfigError::Invalid {
            path: path_of(&["swarm", "ray", "env"]),
            message: format!(
                "[swarm.ray] env sets `{name}`, a name that looks secret: job variables are \
                 visible to everyone who can read the cluster's jobs; put keys in the nodes' \
                 own environment or a file named by [swarm.ray] env_file"
            ),
        });
    }
    let num_cpus = table.num_cpus.unwrap_or(1.0);
    if !(num_cpus.is_finite() && num_cpus > 0.0) {
        return Err(ConfigError::Invalid {
            path: path_of(&["swarm", "ray", "num_cpus"]),
            message: format!("[swarm.ray] num_cpus must be more than 0, not {num_cpus}"),
        });
    }
    if table.job_timeout_s == Some(0) {
        return Err(ConfigError::Invalid {
            path: path_of(&["swarm", "ray", "job_timeout_s"]),
            message: "[swarm.ray] job_timeout_s must be at least 1".to_string(),
        });
    }
    Ok(RaySettings {
        address: address.trim_end_matches('/').to_owned(),
        remote,
        kestrel: table.kestrel.filter(|path| !path.trim().is_empty()).unwrap_or("kestrel".into()),
        num_cpus,
        memory_mb: table.memory_mb.unwrap_or(0),
        job_timeout_s: table.job_timeout_s.unwrap_or(DEFAULT_RAY_JOB_TIMEOUT_S),
        env: table.env,
        env_file: table.env_file.filter(|path| !path.trim().is_empty()),
    })
}

/// `~` or `~/...` expanded with `$HOME`; anything else must be absolute.
fn expand_workdir(text: &str, env: &SwarmEnv) -> Result<PathBuf, String> {
    let home = || {
        env.home.clone().ok_or_else(|| {
            format!("`[swarm] workdir = \"{text}\"` starts with `~` but HOME is not set")
        })
    };
    let path = if text == "~" {
        home()?
    } else if let Some(rest) = text.strip_prefix("~/") {
        home()?.join(rest)
    } else {
        PathBuf::from(text)
    };
    if !path.is_absolute() {
        return Err(format!(
            "`[swarm] workdir = \"{text}\"` must be an absolute path or start with `~/`"
        ));
    }
    Ok(path)
}

/// Whether `path` is `dir` or beneath it, after `.`/`..` and the symlinks of their
/// existing parts are resolved (neither needs to exist).
fn is_inside(path: &Path, dir: &Path) -> bool {
    real_path(path).starts_with(real_path(dir))
}

/// `path` without `.` and `..`, its longest existing ancestor canonicalized.
fn real_path(path: &Path) -> PathBuf {
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    let mut missing: Vec<OsString> = Vec::new();
    let mut existing = clean.as_path();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return missing.iter().rev().fold(real, |path, part| path.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            _ => return clean,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::layer::Layer;
    use super::super::{Config, resolve};
    use super::*;

    /// A user's file at /k/config.toml, with KESTREL_HOME=/k and HOME=/u.
    fn parse(text: &str) -> Result<Config, ConfigError> {
        let env = SwarmEnv {
            kestrel_home: Some("/k".into()),
            home: Some("/u".into()),
            xdg_cache_home: None,
        };
        resolve(vec![Layer::parse(Path::new("/k/config.toml"), text)?], &env)
    }

    #[test]
    fn unset_swarm_keys_take_the_defaults() {
        let swarm = parse("").unwrap().swarm;
        assert_eq!(
            swarm,
            SwarmSettings {
                max_parallel: 4,
                max_attempts: 3,
                verify_timeout_s: 600,
                workdir: PathBuf::from("/u/.cache/kestrel/swarm"),
                executor: Executor::Local,
                planner: SwarmRoleSettings { model: None },
                implementer: SwarmRoleSettings { model: None },
                reviewer: ReviewerSettings { model: None, allow_same_model: false },
            }
        );
    }

    #[test]
    fn every_documented_swarm_key_is_read() {
        let swarm = parse(
            r#"
[swarm]
max_parallel = 2
max_attempts = 5
verify_timeout_s = 60
workdir = "~/work/swarm"
executor = "ray"
[swarm.roles.planner]
model = "anthropic/claude-opus-4-5"
[swarm.roles.implementer]
model = "openai/gpt-5.1-codex"
[swarm.roles.reviewer]
model = "anthropic/claude-sonnet-4-5"
allow_same_model = true
[swarm.ray]
address = "http://127.0.0.1:8265/"
remote = "git@example.org:team/repo.git"
kestrel = "/opt/kestrel/bin/kestrel"
num_cpus = 2.5
memory_mb = 4096
job_timeout_s = 900
env = { KESTREL_HOME = "/srv/kestrel", PATH = "/opt/bin:/usr/bin" }
env_file = "/etc/kestrel/keys.env"
"#,
        )
        .unwrap()
        .swarm;
        assert_eq!((swarm.max_parallel, swarm.max_attempts, swarm.verify_timeout_s), (2, 5, 60));
        assert_eq!(swarm.workdir, PathBuf::from("/u/work/swarm"));
        assert_eq!(
            swarm.executor,
            Executor::Ray(RaySettings {
                address: "http://127.0.0.1:8265".into(),
                remote: "git@example.org:team/repo.git".into(),
                kestrel: "/opt/kestrel/bin/kestrel".into(),
                num_cpus: 2.5,
                memory_mb: 4096,
                job_timeout_s: 900,
                env: [("KESTREL_HOME", "/srv/kestrel"), ("PATH", "/opt/bin:/usr/bin")]
                    .into_iter()
                    .map(|(name, value)| (name.to_string(), value.to_string()))
                    .collect(),
                env_file: Some("/etc/kestrel/keys.env".into()),
            })
        );
        let ray = |extra: &str| {
            format!(
                "[swarm]\nexecutor = \"ray\"\n[swarm.ray]\naddress = \"http://h:1\"\nremote = \"r\"\n{extra}"
            )
        };
        let Executor::Ray(defaults) = parse(&ray("")).unwrap().swarm.executor else {
            panic!("not ray")
        };
        assert_eq!(
            (defaults.kestrel.as_str(), defaults.num_cpus, defaults.memory_mb),
            ("kestrel", 1.0, 0)
        );
        assert_eq!((defaults.job_timeout_s, defaults.env_file), (DEFAULT_RAY_JOB_TIMEOUT_S, None));
        assert_eq!(swarm.planner.model.as_deref(), Some("anthropic/claude-opus-4-5"));
        assert_eq!(swarm.implementer.model.as_deref(), Some("openai/gpt-5.1-codex"));
        assert_eq!(swarm.reviewer.model.as_deref(), Some("anthropic/claude-sonnet-4-5"));
        assert!(swarm.reviewer.allow_same_model);
    }

    #[test]
    fn zero_limits_are_refused_naming_the_file_and_key() {
        for key in ["max_parallel", "max_attempts", "verify_timeout_s"] {
            let message = parse(&format!("[swarm]\n{key} = 0\n")).unwrap_err().to_string();
            assert_eq!(message, format!("/k/config.toml: `[swarm] {key}` must be at least 1"));
        }
    }

    #[test]
    fn bad_swarm_values_are_errors_naming_the_key() {
        let cases = [
            ("[swarm]\nexecutor = \"k8s\"\n", "`local` or `ray`"),
            ("[swarm]\nmax_parallel = -1\n", "max_parallel"),
            ("[swarm]\nworkdir = \"rel\"\n", "must be an absolute path"),
            ("[swarm.roles.planner]\nmodel = \"opus\"\n", "[swarm.roles.planner] model"),
            ("[swarm.roles.tester]\nmodel = \"a/b\"\n", "unknown field `tester`"),
            ("[swarm.roles.planner]\nallow_same_model = true\n", "allow_same_model"),
            ("[swarm]\nexecutor = \"ray\"\n", "needs `address` in [swarm.ray]"),
            (
                "[swarm]\nexecutor = \"ray\"\n[swarm.ray]\naddress = \"http://h:1\"\n",
                "needs `remote`",
            ),
            (
                "[swarm]\nexecutor = \"ray\"\n[swarm.ray]\naddress = \"h:1\"\nremote = \"r\"\n",
                "not an http:// or https:// URL",
            ),
            (
                "[swarm]\nexecutor = \"ray\"\n[swarm.ray]\naddress = \"http://h:1\"\nremote = \"r\"\nenv = { OPENAI_API_KEY = \"sk\" }\n",
                "`OPENAI_API_KEY`, a name that looks secret",
            ),
            (
                "[swarm]\nexecutor = \"ray\"\n[swarm.ray]\naddress = \"http://h:1\"\nremote = \"r\"\nnum_cpus = 0\n",
                "num_cpus must be more than 0",
            ),
            (
                "[swarm]\nexecutor = \"ray\"\n[swarm.ray]\naddress = \"http://h:1\"\nremote = \"r\"\njob_timeout_s = 0\n",
                "job_timeout_s must be at least 1",
            ),
            ("[swarm.ray]\nnodes = 3\n", "unknown field `nodes`"),
            (
                "[swarm]\nexecutor = \"ray\"\n[swarm.ray]\naddress = \"http://h:1\"\nremote = \"https://me:tok@git.example.org/r.git\"\n",
                "remote holds a password",
            ),
        ];
        for (text, expected) in cases {
            let message = parse(text).unwrap_err().to_string();
            assert!(message.starts_with("/k/config.toml"), "{text}: {message}");
            assert!(message.contains(expected), "{text}: {message}");
        }
        // The cluster's settings are only needed by the ray executor.
        assert_eq!(
            parse("[swarm.ray]\naddress = \"x\"\n").unwrap().swarm.executor,
            Executor::Local
        );
    }

    #[test]
    fn a_workdir_inside_kestrel_home_is_refused_naming_both() {
        for workdir in ["/k/swarm", "/k", "/u/../k/work"] {
            let text = format!("[swarm]\nworkdir = \"{workdir}\"\n");
            let message = parse(&text).unwrap_err().to_string();
            assert!(message.starts_with("/k/config.toml: `[swarm] workdir`"), "{message}");
            assert!(message.contains("inside Kestrel's home (/k)"), "{message}");
        }
        // A default that falls inside the home (KESTREL_HOME under the cache) is refused too.
        let env = SwarmEnv {
            kestrel_home: Some("/u/.cache/kestrel".into()),
            home: Some("/u".into()),
            xdg_cache_home: None,
        };
        let message = resolve(Vec::new(), &env).unwrap_err().to_string();
        assert!(
            message.contains("the default `[swarm] workdir` (/u/.cache/kestrel/swarm)"),
            "{message}"
        );
        assert!(message.contains("(/u/.cache/kestrel)"), "{message}");
    }

    fn env() -> SwarmEnv {
        SwarmEnv {
            kestrel_home: Some("/h/.kestrel".into()),
            home: Some("/h".into()),
            xdg_cache_home: None,
        }
    }

    #[test]
    fn the_default_workdir_prefers_xdg_cache_home() {
        assert_eq!(env().default_workdir(), PathBuf::from("/h/.cache/kestrel/swarm"));
        let xdg = SwarmEnv { xdg_cache_home: Some("/x".into()), ..env() };
        assert_eq!(xdg.default_workdir(), PathBuf::from("/x/kestrel/swarm"));
    }

    #[test]
    fn workdirs_expand_tilde_and_must_be_absolute() {
        assert_eq!(expand_workdir("~/w", &env()).unwrap(), PathBuf::from("/h/w"));
        assert_eq!(expand_workdir("/abs", &env()).unwrap(), PathBuf::from("/abs"));
        assert!(expand_workdir("rel/w", &env()).unwrap_err().contains("absolute"));
        assert!(expand_workdir("~bob/w", &env()).unwrap_err().contains("absolute"));
        let no_home = SwarmEnv { home: None, ..env() };
        assert!(expand_workdir("~/w", &no_home).unwrap_err().contains("HOME"));
    }

    #[test]
    fn inside_resolves_dot_dot_and_symlinks() {
        assert!(is_inside(Path::new("/h/.kestrel/w"), Path::new("/h/.kestrel")));
        assert!(is_inside(Path::new("/h/.kestrel"), Path::new("/h/.kestrel")));
        assert!(is_inside(Path::new("/h/x/../.kestrel/w"), Path::new("/h/.kestrel")));
        assert!(!is_inside(Path::new("/h/.kestrel/../w"), Path::new("/h/.kestrel")));
        assert!(!is_inside(Path::new("/h/.kestrel-w"), Path::new("/h/.kestrel")));
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&home, dir.path().join("link")).unwrap();
            assert!(is_inside(&dir.path().join("link/swarm/new"), &home));
        }
    }
}
