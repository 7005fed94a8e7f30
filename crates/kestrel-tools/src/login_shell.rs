//! The login shell's environment, taken once and reused by every `shell` call: `bash -lc`
//! runs the user's profile (pyenv, nvm, conda: often 100 ms and more) before each command,
//! so instead one `bash -lc` prints its exported variables, functions, aliases, the
//! `expand_aliases` option and the umask; each command then runs in plain `bash -c` with
//! those variables and a file of the rest read through `BASH_ENV`. The snapshot is taken
//! again when a profile file changes, under the confinement of the call that needs it
//! (a sandboxed call never gets a profile run outside its sandbox), and the profile's
//! own output and stderr go nowhere. The "file" is a sealed memfd that each command
//! inherits and reads as `/dev/fd/N`: nothing on disk, and no command can change it to
//! plant code in the next one's shell. When the profile fails or hangs, commands run in
//! `bash -lc`.

use kestrel_platform::{SandboxPolicy, is_secret_name, spawn_group};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// How long the profile may take before commands fall back to `bash -lc`.
const CAPTURE_TIMEOUT: Duration = Duration::from_secs(10);
/// More output than any environment holds: the capture stops reading there.
const MAX_CAPTURE_BYTES: usize = 16 << 20;
const START: &[u8] = b"\0KESTREL-LOGIN-SHELL\0";
const END: &[u8] = b"\0KESTREL-LOGIN-SHELL-END\0";

/// Runs after the profile in `bash -lc`: exported variables (`name=value\0`, then an
/// empty entry), the options bash needs to parse the functions (`extglob` patterns are a
/// syntax error without it, which would lose the rest of the file), functions, aliases
/// and options, each section ended by NUL. Builtins
/// are named as such in case the profile defines functions of the same names.
const CAPTURE_SCRIPT: &str = r#"builtin printf '\0KESTREL-LOGIN-SHELL\0'
IFS=$' \t\n'
for __kestrel_name in $(builtin compgen -e); do
  builtin printf '%s=%s\0' "$__kestrel_name" "${!__kestrel_name}"
done
builtin printf '\0'
builtin shopt -p extglob
builtin printf '\0'
builtin declare -f
builtin printf '\0'
builtin alias -p
builtin printf '\0'
builtin shopt -p expand_aliases
builtin printf 'umask %s\n' "$(builtin umask)"
builtin printf '\0KESTREL-LOGIN-SHELL-END\0'
"#;

/// Variables bash sets for itself in every shell: taken from the command's own shell,
/// never from the snapshot's.
const SHELL_OWN: [&str; 4] = ["PWD", "OLDPWD", "SHLVL", "_"];

/// Profile files whose change makes a new snapshot (the ones bash reads as a login shell,
/// and the bashrc files profiles commonly source).
fn profile_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        ["/etc/profile", "/etc/bash.bashrc", "/etc/bashrc"].iter().map(PathBuf::from).collect();
    if let Ok(entries) = std::fs::read_dir("/etc/profile.d") {
        let mut scripts: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        scripts.sort();
        files.push(PathBuf::from("/etc/profile.d"));
        files.extend(scripts);
    }
    if let Some(home) = std::env::var_os("HOME").filter(|home| !home.is_empty()) {
        let home = PathBuf::from(home);
        for name in [".bash_profile", ".bash_login", ".profile", ".bashrc"] {
            files.push(home.join(name));
        }
    }
    files
}

/// A file's modification time, length and inode; `None` when it does not exist.
type FileStamp = Option<(SystemTime, u64, u64)>;

/// What the profile files looked like: a snapshot is valid while this stays the same.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProfileStamp(Vec<(PathBuf, FileStamp)>);

impl ProfileStamp {
    fn now() -> Self {
        use std::os::unix::fs::MetadataExt;
        let files = profile_files();
        ProfileStamp(
            files
                .into_iter()
                .map(|path| {
                    let seen = std::fs::metadata(&path).ok().map(|meta| {
                        (meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len(), meta.ino())
                    });
                    (path, seen)
                })
                .collect(),
        )
    }
}

/// A login shell's environment, ready to run commands in.
#[derive(Debug)]
pub(crate) struct Snapshot {
    variables: Vec<(OsString, OsString)>,
    /// Functions, aliases and options: a sealed memfd (close-on-exec here), read by bash
    /// through `BASH_ENV`.
    source: File,
}

impl Snapshot {
    /// The value of the variable `name` commands get.
    pub(crate) fn variable(&self, name: &str) -> Option<&std::ffi::OsStr> {
        self.variables.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_os_str())
    }

    /// Gives `command` (a `bash -c`) the snapshot's variables instead of this process's,
    /// and its source through `BASH_ENV`. The snapshot must live until `command` has
    /// been spawned: the child inherits its descriptor.
    pub(crate) fn apply(&self, command: &mut Command) {
        command.env_clear();
        for (name, value) in &self.variables {
            command.env(name, value);
        }
        for name in SHELL_OWN {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        let fd = self.source.as_raw_fd();
        command.env("BASH_ENV", format!("/dev/fd/{fd}"));
        // SAFETY: one fcntl(2) on a descriptor number, in the forked child before exec:
        // the child keeps it across exec (this process's copy stays close-on-exec).
        unsafe {
            command.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// One confinement's snapshot. A failure is not kept: it may be transient (a timeout
/// on a loaded machine), so the next call tries again.
#[derive(Debug)]
struct Entry {
    confinement: Option<SandboxPolicy>,
    stamp: ProfileStamp,
    snapshot: Arc<Snapshot>,
}

/// The snapshots of one session (a worker or `kestrel exec` process), by confinement.
#[derive(Debug, Default)]
pub(crate) struct LoginShell {
    entries: Mutex<Vec<Entry>>,
}

impl LoginShell {
    /// The snapshot for commands confined by `confinement` (`None`: unconfined), taken by
    /// running `capture` (a `bash -lc` of the given script, confined the same way) in
    /// `workdir` when there is none yet or a profile file changed since. `None` when no
    /// snapshot can be had (the caller runs `bash -lc`, and the next call tries again) or
    /// `cancel` fired while taking one (the caller must check `cancel` and run nothing).
    pub(crate) async fn snapshot(
        &self,
        confinement: Option<&SandboxPolicy>,
        workdir: &Path,
        cancel: &CancellationToken,
        capture: impl FnOnce(&str) -> Option<Command>,
    ) -> Option<Arc<Snapshot>> {
        let stamp = ProfileStamp::now();
        if let Ok(entries) = self.entries.lock()
            && let Some(entry) = entries
                .iter()
                .find(|entry| entry.confinement.as_ref() == confinement && entry.stamp == stamp)
        {
            return Some(entry.snapshot.clone());
        }
        let command = capture(CAPTURE_SCRIPT)?;
        let snapshot = match take(command, workdir, cancel).await {
            Taken::Snapshot(snapshot) => Arc::new(snapshot),
            Taken::Failed | Taken::Cancelled => return None,
        };
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|entry| entry.confinement.as_ref() != confinement);
            entries.push(Entry {
                confinement: confinement.cloned(),
                stamp,
                snapshot: snapshot.clone(),
            });
        }
        Some(snapshot)
    }
}

/// How taking a snapshot ended.
enum Taken {
    Snapshot(Snapshot),
    Failed,
    Cancelled,
}

async fn take(command: Command, workdir: &Path, cancel: &CancellationToken) -> Taken {
    match capture(command, workdir, cancel).await {
        Ok(Some(snapshot)) => Taken::Snapshot(snapshot),
        Ok(None) => Taken::Failed,
        Err(Cancelled) => Taken::Cancelled,
    }
}

struct Cancelled;

/// Runs the capture and writes the snapshot's file; `Ok(None)` when that failed.
async fn capture(
    mut command: Command,
    workdir: &Path,
    cancel: &CancellationToken,
) -> Result<Option<Snapshot>, Cancelled> {
    command.current_dir(workdir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    // The profile runs as every command's did: without the credentials of this process.
    kestrel_platform::remove_secret_variables(&mut command);
    let Ok(mut group) = spawn_group(&mut command) else { return Ok(None) };
    let Some(mut stdout) = group.child_mut().stdout.take() else { return Ok(None) };
    let read = async {
        let mut output = Vec::new();
        let mut chunk = vec![0; 64 * 1024];
        // Up to the end marker: something the profile started may hold the pipe open.
        while !output.ends_with(END) && output.len() < MAX_CAPTURE_BYTES {
            match stdout.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(read) => output.extend_from_slice(&chunk[..read]),
            }
        }
        let status = group.wait().await;
        (output, status)
    };
    let ended = tokio::select! {
        done = tokio::time::timeout(CAPTURE_TIMEOUT, read) => done.ok(),
        () = cancel.cancelled() => {
            let _ = group.signal(kestrel_platform::Signal::Kill);
            return Err(Cancelled);
        }
    };
    let Some((output, Ok(status))) = ended else {
        // Timed out (or could not be waited for): the profile and what it started go.
        let _ = group.signal(kestrel_platform::Signal::Kill);
        return Ok(None);
    };
    if !status.success() {
        return Ok(None);
    }
    let Some(captured) = Captured::parse(&output) else { return Ok(None) };
    let Ok(source) = captured.sealed_source() else { return Ok(None) };
    Ok(Some(Snapshot { variables: captured.variables, source }))
}

/// What the capture printed.
#[derive(Debug, PartialEq, Eq)]
struct Captured {
    variables: Vec<(OsString, OsString)>,
    /// The login shell's own `BASH_ENV`, given back to the command by the file.
    bash_env: Option<OsString>,
    /// Functions, aliases, options and the umask, as bash source.
    source: Vec<u8>,
}

impl Captured {
    /// Reads the capture's output, whatever the profile printed before it. `None` when
    /// the output is cut short.
    fn parse(output: &[u8]) -> Option<Captured> {
        let start = find_last(output, START)? + START.len();
        let body = output[start..].strip_suffix(END)?;
        let mut sections = body.split(|&byte| byte == 0);
        let mut variables = Vec::new();
        let mut bash_env = None;
        for entry in sections.by_ref() {
            if entry.is_empty() {
                break;
            }
            let split = entry.iter().position(|&byte| byte == b'=')?;
            let name = OsStr::from_bytes(&entry[..split]);
            let value = OsString::from_vec(entry[split + 1..].to_vec());
            let Some(text) = name.to_str() else { continue };
            if text == "BASH_ENV" {
                bash_env = Some(value);
            } else if !is_secret_name(text) && !SHELL_OWN.contains(&text) {
                variables.push((name.to_os_string(), value));
            }
        }
        let parse_options = sections.next()?;
        let functions = sections.next()?;
        let aliases = sections.next()?;
        let options = sections.next()?;
        let mut source = Vec::new();
        for part in [parse_options, functions, aliases, options] {
            source.extend_from_slice(part);
            if !part.ends_with(b"\n") {
                source.push(b'\n');
            }
        }
        Some(Captured { variables, bash_env, source })
    }

    /// The source `BASH_ENV` names, in a memfd sealed against any change.
    fn sealed_source(&self) -> std::io::Result<File> {
        let mut text = b"# The login shell's functions, aliases and options, taken by Kestrel \
for its shell tool's commands (read through BASH_ENV).\nunset BASH_ENV\n"
            .to_vec();
        if let Some(value) = &self.bash_env {
            text.extend_from_slice(b"export BASH_ENV=");
            text.extend_from_slice(&single_quoted(value.as_bytes()));
            text.push(b'\n');
        }
        text.extend_from_slice(&self.source);
        // SAFETY: memfd_create takes a NUL-terminated name and flags; the descriptor it
        // returns is owned by the File from here on.
        let mut file = unsafe {
            let fd = libc::memfd_create(
                c"kestrel-login-shell".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            );
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            File::from_raw_fd(fd)
        };
        file.write_all(&text)?;
        let seals =
            libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
        // SAFETY: fcntl(2) on a descriptor the File owns.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(file)
    }
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|window| window == needle)
}

/// `value` as one single-quoted shell word.
fn single_quoted(value: &[u8]) -> Vec<u8> {
    let mut quoted = vec![b'\''];
    for &byte in value {
        if byte == b'\'' {
            quoted.extend_from_slice(b"'\\''");
        } else {
            quoted.push(byte);
        }
    }
    quoted.push(b'\'');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(variables: &[&str], rest: &str) -> Vec<u8> {
        let mut output = b"profile noise\n".to_vec();
        output.extend_from_slice(START);
        for variable in variables {
            output.extend_from_slice(variable.as_bytes());
            output.push(0);
        }
        output.push(0);
        output.extend_from_slice(rest.as_bytes());
        output.extend_from_slice(END);
        output
    }

    #[test]
    fn parse_keeps_variables_but_secrets_and_the_shells_own() {
        let text = output(
            &["PATH=/opt/x/bin:/usr/bin", "GH_TOKEN=abc", "SHLVL=2", "EMPTY=", "BASH_ENV=/e"],
            "shopt -s extglob\n\0f () \n{ \n    echo f\n}\n\0alias ll='ls -l'\n\0shopt -u expand_aliases\numask 0022\n",
        );
        let captured = Captured::parse(&text).unwrap();
        let names: Vec<_> = captured.variables.iter().map(|(name, _)| name.clone()).collect();
        assert_eq!(names, ["PATH", "EMPTY"]);
        assert_eq!(captured.bash_env.as_deref(), Some(OsStr::new("/e")));
        let source = String::from_utf8(captured.source).unwrap();
        assert!(source.starts_with("shopt -s extglob\n"), "{source}");
        assert!(
            source.contains("echo f")
                && source.contains("alias ll=")
                && source.ends_with("umask 0022\n")
        );
    }

    #[test]
    fn parse_refuses_output_cut_short() {
        let mut text = output(&["PATH=/usr/bin"], "\0\0\0");
        text.truncate(text.len() - 3);
        assert_eq!(Captured::parse(&text), None);
        assert_eq!(Captured::parse(b"no marker at all"), None);
    }

    #[test]
    fn the_sealed_source_reads_back_and_refuses_writes() {
        let captured = Captured {
            variables: Vec::new(),
            bash_env: Some(OsString::from("/it's")),
            source: b"f () { :; }\n".to_vec(),
        };
        let source = captured.sealed_source().unwrap();
        let path = format!("/dev/fd/{}", source.as_raw_fd());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("unset BASH_ENV\nexport BASH_ENV='/it'\\''s'\nf () { :; }\n"),
            "{text}"
        );
        let mut writer = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        assert!(writer.write_all(b"echo planted\n").is_err(), "a sealed source took a write");
    }

    #[test]
    fn single_quoted_survives_quotes() {
        assert_eq!(single_quoted(b"it's"), b"'it'\\''s'".to_vec());
    }
}
