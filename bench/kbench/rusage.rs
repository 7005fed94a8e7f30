//! `rusage [--hwm] OUT.json PROGRAM ARGS...`: runs PROGRAM with the helper's stdio, waits
//! for it with wait4, writes {"wall_ms","user_ms","sys_ms","maxrss_kb","exit_code"} to
//! OUT.json and exits with the program's exit code. With `--hwm` it also reads PROGRAM's
//! own `VmHWM` from /proc every 5 ms while it runs and adds the last value read as
//! "hwm_kb": wait4's maxrss is the largest of the process *and its waited-for children*
//! (a `git` the program ran counts), VmHWM is the process's alone. It adds "self_cpu_ms"
//! too, the program's own user + sys time from /proc/PID/stat (its children's left out),
//! as last read (5 ms resolution at the end).
//!
//! Why a helper: Linux keeps a process's peak RSS across exec, so a program forked from
//! Python starts with Python's ~15 MB as its "peak". Spawned from this small process, the
//! inherited floor is this helper's ~1-2 MB instead. Built by bench/run.py with plain
//! `rustc -O` (no crates), so it is not part of the workspace or of CI.

use std::io::Write;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

#[repr(C)]
struct Timeval {
    seconds: i64,
    microseconds: i64,
}

#[repr(C)]
struct Rusage {
    user: Timeval,
    system: Timeval,
    maxrss_kb: i64,
    rest: [i64; 13],
}

unsafe extern "C" {
    fn wait4(pid: i32, status: *mut i32, options: i32, usage: *mut Rusage) -> i32;
}

fn millis(time: &Timeval) -> f64 {
    time.seconds as f64 * 1000.0 + time.microseconds as f64 / 1000.0
}

fn main() {
    let mut arguments: Vec<String> = std::env::args().skip(1).collect();
    let poll_hwm = arguments.first().is_some_and(|first| first == "--hwm");
    if poll_hwm {
        arguments.remove(0);
    }
    let [out, program, rest @ ..] = arguments.as_slice() else {
        eprintln!("usage: rusage [--hwm] OUT.json PROGRAM ARGS...");
        std::process::exit(2);
    };
    let started = Instant::now();
    let child = match Command::new(program).args(rest).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("rusage: cannot start {program}: {error}");
            std::process::exit(127);
        }
    };
    let pid = child.id() as i32;
    let hwm_kb = Arc::new(AtomicI64::new(-1));
    let self_ticks = Arc::new(AtomicI64::new(-1));
    let done = Arc::new(AtomicBool::new(false));
    let poller = poll_hwm.then(|| {
        let (hwm_kb, self_ticks, done) = (hwm_kb.clone(), self_ticks.clone(), done.clone());
        std::thread::spawn(move || {
            let status_path = format!("/proc/{pid}/status");
            let stat_path = format!("/proc/{pid}/stat");
            while !done.load(Ordering::Relaxed) {
                // A zombie's status has no VmHWM line: the last value read stays.
                let status = std::fs::read_to_string(&status_path).ok();
                if let Some(kb) = status.as_deref().and_then(vm_hwm_kb) {
                    hwm_kb.store(kb, Ordering::Relaxed);
                    if let Some(ticks) = std::fs::read_to_string(&stat_path).ok().as_deref().and_then(cpu_ticks) {
                        self_ticks.store(ticks, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    });
    let mut status = 0;
    let mut usage = Rusage {
        user: Timeval { seconds: 0, microseconds: 0 },
        system: Timeval { seconds: 0, microseconds: 0 },
        maxrss_kb: 0,
        rest: [0; 13],
    };
    loop {
        // SAFETY: pid is our child; status and usage point to live, writable values.
        let waited = unsafe { wait4(pid, &mut status, 0, &mut usage) };
        if waited == pid {
            break;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            eprintln!("rusage: wait4 failed: {}", std::io::Error::last_os_error());
            std::process::exit(125);
        }
    }
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    done.store(true, Ordering::Relaxed);
    if let Some(poller) = poller {
        let _ = poller.join();
    }
    // The child was reaped by wait4 above: std must not wait for it again.
    std::mem::forget(child);
    let exit_code = if status & 0x7f == 0 { (status >> 8) & 0xff } else { 128 + (status & 0x7f) };
    let hwm = match (hwm_kb.load(Ordering::Relaxed), self_ticks.load(Ordering::Relaxed)) {
        (kb, ticks) if poll_hwm && kb >= 0 => {
            // USER_HZ is 100 on every Linux this runs on.
            format!(",\"hwm_kb\":{kb},\"self_cpu_ms\":{}", ticks.max(0) * 10)
        }
        _ => String::new(),
    };
    let json = format!(
        "{{\"wall_ms\":{wall_ms},\"user_ms\":{},\"sys_ms\":{},\"maxrss_kb\":{},\"exit_code\":{exit_code}{hwm}}}\n",
        millis(&usage.user),
        millis(&usage.system),
        usage.maxrss_kb
    );
    if let Err(error) = std::fs::File::create(out).and_then(|mut file| file.write_all(json.as_bytes())) {
        eprintln!("rusage: cannot write {out}: {error}");
        std::process::exit(125);
    }
    std::process::exit(exit_code);
}

/// `VmHWM:   1234 kB` of a /proc/PID/status text, in kB.
fn vm_hwm_kb(status: &str) -> Option<i64> {
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// utime + stime (clock ticks) of a /proc/PID/stat text: fields 14 and 15, counted after
/// the `)` that ends the command name (which may hold spaces).
fn cpu_ticks(stat: &str) -> Option<i64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    Some(fields.get(11)?.parse::<i64>().ok()? + fields.get(12)?.parse::<i64>().ok()?)
}
