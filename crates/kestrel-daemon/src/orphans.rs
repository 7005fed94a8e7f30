//! Process groups left behind by workers no daemon supervises. A worker lists the groups
//! of its shell commands and MCP servers in `run/worker-<pid>.groups`; when it dies its
//! supervisor kills them. When the worker and its daemon die together (`kill -9` of both,
//! the OOM killer), nobody does, and the commands run for good. A starting daemon (the
//! only one of this home: it holds the pid lock) therefore sweeps the lists whose worker
//! is gone. A list is the word of the process that wrote it only while that process
//! runs: a pid or group id that a newer process reuses is left alone (start times), and
//! a list whose worker still runs (winding down after its daemon died) is looked at
//! again once, later.

use crate::log::DaemonLog;
use kestrel_platform::{Signal, kill_groups_listed_in, process_started_by};
use kestrel_store::KestrelHome;
use std::path::{Path, PathBuf};

/// How long after start the lists of workers that were still running are looked at again.
pub(crate) const SECOND_LOOK: std::time::Duration = std::time::Duration::from_secs(10);

/// Kills the groups listed by every worker of `home` that is gone and removes its list.
/// Returns how many lists belong to workers that still run.
pub(crate) fn sweep(home: &KestrelHome, log: &DaemonLog) -> usize {
    let Ok(entries) = std::fs::read_dir(home.run_dir()) else { return 0 };
    let mut running = 0;
    for path in entries.flatten().map(|entry| entry.path()) {
        let Some((pid, staging)) = listed_worker(home, &path) else { continue };
        let Ok(written) = std::fs::metadata(&path).and_then(|metadata| metadata.modified()) else {
            continue;
        };
        if process_started_by(pid, written) {
            running += 1;
            continue;
        }
        if staging {
            // A list the worker was replacing when it died; the list itself is swept.
            let _ = std::fs::remove_file(&path);
            continue;
        }
        match kill_groups_listed_in(&path, Signal::Kill) {
            Ok(0) => log.line(format!("removed the process group list of worker {pid} (gone)")),
            Ok(killed) => log.line(format!(
                "killed {killed} process group(s) left running by worker {pid}, which no daemon supervised"
            )),
            Err(error) => log.line(format!("cannot sweep {}: {error}", path.display())),
        }
    }
    running
}

/// The worker pid a file of the run directory is the group list of (`true`: its
/// staging copy), as `KestrelHome::worker_groups_file` names them.
fn listed_worker(home: &KestrelHome, path: &Path) -> Option<(u32, bool)> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("worker-")?;
    let (number, staging) = match rest.strip_suffix(".groups.tmp") {
        Some(number) => (number, true),
        None => (rest.strip_suffix(".groups")?, false),
    };
    let pid: u32 = number.parse().ok()?;
    let list: PathBuf = home.worker_groups_file(pid);
    let expected = if staging {
        let mut staged = list.into_os_string();
        staged.push(".tmp");
        PathBuf::from(staged)
    } else {
        list
    };
    (expected == path).then_some((pid, staging))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_worker_group_lists_are_recognised() {
        let home = KestrelHome::at(std::path::Path::new("/h"));
        let run = home.run_dir();
        assert_eq!(listed_worker(&home, &run.join("worker-42.groups")), Some((42, false)));
        assert_eq!(listed_worker(&home, &run.join("worker-42.groups.tmp")), Some((42, true)));
        assert_eq!(listed_worker(&home, &run.join("worker-x.groups")), None);
        assert_eq!(listed_worker(&home, &run.join("daemon.pid")), None);
        assert_eq!(listed_worker(&home, Path::new("/elsewhere/worker-42.groups")), None);
    }

    #[test]
    fn a_list_whose_worker_runs_is_left_and_a_dead_workers_groups_are_killed() {
        let dir = tempfile::tempdir().unwrap();
        let home = KestrelHome::at(dir.path());
        std::fs::create_dir_all(home.run_dir()).unwrap();
        let log = DaemonLog::open(&dir.path().join("daemon.log"));
        // This test process plays a worker that still runs.
        let mine = home.worker_groups_file(std::process::id());
        std::fs::write(&mine, "").unwrap();
        // A dead worker (a child that exited) that left a sleeping group behind.
        let mut sleeper =
            std::process::Command::new("setsid").args(["sleep", "60"]).spawn().unwrap();
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = dead.id();
        dead.wait().unwrap();
        // The sleeper has made its own group by the time the list is written.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let theirs = home.worker_groups_file(dead_pid);
        std::fs::write(&theirs, format!("{}\n", sleeper.id())).unwrap();
        assert_eq!(sweep(&home, &log), 1, "one list's worker still runs");
        assert!(mine.exists());
        assert!(!theirs.exists());
        let status = sleeper.wait().unwrap();
        assert!(!status.success(), "the listed group was killed: {status:?}");
    }
}
