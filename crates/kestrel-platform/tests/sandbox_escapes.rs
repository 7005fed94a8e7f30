//! Escapes a security review reproduced, each tried for real under both Linux backends:
//! unix sockets (the daemon's, Docker's), `/proc/<pid>/root` of a host process, the
//! controlling terminal (TIOCSTI), root's capabilities, chmod/utimes outside the
//! writable roots, and `.git` / Kestrel's own state inside the workspace. Some checks
//! need a second process: this test binary runs itself as the helper (`zz_helper`,
//! a no-op in a normal run). Directories live outside /tmp (`support/unconfined.rs`),
//! because /tmp is writable in the sandbox.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// (The helper role prints its findings for the test that started it.)

mod support;

use kestrel_platform::{MetadataWatch, Sandbox, SandboxPolicy, shell_command};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::process::Stdio;
use support::{backends, output_of, run, run_in_workspace, scratch};

/// Set for a run of this binary as a helper; the value is the role.
const HELPER: &str = "KESTREL_SANDBOX_TEST_HELPER";

/// `this test binary --exact zz_helper` as shell words, for a sandboxed script.
fn helper_command_line() -> String {
    let exe = std::env::current_exe().unwrap();
    format!("'{}' --exact zz_helper --nocapture --test-threads=1", exe.display())
}

/// The helper roles. `connect`: tries the unix sockets named in the environment and
/// prints one line each. `tty`: runs `/dev/tty`-opening script under the backend named
/// in the environment (or unsandboxed) and prints its output; the test starts it with a
/// controlling terminal.
#[test]
fn zz_helper() {
    let Ok(role) = std::env::var(HELPER) else { return };
    match role.as_str() {
        "connect" => connect_role(),
        "tty" => tty_role(),
        other => panic!("unknown helper role {other}"),
    }
}

fn describe<T>(result: std::io::Result<T>) -> String {
    match result {
        Ok(_) => "connected".into(),
        Err(error) => format!("refused ({error})"),
    }
}

fn connect_role() {
    if let Ok(path) = std::env::var("KESTREL_TEST_SOCKET") {
        println!("path socket: {}", describe(UnixStream::connect(path)));
    }
    if let Ok(name) = std::env::var("KESTREL_TEST_ABSTRACT") {
        use std::os::linux::net::SocketAddrExt;
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
        println!("abstract socket: {}", describe(UnixStream::connect_addr(&address)));
    }
    let byte = b'x';
    // SAFETY: TIOCSTI reads one byte from the pointer; stdin is /dev/null (no terminal).
    let injected = unsafe { libc::ioctl(0, libc::TIOCSTI, &byte as *const u8) };
    let injected = if injected == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) };
    println!("tiocsti: {}", describe(injected));
    println!("stream pair: {}", describe(UnixStream::pair()));
    println!("datagram pair: {}", describe(UnixDatagram::pair()));
}

fn tty_role() {
    let backend = std::env::var("KESTREL_TEST_BACKEND").unwrap();
    let script = "if exec 3<>/dev/tty; then echo TTY-OPEN; else echo NO-TTY; fi";
    let command = match backend.as_str() {
        "landlock" => Sandbox::landlock().unwrap().command(script, &SandboxPolicy::read_only(true)),
        "bwrap" => Sandbox::bubblewrap().unwrap().command(script, &SandboxPolicy::read_only(true)),
        _ => Ok(shell_command(script)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (_, output) = runtime.block_on(output_of(command.unwrap()));
    println!("helper output: {output}");
}

#[tokio::test]
async fn a_sandboxed_command_cannot_connect_to_unix_sockets_with_the_network_on_or_off() {
    let dir = scratch();
    let path = dir.path().join("daemon.sock");
    let _listener = UnixListener::bind(&path).unwrap();
    let name = format!("kestrel-sandbox-test-{}", std::process::id());
    let _abstract = {
        use std::os::linux::net::SocketAddrExt;
        let address = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
        UnixListener::bind_addr(&address).unwrap()
    };
    // The helper reaches both sockets when it runs unconfined.
    let mut command = shell_command(&helper_command_line());
    command
        .env(HELPER, "connect")
        .env("KESTREL_TEST_SOCKET", &path)
        .env("KESTREL_TEST_ABSTRACT", &name);
    let (_, output) = output_of(command).await;
    assert!(output.contains("path socket: connected"), "{output}");
    assert!(output.contains("tiocsti: refused (Inappropriate ioctl"), "{output}");
    assert!(output.contains("abstract socket: connected"), "{output}");

    for sandbox in backends() {
        for network in [false, true] {
            let label = format!("{} network={network}", sandbox.describe());
            let workspace = scratch();
            let mut command = sandbox
                .command(
                    &helper_command_line(),
                    &SandboxPolicy::workspace_write(workspace.path(), network),
                )
                .unwrap();
            command
                .current_dir(workspace.path())
                .env(HELPER, "connect")
                .env("KESTREL_TEST_SOCKET", &path)
                .env("KESTREL_TEST_ABSTRACT", &name);
            let (_, output) = output_of(command).await;
            assert!(output.contains("path socket: refused"), "{label}: {output}");
            assert!(output.contains("abstract socket: refused"), "{label}: {output}");
            assert!(
                output.contains("stream pair: connected"),
                "{label}: pairs reach no one: {output}"
            );
            assert!(output.contains("datagram pair: refused"), "{label}: {output}");
            // Refused by the filter (EPERM), not only for want of a terminal (ENOTTY).
            assert!(
                output.contains("tiocsti: refused (Operation not permitted"),
                "{label}: {output}"
            );
        }
    }
}

#[tokio::test]
async fn a_sandboxed_command_cannot_write_through_proc_root_of_or_signal_another_process() {
    let parent = std::process::id();
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        let outside = scratch();
        let script = format!(
            "for pid in 1 {parent}; do echo x > /proc/$pid/root{0}/escape-$pid && echo WROTE-$pid; done; \
             kill -0 {parent} && echo SIGNALLED; echo PIDS $(ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' ')",
            outside.path().display()
        );
        let (_, output) = run_in_workspace(&sandbox, workspace.path(), &script).await;
        assert!(!output.contains("WROTE"), "{name}: {output}");
        // Nor can it signal a process outside (Landlock scope; bwrap: not even visible).
        assert!(!output.contains("SIGNALLED"), "{name}: {output}");
        assert!(!outside.path().join("escape-1").exists(), "{name}");
        assert!(!outside.path().join(format!("escape-{parent}")).exists(), "{name}");
        if name.starts_with("bubblewrap") {
            // Its own PID namespace: only the sandbox's few processes are listed.
            let pids =
                output.lines().find_map(|line| line.strip_prefix("PIDS ")).unwrap_or_default();
            let pids: Vec<u32> = pids.split_whitespace().map(|pid| pid.parse().unwrap()).collect();
            assert!(!pids.is_empty() && pids.len() < 10, "{name}: {output}");
            assert!(!pids.contains(&parent), "{name}: the test process is visible: {output}");
        }
    }
}

/// A pty whose slave becomes the controlling terminal of the helper started with it.
fn open_pty() -> (std::fs::File, std::ffi::CString) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain libc calls on a fresh descriptor and a local buffer.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(master >= 0);
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let name = std::ffi::CStr::from_ptr(name.as_ptr()).to_owned();
        (std::fs::File::from_raw_fd(master), name)
    }
}

#[test]
fn commands_have_no_controlling_terminal_sandboxed_or_not() {
    for backend in ["none", "landlock", "bwrap"] {
        let (_master, slave) = open_pty();
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "zz_helper", "--nocapture", "--test-threads=1"])
            .env(HELPER, "tty")
            .env("KESTREL_TEST_BACKEND", backend)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        let slave_for_child = slave.clone();
        // SAFETY: system calls only, in the forked child.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                // A new session whose first terminal opened becomes its controlling one.
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let fd = libc::open(slave_for_child.as_ptr(), libc::O_RDWR);
                if fd < 0 || libc::ioctl(fd, libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let output = command.output().unwrap();
        let output = String::from_utf8_lossy(&output.stdout);
        assert!(output.contains("helper output: NO-TTY"), "{backend}: {output}");
    }
    // The check can fail: the helper itself has the terminal.
    let (_master, slave) = open_pty();
    let mut command = std::process::Command::new("bash");
    command.args(["-c", "if exec 3<>/dev/tty; then echo TTY-OPEN; fi"]).stdin(Stdio::null());
    // SAFETY: as above.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            libc::setsid();
            let fd = libc::open(slave.as_ptr(), libc::O_RDWR);
            libc::ioctl(fd, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let output = command.output().unwrap();
    assert!(String::from_utf8_lossy(&output.stdout).contains("TTY-OPEN"));
}

#[tokio::test]
async fn a_sandboxed_command_has_no_capabilities() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        std::fs::write(workspace.path().join("mine.txt"), "x").unwrap();
        let script = "grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status; \
                      chown 12345:12345 mine.txt && echo CHOWNED";
        let (_, output) = run_in_workspace(&sandbox, workspace.path(), script).await;
        for set in ["CapEff", "CapPrm", "CapAmb"] {
            assert!(output.contains(&format!("{set}:\t0000000000000000")), "{name}: {output}");
        }
        // CAP_CHOWN is gone, for root too.
        assert!(!output.contains("CHOWNED"), "{name}: {output}");
    }
}

#[tokio::test]
async fn mode_and_times_outside_the_writable_roots_cannot_change() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        let outside = scratch();
        let file = outside.path().join("keep.txt");
        std::fs::write(&file, "kept").unwrap();
        let before = std::fs::metadata(&file).unwrap();
        let script = format!(
            "chmod 600 {0} && echo CHMODDED; touch -m -d 2001-01-01 {0} && echo TOUCHED; \
             chmod 600 mine.txt 2>/dev/null; touch mine.txt && chmod 600 mine.txt && echo INSIDE-OK",
            file.display()
        );
        let (_, output) = run_in_workspace(&sandbox, workspace.path(), &script).await;
        assert!(!output.contains("CHMODDED") && !output.contains("TOUCHED"), "{name}: {output}");
        assert!(output.contains("INSIDE-OK"), "{name}: {output}");
        let after = std::fs::metadata(&file).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(before.mode(), after.mode(), "{name}");
        assert_eq!(before.mtime(), after.mtime(), "{name}");
    }
}

#[tokio::test]
async fn a_nested_repository_two_and_three_levels_down_stays_read_only() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        for repo in ["a/b", "a/b/c"] {
            std::fs::create_dir_all(workspace.path().join(repo).join(".git")).unwrap();
            std::fs::write(workspace.path().join(repo).join(".git/config"), "").unwrap();
        }
        let script = "for r in a/b a/b/c; do echo '[core] fsmonitor = touch PWNED' >> $r/.git/config \
                      && echo WROTE-$r; done; echo x > a/b/ok.txt && echo INSIDE-OK";
        let (_, output) = run_in_workspace(&sandbox, workspace.path(), script).await;
        assert!(!output.contains("WROTE"), "{name}: {output}");
        assert!(output.contains("INSIDE-OK"), "{name}: {output}");
        for repo in ["a/b", "a/b/c"] {
            let config = workspace.path().join(repo).join(".git/config");
            assert_eq!(std::fs::read_to_string(config).unwrap(), "", "{name}: {repo}");
        }
    }
}

#[tokio::test]
async fn many_files_do_not_switch_off_nested_git_protection() {
    let workspace = scratch();
    let root = workspace.path();
    std::fs::create_dir_all(root.join("sub/.git")).unwrap();
    std::fs::write(root.join("sub/.git/config"), "").unwrap();
    // More entries than a counting scan looks at, all before `sub` is listed.
    for index in 0..20_001 {
        std::fs::write(root.join(format!("f{index}")), "").unwrap();
    }
    for sandbox in backends() {
        let name = sandbox.describe();
        let script = "echo '[core] fsmonitor = touch PWNED' >> sub/.git/config && echo WROTE;              echo x > sub/ok.txt && echo INSIDE-OK";
        let (_, output) = run_in_workspace(&sandbox, root, script).await;
        assert!(!output.contains("WROTE"), "{name}: {output}");
        assert!(output.contains("INSIDE-OK"), "{name}: {output}");
        assert_eq!(std::fs::read_to_string(root.join("sub/.git/config")).unwrap(), "", "{name}");
    }
}

#[tokio::test]
async fn the_git_directory_a_dot_git_file_names_inside_the_workspace_stays_read_only() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        let root = workspace.path();
        std::fs::create_dir_all(root.join("gd/hooks")).unwrap();
        std::fs::write(root.join("gd/config"), "").unwrap();
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::write(root.join("wt/.git"), "gitdir: ../gd\n").unwrap();
        std::fs::create_dir_all(root.join("abs")).unwrap();
        std::fs::create_dir_all(root.join("gd2")).unwrap();
        std::fs::write(root.join("gd2/config"), "").unwrap();
        let gd2 = root.join("gd2");
        std::fs::write(root.join("abs/.git"), format!("gitdir: {}\n", gd2.display())).unwrap();
        let (_, output) = run_in_workspace(
            &sandbox,
            root,
            "echo '[core] fsmonitor = touch PWNED' >> gd/config && echo WROTE-1; \
             touch gd/hooks/post-index-change && echo WROTE-2; \
             echo '[core] pager = x' >> gd2/config && echo WROTE-3; \
             echo x > wt/ok.txt && echo INSIDE-OK",
        )
        .await;
        assert!(!output.contains("WROTE"), "{name}: {output}");
        assert!(output.contains("INSIDE-OK"), "{name}: {output}");
    }
}

#[tokio::test]
async fn git_and_kestrel_metadata_a_command_creates_are_reported_by_the_watch() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        std::fs::create_dir_all(workspace.path().join("x/y")).unwrap();
        let watch = MetadataWatch::start(workspace.path());
        let script = "mkdir -p .git .kestrel x/y/.git && echo MADE";
        let (_, output) = run_in_workspace(&sandbox, workspace.path(), script).await;
        assert!(output.contains("MADE"), "{name}: {output}");
        let expected: Vec<_> =
            [".git", ".kestrel", "x/y/.git"].iter().map(|p| workspace.path().join(p)).collect();
        assert_eq!(watch.created(), expected, "{name}");
        // Once there, the next command's policy keeps them read-only.
        let (_, output) = run_in_workspace(
            &sandbox,
            workspace.path(),
            "touch .git/config && echo WROTE; touch x/y/.git/config && echo WROTE",
        )
        .await;
        assert!(!output.contains("WROTE"), "{name}: {output}");
    }
}

#[tokio::test]
async fn git_and_kestrel_state_inside_the_workspace_stay_read_only() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        let root = workspace.path();
        for dir in [".git/hooks", ".kestrel", "nested/.git", "home/run"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        let policy = SandboxPolicy::workspace_write(root, false).protect(&root.join("home"));
        let script = "for target in .git/hooks/post-commit .git/config .kestrel/config.toml \
                      nested/.git/config home/config.toml; do \
                      echo evil > $target && echo WROTE $target; done; \
                      rm -rf .git && echo REMOVED; mv nested/.git nested/git && echo MOVED; \
                      echo fine > src.txt && mkdir -p nested/src && echo ok > nested/src/a && echo WORKSPACE-OK";
        let (_, output) = run(&sandbox, &policy, root, script).await;
        assert!(!output.contains("WROTE"), "{name}: {output}");
        assert!(!output.contains("REMOVED") && !output.contains("MOVED"), "{name}: {output}");
        assert!(output.contains("WORKSPACE-OK"), "{name}: {output}");
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n",
            "{name}"
        );
        assert!(!root.join(".git/hooks/post-commit").exists(), "{name}");
        assert!(!root.join("home/config.toml").exists(), "{name}");
    }
}

#[test]
fn protected_paths_are_those_beneath_a_writable_root() {
    let workspace = scratch();
    std::fs::create_dir(workspace.path().join(".git")).unwrap();
    let elsewhere = scratch();
    let policy = SandboxPolicy::workspace_write(workspace.path(), false).protect(elsewhere.path());
    let paths = policy.protected_paths();
    assert_eq!(paths, vec![workspace.path().join(".git").canonicalize().unwrap()]);
}
