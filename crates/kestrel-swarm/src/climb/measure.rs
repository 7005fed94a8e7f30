//! Running the metric: each side in a fresh clone of its commit, sandboxed like the
//! verifier (writes only in the clone and the temp dirs, no secret-looking variables,
//! `verify_timeout_s`), one run at a time. Its number is the last non-empty line of its
//! stdout; everything it printed goes to the run's log.

use crate::SwarmError;
use crate::context::Run;
use kestrel_platform::{Sandbox, SandboxPolicy};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Which side of a measurement failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Baseline,
    Experiment,
}

/// Where one measurement works and logs.
pub struct Bench<'a> {
    run: &'a Run,
    metric: &'a str,
    scratch: PathBuf,
    log: PathBuf,
}

impl<'a> Bench<'a> {
    /// A measurement named `name` (its clones under `.measure/`, its log
    /// `logs/<name>-measure.log`).
    pub fn new(run: &'a Run, metric: &'a str, name: &str) -> Bench<'a> {
        Bench {
            run,
            metric,
            scratch: run.workdir.join(".measure").join(name),
            log: run.logs_dir().join(format!("{name}-measure.log")),
        }
    }

    /// `runs` runs on `commit` alone (a baseline's).
    pub async fn alone(
        &self,
        commit: &str,
        runs: u32,
    ) -> Result<Result<Vec<f64>, String>, SwarmError> {
        let clone = self.clone_of(commit, "a").await?;
        let mut values = Vec::new();
        for index in 1..=runs {
            match self.once(&clone, commit, index).await? {
                Ok(value) => values.push(value),
                Err(why) => return Ok(Err(why)),
            }
        }
        self.clean();
        Ok(Ok(values))
    }

    /// `runs` runs of each, interleaved: baseline, experiment, baseline, ...; numbered
    /// in the log after the `done` runs a side of the looks before.
    pub async fn interleaved(
        &self,
        baseline: &str,
        experiment: &str,
        done: u32,
        runs: u32,
    ) -> Result<Result<(Vec<f64>, Vec<f64>), (Side, String)>, SwarmError> {
        let a = self.clone_of(baseline, "a").await?;
        let b = self.clone_of(experiment, "b").await?;
        let (mut values_a, mut values_b) = (Vec::new(), Vec::new());
        for index in done + 1..=done + runs {
            match self.once(&a, baseline, index).await? {
                Ok(value) => values_a.push(value),
                Err(why) => return Ok(Err((Side::Baseline, why))),
            }
            match self.once(&b, experiment, index).await? {
                Ok(value) => values_b.push(value),
                Err(why) => return Ok(Err((Side::Experiment, why))),
            }
        }
        self.clean();
        Ok(Ok((values_a, values_b)))
    }

    fn clean(&self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }

    async fn clone_of(&self, commit: &str, side: &str) -> Result<PathBuf, SwarmError> {
        let clone = self.scratch.join(side);
        let _ = std::fs::remove_dir_all(&clone);
        std::fs::create_dir_all(&self.scratch)
            .map_err(|error| SwarmError::io("cannot create", &self.scratch, error))?;
        self.run.repo.clone_at(&clone, commit).await?;
        Ok(clone)
    }

    /// One run of the metric in `clone`: its number, or why there is none.
    async fn once(
        &self,
        clone: &Path,
        commit: &str,
        index: u32,
    ) -> Result<Result<f64, String>, SwarmError> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|error| SwarmError::io("cannot open the log", &self.log, error))?;
        let short = commit.get(..10).unwrap_or(commit);
        let header = format!("$ {}   (run {index}, commit {short})", self.metric);
        writeln!(log, "{header}")
            .map_err(|error| SwarmError::io("cannot write", &self.log, error))?;
        let out_path = self.scratch.join("stdout");
        let out = File::create(&out_path)
            .map_err(|error| SwarmError::io("cannot create", &out_path, error))?;
        let outcome = self.spawn(clone, out, &log).await?;
        let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
        let _ = log.write_all(stdout.as_bytes());
        let result = outcome.and_then(|()| parse_number(&stdout));
        let line = match &result {
            Ok(value) => format!("=> {value}"),
            Err(why) => format!("=> {why}"),
        };
        writeln!(log, "{line}")
            .map_err(|error| SwarmError::io("cannot write", &self.log, error))?;
        Ok(result.map_err(|why| {
            format!("the metric `{}` {why} (log: {})", self.metric, self.log.display())
        }))
    }

    async fn spawn(
        &self,
        clone: &Path,
        out: File,
        log: &File,
    ) -> Result<Result<(), String>, SwarmError> {
        let sandbox = Sandbox::detect(self.run.network).map_err(|error| {
            SwarmError::Usage(format!("the metric runs in the OS sandbox, and {error}"))
        })?;
        let policy = SandboxPolicy::workspace_write(clone, self.run.network);
        let command = match sandbox.command(self.metric, &policy) {
            Ok(command) => command,
            Err(error) => return Ok(Err(format!("cannot be sandboxed: {error}"))),
        };
        let timeout = self.run.verify_timeout;
        crate::verify::run_one(command, clone, Some(out), log, &self.log, timeout).await
    }
}

/// The number on the last non-empty line of `stdout`.
pub fn parse_number(stdout: &str) -> Result<f64, String> {
    let Some(line) = stdout.lines().rev().map(str::trim).find(|line| !line.is_empty()) else {
        return Err("printed nothing on stdout (its last line must be a number)".to_string());
    };
    match line.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok(value),
        _ => Err(format!("printed no number: its last line is `{}`", cut(line, 80))),
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    text.chars().take(max).collect::<String>() + "…"
}

#[cfg(test)]
mod tests {
    use super::parse_number;

    #[test]
    fn the_number_is_the_last_non_empty_line() {
        assert_eq!(parse_number("warming up\n12.5\n\n"), Ok(12.5));
        assert_eq!(parse_number("  -3e2 \n"), Ok(-300.0));
        assert!(parse_number("").unwrap_err().contains("printed nothing"));
        assert!(parse_number("12\ndone\n").unwrap_err().contains("`done`"));
        assert!(parse_number("inf\n").is_err());
    }
}
