//! Whether a process, or a process group, existed at a given moment: what tells a pid or
//! a group id written to a file apart from a new process that reuses the number since
//! (after pid wrap-around or a reboot), before anything is signalled on the file's word.

use std::time::SystemTime;

/// True when process `pid` runs and started no later than `moment`: it is the process
/// that held that pid then. False when no such process runs, or it is a newer one (and
/// off Linux, where start times are not read, true whenever it runs).
pub fn process_started_by(pid: u32, moment: SystemTime) -> bool {
    imp::process_started_by(pid, moment)
}

/// True when some member of process group `group` started no later than `moment`: the
/// group is the one that had that id then (a group id is not reused while any member of
/// the old group lives). Off Linux: whether the group exists at all.
pub fn group_started_by(group: u32, moment: SystemTime) -> bool {
    imp::group_started_by(group, moment)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::time::{Duration, SystemTime};

    /// How much later than the moment a process may have started and still count: a
    /// file's time comes from a coarse clock (up to a scheduler tick behind the write)
    /// and start times are rounded to clock ticks, so a list written right after its
    /// process was spawned can look older than it. No pid comes round again that fast.
    const SLACK: Duration = Duration::from_millis(250);

    pub fn process_started_by(pid: u32, moment: SystemTime) -> bool {
        let Some(limit) = ticks_since_boot(moment + SLACK) else { return false };
        stat(pid).is_some_and(|stat| stat.started <= limit)
    }

    pub fn group_started_by(group: u32, moment: SystemTime) -> bool {
        let Some(limit) = ticks_since_boot(moment + SLACK) else { return false };
        let Ok(entries) = std::fs::read_dir("/proc") else { return false };
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(stat)
            .any(|stat| stat.group == group && stat.started <= limit)
    }

    struct Stat {
        group: u32,
        /// Clock ticks after boot.
        started: u64,
    }

    /// Fields 5 (pgrp) and 22 (starttime) of /proc/PID/stat; the command name before
    /// them may hold spaces and parentheses, so fields are counted from its last `)`.
    fn stat(pid: u32) -> Option<Stat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
        Some(Stat { group: fields.get(2)?.parse().ok()?, started: fields.get(19)?.parse().ok()? })
    }

    /// `moment` in clock ticks after boot (the unit of a process's start time); `None`
    /// for a moment before this boot.
    fn ticks_since_boot(moment: SystemTime) -> Option<u64> {
        let boot = SystemTime::now().checked_sub(clock(libc::CLOCK_BOOTTIME)?)?;
        let since = moment.duration_since(boot).ok()?;
        // SAFETY: sysconf only reads a system setting.
        let per_second = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
        u64::try_from(since.as_nanos() * u128::from(per_second) / 1_000_000_000).ok()
    }

    fn clock(id: libc::clockid_t) -> Option<Duration> {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes into the struct we pass and nothing else.
        if unsafe { libc::clock_gettime(id, &raw mut now) } != 0 {
            return None;
        }
        Some(Duration::new(u64::try_from(now.tv_sec).ok()?, u32::try_from(now.tv_nsec).ok()?))
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::time::SystemTime;

    pub fn process_started_by(pid: u32, _moment: SystemTime) -> bool {
        #[cfg(unix)]
        {
            // SAFETY: signal 0 only checks that the process exists.
            libc::pid_t::try_from(pid)
                .is_ok_and(|pid| pid > 0 && unsafe { libc::kill(pid, 0) } == 0)
        }
        #[cfg(not(unix))]
        {
            let _ = pid;
            false
        }
    }

    pub fn group_started_by(group: u32, _moment: SystemTime) -> bool {
        crate::process::group_exists(group)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn this_process_started_before_now_and_not_before_boot() {
        let me = std::process::id();
        assert!(process_started_by(me, SystemTime::now()));
        assert!(!process_started_by(me, SystemTime::now() - Duration::from_secs(86_400 * 365)));
        // SAFETY: getpgrp only reads this process's group id.
        let group = unsafe { libc::getpgrp() } as u32;
        assert!(group_started_by(group, SystemTime::now()));
        assert!(!group_started_by(group, SystemTime::UNIX_EPOCH));
    }
}
