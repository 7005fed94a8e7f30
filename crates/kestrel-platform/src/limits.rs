//! The open-file limit (RLIMIT_NOFILE) of a process that holds a descriptor per child:
//! raised to the hard limit for the process itself, the old soft limit given back to its
//! children (programs that use `select()` break past descriptor 1024), and the count of
//! descriptors in use, for an error that says how close the process is.

use std::io;

/// The open-file limit before and after [`raise_open_file_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileLimit {
    /// The soft limit the process started with (what its children get back).
    pub before: u64,
    /// The soft limit now: the hard limit when it could be raised.
    pub now: u64,
    /// The hard limit; `None` when it is unlimited.
    pub hard: Option<u64>,
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit (to the kernel's
/// per-process maximum when the hard limit is unlimited). A limit that cannot be raised
/// is left as it was: `now == before`. Fails only when the limit cannot be read.
pub fn raise_open_file_limit() -> io::Result<OpenFileLimit> {
    imp::raise()
}

/// The number of descriptors this process has open. Fails where it cannot be counted.
pub fn open_descriptors() -> io::Result<usize> {
    imp::open_descriptors()
}

/// True when `error` says this process (EMFILE) or the whole system (ENFILE) has no
/// descriptor left.
pub fn out_of_files(error: &io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
    }
    #[cfg(not(unix))]
    {
        let _ = error;
        false
    }
}

#[cfg(unix)]
mod imp {
    use super::OpenFileLimit;
    use std::io;

    fn get() -> io::Result<libc::rlimit> {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes into the struct we pass and nothing else.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(limit)
    }

    fn set(soft: libc::rlim_t, hard: libc::rlim_t) -> io::Result<()> {
        let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
        // SAFETY: setrlimit reads the struct we pass and nothing else.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn finite(value: libc::rlim_t) -> Option<u64> {
        (value != libc::RLIM_INFINITY).then_some(wide(value))
    }

    // rlim_t is u64 on Linux and macOS, but not on every Unix.
    #[allow(clippy::unnecessary_cast)]
    fn wide(value: libc::rlim_t) -> u64 {
        value as u64
    }

    pub fn raise() -> io::Result<OpenFileLimit> {
        let limit = get()?;
        let before = limit.rlim_cur;
        let hard = finite(limit.rlim_max);
        // An unlimited hard limit still has a ceiling: the kernel's per-process maximum.
        let target = match hard {
            Some(_) => limit.rlim_max,
            None => kernel_maximum().unwrap_or(before),
        };
        if target > before && set(target, limit.rlim_max).is_err() {
            return Ok(OpenFileLimit { before: wide(before), now: wide(before), hard });
        }
        let now = get().map(|limit| limit.rlim_cur).unwrap_or(before);
        Ok(OpenFileLimit { before: wide(before), now: wide(now), hard })
    }

    #[cfg(target_os = "linux")]
    fn kernel_maximum() -> Option<libc::rlim_t> {
        std::fs::read_to_string("/proc/sys/fs/nr_open").ok()?.trim().parse().ok()
    }

    #[cfg(not(target_os = "linux"))]
    fn kernel_maximum() -> Option<libc::rlim_t> {
        // macOS refuses more than OPEN_MAX for RLIMIT_NOFILE.
        Some(10_240)
    }

    /// In a child between fork and exec: the soft limit back to `soft`.
    #[allow(clippy::unnecessary_cast)]
    pub fn restore_in_child(soft: u64) -> io::Result<()> {
        let limit = get()?;
        set((soft as libc::rlim_t).min(limit.rlim_max), limit.rlim_max)
    }

    pub fn open_descriptors() -> io::Result<usize> {
        let directory = if cfg!(target_os = "linux") { "/proc/self/fd" } else { "/dev/fd" };
        // Less the descriptor that reads the directory itself.
        Ok(std::fs::read_dir(directory)?.count().saturating_sub(1))
    }
}

#[cfg(not(unix))]
mod imp {
    use super::OpenFileLimit;
    use std::io;

    fn unsupported() -> io::Error {
        io::Error::new(io::ErrorKind::Unsupported, "RLIMIT_NOFILE is a Unix limit")
    }

    pub fn raise() -> io::Result<OpenFileLimit> {
        Err(unsupported())
    }

    pub fn open_descriptors() -> io::Result<usize> {
        Err(unsupported())
    }
}

#[cfg(unix)]
pub(crate) use imp::restore_in_child;

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn raising_reaches_the_hard_limit_and_descriptors_are_counted() {
        let limit = raise_open_file_limit().unwrap();
        assert!(limit.now >= limit.before);
        if let Some(hard) = limit.hard {
            assert_eq!(limit.now, hard, "{limit:?}");
        }
        // Other tests open files meanwhile: only a floor is certain (stdio and this one).
        let _file = std::fs::File::open("/dev/null").unwrap();
        assert!(open_descriptors().unwrap() >= 4);
    }
}
