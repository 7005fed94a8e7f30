//! `rusage OUT.json PROGRAM ARGS...`: runs PROGRAM with the helper's stdio, waits for it
//! with wait4, writes {"wall_ms","user_ms","sys_ms","maxrss_kb","exit_code"} to OUT.json
//! and exits with the program's exit code.
//!
//! Why a helper: Linux keeps a process's peak RSS across exec, so a program forked from
//! Python starts with Python's ~15 MB as its "peak". Spawned from this small process, the
//! inherited floor is this helper's ~1-2 MB instead. Built by bench/run.py with plain
//! `rustc -O` (no crates), so it is not part of the workspace or of CI.

use std::io::Write;
use std::process::Command;
use std::time::Instant;

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
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let [out, program, rest @ ..] = arguments.as_slice() else {
        eprintln!("usage: rusage OUT.json PROGRAM ARGS...");
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
    // The child was reaped by wait4 above: std must not wait for it again.
    std::mem::forget(child);
    let exit_code = if status & 0x7f == 0 { (status >> 8) & 0xff } else { 128 + (status & 0x7f) };
    let json = format!(
        "{{\"wall_ms\":{wall_ms},\"user_ms\":{},\"sys_ms\":{},\"maxrss_kb\":{},\"exit_code\":{exit_code}}}\n",
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
