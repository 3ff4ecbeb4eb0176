//! River's Rust port in the anchors row: `riverqueue migrate-up`, then `riverqueue bench
//! -n N --max-workers C` in the row's database. Its bench truncates its job table, inserts
//! the N jobs, starts one client with C workers and its own fetch settings (a 2 ms fetch
//! cooldown, a 20 ms poll), and prints `bench: total jobs worked [ W ], ..., overall job/sec
//! [ R ], ...` once N jobs completed, W read from its table (`state = 'completed'`), R over
//! the time from the client's start to the last completion. Every 2 s it prints the jobs
//! worked in that interval with the time since the start: when that time passes the budget
//! the process is stopped and the run reports the jobs worked by then, marked partial.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::anchors::{self, Cost, Outcome, RunResult};
use crate::error::{BenchError, Result};

fn setup(text: impl Into<String>) -> BenchError {
    BenchError::Setup(text.into())
}

/// The number inside the first `[ ... ]` after `label` in `line`.
fn bracketed(line: &str, label: &str) -> Option<f64> {
    let rest = &line[line.find(label)? + label.len()..];
    let open = rest.find('[')?;
    let close = rest[open..].find(']')? + open;
    rest[open + 1..close].trim().parse().ok()
}

/// A progress line: (jobs worked in the interval, seconds since the start).
pub fn parse_progress(line: &str) -> Option<(u64, f64)> {
    let line = line.trim();
    if !line.starts_with("bench: jobs worked") {
        return None;
    }
    let worked = bracketed(line, "jobs worked")?;
    let open = line.rfind('[')?;
    let elapsed = line[open + 1..].trim_end_matches(']').trim();
    let secs: f64 = elapsed.strip_suffix('s')?.parse().ok()?;
    Some((worked as u64, secs))
}

/// The final line: (jobs worked as its table counts them, jobs/s).
pub fn parse_total(line: &str) -> Option<(u64, f64)> {
    let line = line.trim();
    if !line.starts_with("bench: total jobs worked") {
        return None;
    }
    let worked = bracketed(line, "total jobs worked")?;
    let rate = bracketed(line, "overall job/sec")?;
    Some((worked as u64, rate))
}

/// What the bench's output says so far.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Jobs worked over the progress lines.
    pub worked: u64,
    /// Seconds since the start at the last progress line.
    pub secs: f64,
}

impl Progress {
    /// Adds one line; the outcome once the run is over (its final line, or a progress line
    /// past the budget).
    pub fn line(&mut self, line: &str, jobs: u64, budget: f64) -> Option<Result<Outcome>> {
        if let Some((worked, rate)) = parse_total(line) {
            if rate <= 0.0 {
                return Some(Err(setup(format!("river bench: rate {rate} in {line:?}"))));
            }
            let outcome = Outcome {
                jobs: worked,
                secs: worked as f64 / rate,
                partial: false,
            };
            return Some(anchors::check_outcome(outcome, jobs));
        }
        let (worked, secs) = parse_progress(line)?;
        self.worked += worked;
        self.secs = secs;
        (secs >= budget).then(|| {
            anchors::check_outcome(
                Outcome {
                    jobs: self.worked.min(jobs.saturating_sub(1)),
                    secs,
                    partial: true,
                },
                jobs,
            )
        })
    }
}

async fn migrate(tool: &Path, url: &str) -> Result<()> {
    let status = Command::new(tool)
        .args(["migrate-up", "--database-url", url])
        .stdout(Stdio::null())
        .status()
        .await
        .map_err(|e| setup(format!("riverqueue migrate-up: {e}")))?;
    if !status.success() {
        return Err(setup(format!("riverqueue migrate-up failed ({status})")));
    }
    Ok(())
}

/// One run: jobs/s, no cost (the process inserts and drains as one).
pub async fn run(
    tool: &Path,
    url: &str,
    c: usize,
    jobs: u64,
    budget: Duration,
) -> Result<RunResult> {
    migrate(tool, url).await?;
    let mut child = Command::new(tool)
        .args(["bench", "--database-url", url, "--skip-vacuum"])
        .args(["-n", &jobs.to_string(), "--max-workers", &c.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| setup(format!("spawn riverqueue bench: {e}")))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| setup("riverqueue stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let mut progress = Progress::default();
    let read = async {
        while let Some(line) = lines
            .next_line()
            .await
            .map_err(|e| setup(format!("riverqueue output: {e}")))?
        {
            if let Some(outcome) = progress.line(&line, jobs, budget.as_secs_f64()) {
                return outcome;
            }
        }
        Err(setup("riverqueue bench ended without its total line"))
    };
    let limit = budget + Duration::from_secs(300);
    let outcome = tokio::time::timeout(limit, read)
        .await
        .map_err(|_| setup(format!("riverqueue bench did not finish in {limit:?}")))??;
    if outcome.partial {
        let _ = child.kill().await;
    } else {
        let status = child
            .wait()
            .await
            .map_err(|e| setup(format!("riverqueue bench: {e}")))?;
        if !status.success() {
            return Err(setup(format!("riverqueue bench failed ({status})")));
        }
    }
    Ok(RunResult {
        rate: outcome.jobs as f64 / outcome.secs,
        cost: Cost::default(),
        partial_jobs: outcome.partial.then_some(outcome.jobs),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRESS: &str =
        "bench: jobs worked [        286 ], inserted [          0 ], job/sec [      143.0 ] [2.0s]";
    const TOTAL: &str = "bench: total jobs worked [      20000 ], total jobs inserted [      20000 ], overall job/sec [     5796.1 ], p95 [     1.234s ], running 3.5s";

    #[test]
    fn its_lines_are_parsed() {
        assert_eq!(parse_progress(PROGRESS), Some((286, 2.0)));
        assert_eq!(parse_total(TOTAL), Some((20_000, 5796.1)));
        assert_eq!(parse_progress(TOTAL), None);
        assert_eq!(parse_total(PROGRESS), None);
        assert_eq!(parse_progress("bench: WARNING: truncating river_job"), None);
        assert_eq!(parse_total("bench: total jobs worked [ x ]"), None);
    }

    #[test]
    fn the_total_line_ends_a_run_and_must_count_every_job() {
        let mut p = Progress::default();
        assert!(
            p.line(PROGRESS, 20_000, 30.0).is_none(),
            "within the budget"
        );
        let o = p
            .line(TOTAL, 20_000, 30.0)
            .expect("over")
            .expect("complete");
        assert_eq!(o.jobs, 20_000);
        assert!((o.secs - 20_000.0 / 5796.1).abs() < 1e-9);
        assert!(!o.partial);
        let short = TOTAL.replace("[      20000 ], total", "[      19999 ], total");
        assert!(p.line(&short, 20_000, 30.0).expect("over").is_err());
    }

    #[test]
    fn a_progress_line_past_the_budget_ends_a_partial_run() {
        let mut p = Progress::default();
        for n in 1..=15 {
            let line = format!(
                "bench: jobs worked [ 286 ], inserted [ 0 ], job/sec [ 143.0 ] [{}.0s]",
                2 * n
            );
            let out = p.line(&line, 20_000, 30.0);
            assert_eq!(out.is_some(), n == 15, "line {n}");
            if let Some(o) = out {
                let o = o.expect("partial");
                assert_eq!((o.jobs, o.secs, o.partial), (15 * 286, 30.0, true));
            }
        }
    }
}
