//! The OS sandbox for commands (ARCHITECTURE §6–§7): a command may read everywhere but
//! write only beneath the policy's writable roots (minus its protected paths), and
//! without the network unless the policy allows it. On both Linux backends it also runs
//! in a new session (no controlling terminal), without capabilities, and under a seccomp
//! filter that refuses unix sockets (see `seccomp`). The backends: Landlock (a kernel
//! LSM, applied to the child alone right before it execs) in new network and mount
//! namespaces, and bubblewrap (`bwrap`) where it is installed. Other targets have none:
//! `detect` says so, and the caller must ask instead of running a command unconfined.

#[cfg(target_os = "linux")]
mod bubblewrap;
#[cfg(target_os = "linux")]
mod capabilities;
#[cfg(target_os = "linux")]
mod landlock;
mod metadata;
#[cfg(target_os = "linux")]
mod mounts;
#[cfg(target_os = "linux")]
mod namespace;
#[cfg(target_os = "linux")]
mod pid_namespace;
#[cfg(target_os = "linux")]
mod seccomp;

pub use metadata::{METADATA_DEPTH, MetadataWatch};

use crate::process::ShellStartup;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tokio::process::Command;

/// The variable that picks a backend: `landlock`, `bwrap`, `none` (act as if no sandbox
/// existed, so confined commands must be approved), or `auto`/unset (the best available).
pub const SANDBOX_ENV: &str = "KESTREL_SANDBOX";

/// What a sandboxed command may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Directories (or single files) the command may create, change and delete things
    /// beneath. Paths that do not exist are skipped.
    pub writable: Vec<PathBuf>,
    /// Paths beneath the writable roots that stay read-only (`<workspace>/.git`, Kestrel's
    /// own state): what runs outside the sandbox later (git hooks, config) lives there.
    /// Paths that do not exist are skipped.
    pub protected: Vec<PathBuf>,
    /// Whether the command may use the network. Without it the command runs in a new
    /// network namespace that has no usable interface, loopback to the host included.
    pub network: bool,
    /// Whether everything the command starts ends with it, a `setsid -f` daemon too:
    /// it runs in its own PID namespace. Always so under bubblewrap; under Landlock only
    /// when set, so that a server a sandboxed line starts can outlive the line.
    pub contained: bool,
}

impl SandboxPolicy {
    /// Writable: `workspace` plus [`SandboxPolicy::scratch_paths`]; protected: the
    /// workspace's `.git` and `.kestrel`, the `.git` of every repository up to
    /// [`METADATA_DEPTH`] levels inside it, and the git directory a `.git` file among
    /// them names (`gitdir: …`). Ones that do not exist yet cannot be protected: see
    /// [`MetadataWatch`].
    pub fn workspace_write(workspace: &Path, network: bool) -> Self {
        let mut writable = vec![workspace.to_path_buf()];
        writable.extend(Self::scratch_paths());
        let mut protected: Vec<PathBuf> =
            metadata::TOP_LEVEL.iter().map(|name| workspace.join(name)).collect();
        let entries = metadata::metadata_entries(workspace);
        let named = metadata::named_git_dirs(workspace, &entries);
        for path in entries.into_iter().chain(named) {
            if !protected.contains(&path) {
                protected.push(path);
            }
        }
        Self { writable, protected, network, contained: false }
    }

    /// Writable: only the scratch paths (temp directories and harmless devices), for
    /// commands that must not change the project.
    pub fn read_only(network: bool) -> Self {
        Self { writable: Self::scratch_paths(), protected: Vec::new(), network, contained: false }
    }

    /// The same policy with `path` kept read-only too (e.g. `$KESTREL_HOME`, when it lies
    /// inside the workspace).
    pub fn protect(mut self, path: &Path) -> Self {
        self.protected.push(path.to_path_buf());
        self
    }

    /// The protected paths that exist and lie beneath a writable root (the others are
    /// read-only anyway), symlinks resolved.
    pub fn protected_paths(&self) -> Vec<PathBuf> {
        let roots: Vec<PathBuf> =
            self.writable.iter().filter_map(|root| root.canonicalize().ok()).collect();
        let mut paths: Vec<PathBuf> = Vec::new();
        for path in &self.protected {
            let Ok(path) = path.canonicalize() else { continue };
            if roots.iter().any(|root| path.starts_with(root)) && !paths.contains(&path) {
                paths.push(path);
            }
        }
        paths
    }

    /// `/tmp`, `$TMPDIR`, `/dev/shm` and the devices every program expects to write
    /// (`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`). Not
    /// `/dev/tty`: a command has no terminal (it runs in a new session).
    pub fn scratch_paths() -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = ["/tmp", "/dev/shm"].iter().map(PathBuf::from).collect();
        let temp = std::env::temp_dir();
        if !paths.contains(&temp) {
            paths.push(temp);
        }
        paths.extend(DEVICES.iter().map(PathBuf::from));
        paths
    }

    /// Whether every sandbox lets commands write `path` (an existing path): it lies
    /// beneath one of the [`SandboxPolicy::scratch_paths`], symlinks resolved. A checkout
    /// or build directory under `/tmp` is such a place.
    pub fn is_scratch(path: &Path) -> bool {
        let Ok(path) = path.canonicalize() else { return false };
        Self::scratch_paths()
            .iter()
            .filter_map(|scratch| scratch.canonicalize().ok())
            .any(|scratch| path.starts_with(scratch))
    }
}

/// Devices a confined command may still open for writing.
const DEVICES: [&str; 5] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// Which mechanism confines commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxKind {
    /// Landlock rules applied in the child, plus `unshare(CLONE_NEWNET)` for the network.
    Landlock,
    /// The `bwrap` program: a read-only bind of `/` with writable binds over it.
    Bubblewrap,
}

/// A working sandbox backend. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    backend: Backend,
    /// Whether a network namespace can be made, i.e. `network: false` can be enforced.
    isolates_network: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Backend {
    Landlock { abi: u32 },
    Bubblewrap { program: PathBuf },
}

/// No sandbox can be had; `reason` says why and what would fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no sandbox available: {reason}")]
pub struct SandboxUnavailable {
    pub reason: String,
}

impl SandboxUnavailable {
    fn new(reason: impl Into<String>) -> Self {
        Self { reason: reason.into() }
    }
}

/// Why a sandboxed command could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The policy wants the network off but this sandbox cannot make a network namespace.
    #[error(
        "this sandbox ({0}) cannot turn the network off (no network namespace); set `[sandbox] network = true` or run where unprivileged user namespaces are allowed"
    )]
    NoNetworkIsolation(String),
    /// Setting up the rules failed (e.g. the kernel refused a Landlock rule).
    #[error("cannot set up the {backend} sandbox: {source}")]
    Setup {
        backend: String,
        #[source]
        source: std::io::Error,
    },
}

impl Sandbox {
    /// The best sandbox that can enforce a policy with this `network` setting, probed
    /// once per process and setting: Landlock, then bubblewrap. `$KESTREL_SANDBOX`
    /// (see [`SANDBOX_ENV`]) can force one backend or none.
    ///
    /// Fails when no backend works here, saying why for each.
    pub fn detect(network: bool) -> Result<Sandbox, SandboxUnavailable> {
        static WITH_NETWORK: OnceLock<Result<Sandbox, SandboxUnavailable>> = OnceLock::new();
        static WITHOUT_NETWORK: OnceLock<Result<Sandbox, SandboxUnavailable>> = OnceLock::new();
        let cell = if network { &WITH_NETWORK } else { &WITHOUT_NETWORK };
        cell.get_or_init(|| Self::detect_uncached(network)).clone()
    }

    fn detect_uncached(network: bool) -> Result<Sandbox, SandboxUnavailable> {
        let choice = std::env::var(SANDBOX_ENV).unwrap_or_default();
        let usable = |sandbox: Sandbox| {
            if network || sandbox.isolates_network {
                Ok(sandbox)
            } else {
                Err(SandboxUnavailable::new(format!(
                    "{} works but cannot create a network namespace to keep the network off \
                     (set `[sandbox] network = true` to run with the network)",
                    sandbox.describe()
                )))
            }
        };
        match choice.trim() {
            "landlock" => Self::landlock().and_then(usable),
            "bwrap" | "bubblewrap" => Self::bubblewrap().and_then(usable),
            "none" => Err(SandboxUnavailable::new(format!("turned off by {SANDBOX_ENV}=none"))),
            "" | "auto" => {
                let landlock = Self::landlock().and_then(usable);
                let Err(landlock_error) = landlock else { return landlock };
                let bubblewrap = Self::bubblewrap().and_then(usable);
                let Err(bubblewrap_error) = bubblewrap else { return bubblewrap };
                Err(SandboxUnavailable::new(format!(
                    "Landlock: {}; bubblewrap: {}",
                    landlock_error.reason, bubblewrap_error.reason
                )))
            }
            other => Err(SandboxUnavailable::new(format!(
                "{SANDBOX_ENV}={other} is not a sandbox: use landlock, bwrap, none or auto"
            ))),
        }
    }

    /// The Landlock backend, if the kernel supports it and a mount namespace can be
    /// made (for the read-only view of the file system). Probes (once) whether a network
    /// namespace can be created too.
    ///
    /// Fails off Linux, on kernels without Landlock, when it is disabled, or when no
    /// mount namespace can be made (unprivileged user namespaces turned off).
    pub fn landlock() -> Result<Sandbox, SandboxUnavailable> {
        #[cfg(target_os = "linux")]
        {
            let abi = landlock::abi_version().map_err(SandboxUnavailable::new)?;
            if let Err(error) = landlock::probe(abi, true) {
                return Err(SandboxUnavailable::new(format!(
                    "Landlock works but a command cannot be confined here ({error}): it needs a \
                     mount namespace (to keep .git and everything outside the writable roots \
                     read-only); allow unprivileged user namespaces or install bubblewrap"
                )));
            }
            Ok(Sandbox {
                backend: Backend::Landlock { abi },
                isolates_network: landlock::probe(abi, false).is_ok(),
            })
        }
        #[cfg(not(target_os = "linux"))]
        Err(SandboxUnavailable::new("no sandbox on this platform (Landlock is Linux-only)"))
    }

    /// The bubblewrap backend, if `bwrap` is on `PATH` and can start a sandbox here.
    ///
    /// Fails off Linux, when `bwrap` is not installed, or when it cannot run.
    pub fn bubblewrap() -> Result<Sandbox, SandboxUnavailable> {
        #[cfg(target_os = "linux")]
        {
            let program = bubblewrap::find().ok_or_else(|| {
                SandboxUnavailable::new("`bwrap` is not installed (apt-get install bubblewrap)")
            })?;
            bubblewrap::probe(&program, false).map_err(SandboxUnavailable::new)?;
            let isolates_network = bubblewrap::probe(&program, true).is_ok();
            Ok(Sandbox { backend: Backend::Bubblewrap { program }, isolates_network })
        }
        #[cfg(not(target_os = "linux"))]
        Err(SandboxUnavailable::new("no sandbox on this platform (bubblewrap is Linux-only)"))
    }

    pub fn kind(&self) -> SandboxKind {
        match self.backend {
            Backend::Landlock { .. } => SandboxKind::Landlock,
            Backend::Bubblewrap { .. } => SandboxKind::Bubblewrap,
        }
    }

    /// Whether `network: false` policies can be enforced.
    pub fn isolates_network(&self) -> bool {
        self.isolates_network
    }

    /// For people: "Landlock (ABI 7)", "bubblewrap (/usr/bin/bwrap)".
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Landlock { abi } => format!("Landlock (ABI {abi})"),
            Backend::Bubblewrap { program } => format!("bubblewrap ({})", program.display()),
        }
    }

    /// The `bash -lc SCRIPT` command confined by `policy`, ready for the caller to set
    /// its cwd, stdio and environment and spawn (e.g. with `spawn_group`). The rules
    /// apply to the command and everything it starts, never to this process; the
    /// command leads a new session and process group (its pid is the group id).
    ///
    /// Fails when the policy wants the network off and this sandbox cannot do that, or
    /// when the rules cannot be set up. Setup steps that run in the child (namespaces,
    /// mounts, Landlock, seccomp) fail at spawn, with the OS error.
    pub fn command(&self, script: &str, policy: &SandboxPolicy) -> Result<Command, SandboxError> {
        self.shell_command(script, ShellStartup::Login, policy)
    }

    /// As [`Sandbox::command`], with bash reading the login profile or not (`startup`).
    pub fn shell_command(
        &self,
        script: &str,
        startup: ShellStartup,
        policy: &SandboxPolicy,
    ) -> Result<Command, SandboxError> {
        if !policy.network && !self.isolates_network {
            return Err(SandboxError::NoNetworkIsolation(self.describe()));
        }
        #[cfg(target_os = "linux")]
        {
            let setup = |source| SandboxError::Setup { backend: self.describe(), source };
            match &self.backend {
                Backend::Landlock { abi } => {
                    landlock::command(*abi, script, startup, policy).map_err(setup)
                }
                Backend::Bubblewrap { program } => {
                    bubblewrap::command(program, script, startup, policy).map_err(setup)
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (script, startup);
            Err(SandboxError::Setup {
                backend: self.describe(),
                source: std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "no sandbox on this platform",
                ),
            })
        }
    }
}

/// In the child before it execs: a new session, so the command has no controlling
/// terminal (no TIOCSTI keystrokes into the user's terminal, no `/dev/tty`). It also
/// leads a new process group with its own pid as the id, as `spawn_group` expects.
///
/// # Safety
/// For a `pre_exec` hook: one system call.
#[cfg(target_os = "linux")]
unsafe fn new_session() -> std::io::Result<()> {
    // SAFETY: setsid(2) takes no arguments and touches no memory.
    if unsafe { libc::setsid() } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl fmt::Display for SandboxKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SandboxKind::Landlock => "landlock",
            SandboxKind::Bubblewrap => "bwrap",
        })
    }
}
