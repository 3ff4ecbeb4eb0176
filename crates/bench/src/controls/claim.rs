//! `controls claim 10^k`: `claim_due` x1 with priorities and keys in use, beside today's
//! claim, in the same run, call by call.
//!
//! Two fresh stores of the same backend, each holding `n` executions admitted a day ahead
//! (as the `stored scheduled` rows, [`crate::stored`]): `mixed` with
//! [`CLAIM_MIX`](super::mix::CLAIM_MIX)'s priorities and keys and its limits set, `plain` with neither. The working set (due now)
//! is admitted the same way on each. Three sides are then timed one call at a time, their
//! order rotating: the library's claim on `mixed`, the library's claim on `plain` (today's
//! claim), and the raw claim statement / script on `plain` (the bound of today's claim; the
//! raw baselines carry no key gate and, on SQLite, read priority level 0 only, so there is
//! no raw side on `mixed`). Leases are held, never acknowledged: a key's live leases grow
//! to a few dozen, under the limit, so every claim of a limited key runs the check.
//!
//! Reported per size: each side's leases/s, the mixed claim's cost over the plain one
//! (target <= [`TARGET`] at 10^6) and, over sizes, each side's cost at the largest size over
//! that at 10^3 (flatness; the stored rows' target of [`crate::stored::TARGET`]).

use std::time::{Duration, Instant};

use serde::Serialize;

use super::cells::{two, verdict};
use super::mix::Mix;
use crate::args::{Kind, Options};
use crate::client::{Baseline, Client, Library};
use crate::error::{BenchError, Result};
use crate::fill;
use crate::fixture::Fixture;
use crate::measure::{PROBE, Sample, plan};
use crate::stored::size_name;

/// The target: the mixed claim costs at most this times today's at 10^6.
pub const TARGET: f64 = 1.2;

/// The working set admitted before the probe, per side.
const FIRST: u64 = 1_000;

/// The row's name: `controls claim 10^k` for a mix with limits, `controls claim unlimited
/// 10^k` for one without ([`super::mix::UNLIMITED_MIX`]: priorities and keys, no key gate).
pub fn name(mix: &Mix, n: u64) -> String {
    let variant = if mix.limited == 0 { "unlimited " } else { "" };
    format!("controls claim {variant}{}", size_name(n))
}

/// One size of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimRow {
    /// Backend.
    pub backend: &'static str,
    /// Stored executions (besides the working set).
    pub stored: u64,
    /// The mix of the mixed store.
    pub mix: Mix,
    /// The library's claim on the mixed store.
    pub mixed: Option<Sample>,
    /// The library's claim on the plain store.
    pub plain: Option<Sample>,
    /// The raw claim on the plain store.
    pub raw: Option<Sample>,
    /// 1-minute load average before the row.
    pub load: f64,
    /// Why it did not run.
    pub error: Option<String>,
}

impl ClaimRow {
    /// The mixed claim's cost over the plain one's (cost per call is 1 / rate).
    pub fn ratio(&self) -> Option<f64> {
        match (self.mixed, self.plain) {
            (Some(m), Some(p)) if m.rate() > 0.0 => Some(p.rate() / m.rate()),
            _ => None,
        }
    }
}

/// Measures one size: fills both stores, then the three sides for `duration` each.
pub async fn row(kind: Kind, mix: &Mix, n: u64, options: &Options, duration: Duration) -> ClaimRow {
    let load = crate::load::one_minute();
    let made = measure(kind, mix, n, options, duration).await;
    let (mixed, plain, raw, error) = match made {
        Ok([m, p, r]) => (Some(m), Some(p), Some(r), None),
        Err(e) => (None, None, None, Some(e.to_string())),
    };
    let row = ClaimRow {
        backend: kind.name(),
        stored: n,
        mix: *mix,
        mixed,
        plain,
        raw,
        load,
        error,
    };
    eprintln!(
        "lease-bench: {} {}: mixed {} plain {} raw {} leases/s, cost ratio {}{}",
        kind.name(),
        name(mix, n),
        rate(mixed),
        rate(plain),
        rate(raw),
        two(row.ratio()),
        row.error
            .as_ref()
            .map_or_else(String::new, |e| format!(" ERROR {e}"))
    );
    row
}

/// The limits column: `20 of 100 keys at 1000`, or `none`.
pub fn limits(mix: &Mix) -> String {
    if mix.limited == 0 {
        "none".into()
    } else {
        format!("{} of {} keys at {}", mix.limited, mix.keys, mix.limit)
    }
}

fn rate(s: Option<Sample>) -> String {
    s.map_or_else(|| "-".into(), |s| format!("{:.0}", s.rate()))
}

async fn measure(
    kind: Kind,
    mix: &Mix,
    n: u64,
    options: &Options,
    duration: Duration,
) -> Result<[Sample; 3]> {
    let mut mixed = Fixture::new(kind, options).await?;
    let plain = Fixture::new(kind, options).await;
    let result = match &plain {
        Ok(plain) => measure_on(&mut mixed, plain, mix, n, duration).await,
        Err(e) => Err(BenchError::Setup(e.to_string())),
    };
    let removed = mixed.remove().await;
    let removed_plain = match plain {
        Ok(p) => p.remove().await,
        Err(_) => Ok(()),
    };
    let out = result?;
    removed?;
    removed_plain?;
    Ok(out)
}

/// Admits the working set: `per_side` due now on each side (the plain store holds two
/// sides' worth); `from` is where the ids go on.
async fn admit_work(
    mixed: &Fixture,
    plain: &Fixture,
    mix: &Mix,
    from: u64,
    per_side: u64,
) -> Result<()> {
    fill::admit_each(&mixed.lib, "w", from, per_side, |i, a| mix.apply(i, a)).await?;
    fill::admit(&plain.lib, "w", 2 * from, 2 * per_side, None).await
}

async fn measure_on(
    mixed: &mut Fixture,
    plain: &Fixture,
    mix: &Mix,
    n: u64,
    duration: Duration,
) -> Result<[Sample; 3]> {
    let raw = plain
        .raw()
        .await?
        .ok_or_else(|| BenchError::Setup("no raw client".into()))?;
    let started = Instant::now();
    let day_ahead = lease_core::Timestamp::from_millis(fill::unix_ms() + 86_400_000);
    mix.set_limits(&mixed.lib).await?;
    fill::admit_each(&mixed.lib, "s", 0, n, |i, a| {
        mix.apply(i, a.not_before(day_ahead))
    })
    .await?;
    fill::admit(&plain.lib, "s", 0, n, Some(day_ahead)).await?;
    admit_work(mixed, plain, mix, 0, FIRST).await?;
    for fx in [&*mixed, plain] {
        if let Some(r) = fx.raw().await? {
            r.settle().await?;
        }
    }
    eprintln!(
        "lease-bench: {:?} {} filled in {:.1}s",
        mixed.kind,
        name(mix, n),
        started.elapsed().as_secs_f64()
    );
    let sides = Sides {
        mixed: Library::new(mixed.lib.clone())?,
        plain: Library::new(plain.lib.clone())?,
        raw: Baseline(raw),
    };
    let probe = sides.interleave(PROBE).await?;
    let fastest = probe.iter().map(Sample::rate).fold(0.0, f64::max);
    let taken = probe.iter().map(|s| s.count).max().unwrap_or(0);
    let more = plan(mixed.kind, fastest, duration, FIRST.saturating_sub(taken));
    admit_work(mixed, plain, mix, FIRST, more).await?;
    sides.interleave(duration * 3).await
}

/// The three sides of the comparison.
struct Sides {
    mixed: Library,
    plain: Library,
    raw: Baseline,
}

impl Sides {
    /// One claim of 1 on side `side`: how many leases it got.
    async fn claim(&self, side: usize) -> Result<u64> {
        let got = match side {
            0 => self.mixed.claim(1).await?.len(),
            1 => self.plain.claim(1).await?.len(),
            _ => self.raw.claim(1).await?.len(),
        };
        Ok(got as u64)
    }

    /// Rounds of one timed claim per side, the order rotating, until `limit` of wall time
    /// has passed or a side claimed nothing.
    async fn interleave(&self, limit: Duration) -> Result<[Sample; 3]> {
        let mut out = [Sample {
            count: 0,
            secs: 0.0,
        }; 3];
        let started = Instant::now();
        for round in 0usize.. {
            let mut empty = false;
            for k in 0..3 {
                let side = (round + k) % 3;
                let at = Instant::now();
                let got = self.claim(side).await?;
                out[side].secs += at.elapsed().as_secs_f64();
                out[side].count += got;
                empty |= got == 0;
            }
            if empty || started.elapsed() >= limit {
                break;
            }
        }
        Ok(out)
    }
}

/// The markdown table of the claim rows.
pub fn markdown(rows: &[ClaimRow]) -> String {
    let mut out = String::from(
        "| backend | limits | stored | mixed claim_due x1 (leases/s) | plain claim_due x1 | raw bound (plain store) | mixed cost / plain cost | target | met | load |\n\
         |---|---|---|---:|---:|---:|---:|---|---|---:|\n",
    );
    for r in rows {
        let ratio = r.ratio();
        let met = (r.stored == 1_000_000)
            .then_some(ratio.map(|x| x <= TARGET))
            .flatten();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | <= {TARGET}x at 10^6 | {} | {:.2} |\n",
            r.backend,
            limits(&r.mix),
            size_name(r.stored),
            rate(r.mixed),
            rate(r.plain),
            rate(r.raw),
            two(ratio),
            verdict(&r.error, met),
            r.load,
        ));
    }
    out
}

/// Per backend: each side's cost at the largest size over that at the smallest.
pub fn flatness_markdown(rows: &[ClaimRow]) -> String {
    let mut out = String::from(
        "| backend | limits | stored | mixed cost ratio | plain cost ratio | raw cost ratio | target (mixed) | met |\n\
         |---|---|---|---:|---:|---:|---|---|\n",
    );
    for (kind, limited) in Kind::ALL.into_iter().flat_map(|k| [(k, true), (k, false)]) {
        let mine: Vec<&ClaimRow> = rows
            .iter()
            .filter(|r| {
                r.backend == kind.name() && r.error.is_none() && (r.mix.limited > 0) == limited
            })
            .collect();
        let (Some(small), Some(large)) = (
            mine.iter().min_by_key(|r| r.stored),
            mine.iter().max_by_key(|r| r.stored),
        ) else {
            continue;
        };
        if small.stored == large.stored {
            continue;
        }
        let cost = |f: fn(&ClaimRow) -> Option<Sample>| match (f(small), f(large)) {
            (Some(s), Some(l)) if l.rate() > 0.0 => Some(s.rate() / l.rate()),
            _ => None,
        };
        let mixed = cost(|r| r.mixed);
        out.push_str(&format!(
            "| {} | {} | {} / {} | {} | {} | {} | <= {}x | {} |\n",
            kind.name(),
            limits(&large.mix),
            size_name(large.stored),
            size_name(small.stored),
            two(mixed),
            two(cost(|r| r.plain)),
            two(cost(|r| r.raw)),
            crate::stored::TARGET,
            verdict(&None, mixed.map(|x| x <= crate::stored::TARGET)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rate: f64) -> Option<Sample> {
        Some(Sample {
            count: rate as u64,
            secs: 1.0,
        })
    }

    fn claim_row(n: u64, mixed: f64, plain: f64) -> ClaimRow {
        ClaimRow {
            backend: "sqlite",
            stored: n,
            mix: crate::controls::mix::CLAIM_MIX,
            mixed: sample(mixed),
            plain: sample(plain),
            raw: sample(plain * 2.0),
            load: 0.5,
            error: None,
        }
    }

    #[test]
    fn names_and_ratios() {
        assert_eq!(
            name(&crate::controls::mix::CLAIM_MIX, 1_000_000),
            "controls claim 10^6"
        );
        assert_eq!(
            name(&crate::controls::mix::UNLIMITED_MIX, 1_000),
            "controls claim unlimited 10^3"
        );
        let r = claim_row(1_000_000, 800.0, 1000.0);
        assert!((r.ratio().expect("ratio") - 1.25).abs() < 1e-9);
        let table = markdown(&[claim_row(1_000, 1000.0, 1000.0), r]);
        assert!(
            table.contains("| sqlite | 20 of 100 keys at 1000 | 10^6 | 800 | 1000 | 2000 | 1.25 |"),
            "{table}"
        );
        assert!(table.contains("**no**"), "{table}");
        let flat = flatness_markdown(&[
            claim_row(1_000, 1000.0, 1000.0),
            claim_row(1_000_000, 500.0, 1000.0),
        ]);
        assert!(
            flat.contains("| sqlite | 20 of 100 keys at 1000 | 10^6 / 10^3 | 2.00 | 1.00 | 1.00 |"),
            "{flat}"
        );
    }

    /// The row's code on a tiny store (SQLite, always available): every side claimed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claim_row_runs_on_a_tiny_store() {
        let options = crate::args::parse(&[]).expect("options");
        for mix in [
            crate::controls::mix::CLAIM_MIX,
            crate::controls::mix::UNLIMITED_MIX,
        ] {
            let r = row(Kind::Sqlite, &mix, 50, &options, Duration::from_millis(50)).await;
            assert_eq!(r.error, None);
            for s in [r.mixed, r.plain, r.raw] {
                assert!(s.expect("sample").count > 0);
            }
        }
    }
}
