//! Single-operation throughput: claim_due (batch 1 and 32), renew, write_step and
//! acknowledge, one call in flight at a time, on the library and on the raw baseline.
//!
//! Both sides run on the same fresh store, their calls interleaved (library, raw, raw,
//! library, ...) and each call timed on its own, so both see the same server, disk and
//! background load: on a shared 2-core machine the ratio stays meaningful even when the
//! absolute numbers move. A side's rate is calls (or leases) over the summed time of its
//! own calls, which is what one caller issuing them back to back would get.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::Result;
use crate::fixture::Fixture;
use crate::measure::{PROBE, Sample, plan};

/// A single-operation measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `claim_due` with this limit (counted in leases).
    Claim(usize),
    /// `renew`.
    Renew,
    /// `write_step` of a new record.
    WriteStep,
    /// `acknowledge` completed.
    Acknowledge,
}

impl Op {
    /// Every single-operation measurement, in report order.
    pub const ALL: [Op; 5] = [
        Op::Claim(1),
        Op::Claim(32),
        Op::Renew,
        Op::WriteStep,
        Op::Acknowledge,
    ];

    /// Name in the report.
    pub fn name(self) -> String {
        match self {
            Op::Claim(n) => format!("claim_due x{n}"),
            Op::Renew => "renew".into(),
            Op::WriteStep => "write_step".into(),
            Op::Acknowledge => "acknowledge".into(),
        }
    }

    /// Unit in the report.
    pub fn unit(self) -> &'static str {
        match self {
            Op::Claim(_) => "leases/s",
            _ => "ops/s",
        }
    }
}

/// Leases each side holds for the renew and write_step loops (rotated).
const HELD: u64 = 32;

/// Claims `n` leases (in calls of up to 1000).
async fn claim_all<C: Client>(client: &C, n: u64) -> Result<Vec<C::Lease>> {
    let mut out = Vec::new();
    while (out.len() as u64) < n {
        let want = (n - out.len() as u64).min(1000) as usize;
        let got = client.claim(want).await?;
        if got.is_empty() {
            break;
        }
        out.extend(got);
    }
    Ok(out)
}

/// Adds one timed call to `sample`; returns what the call counted (0 = nothing left).
async fn timed(sample: &mut Sample, call: impl Future<Output = Result<u64>>) -> Result<u64> {
    let started = Instant::now();
    let n = call.await?;
    sample.secs += started.elapsed().as_secs_f64();
    sample.count += n;
    Ok(n)
}

/// Interleaves `lib(i)` and `raw(i)` (when there is a raw side), alternating which goes
/// first, until `limit` of wall time has passed or a side has nothing left.
async fn interleave<L, LF, R, RF>(
    limit: Duration,
    mut lib: L,
    mut raw: Option<R>,
) -> Result<(Sample, Sample)>
where
    L: FnMut(u64) -> LF,
    LF: Future<Output = Result<u64>>,
    R: FnMut(u64) -> RF,
    RF: Future<Output = Result<u64>>,
{
    let mut a = Sample {
        count: 0,
        secs: 0.0,
    };
    let mut b = Sample {
        count: 0,
        secs: 0.0,
    };
    let started = Instant::now();
    let mut i = 0;
    loop {
        let (x, y) = if i % 2 == 0 {
            let x = timed(&mut a, lib(i)).await?;
            let y = match raw.as_mut() {
                Some(r) => timed(&mut b, r(i)).await?,
                None => 1,
            };
            (x, y)
        } else {
            let y = match raw.as_mut() {
                Some(r) => timed(&mut b, r(i)).await?,
                None => 1,
            };
            (timed(&mut a, lib(i)).await?, y)
        };
        i += 1;
        if x == 0 || y == 0 || started.elapsed() >= limit {
            return Ok((a, b));
        }
    }
}

/// Measures `op` on the fresh store `fx`: the library `lib` and, when given, the raw
/// baseline `raw`, interleaved, each for about `duration` of its own calls.
pub async fn measure<L: Client, R: Client>(
    lib: &L,
    raw: Option<&R>,
    fx: &mut Fixture,
    op: Op,
    duration: Duration,
) -> Result<(Sample, Option<Sample>)> {
    let sides = if raw.is_some() { 2 } else { 1 };
    let wall = duration * sides;
    let (a, b) = match op {
        Op::Claim(batch) => {
            let probe = (batch as u64 * 200).clamp(500, 5_000) * u64::from(sides);
            fx.admit(probe).await?;
            let (pa, pb) = interleave(
                PROBE,
                |_| async { Ok(lib.claim(batch).await?.len() as u64) },
                raw.map(|r| move |_| async move { Ok(r.claim(batch).await?.len() as u64) }),
            )
            .await?;
            let claimed = pa.count + pb.count;
            let rate = claimed as f64 / (pa.secs + pb.secs).max(1e-9);
            let waiting = fx.admitted() - claimed;
            fx.admit(plan(fx.kind, rate, duration * sides, waiting))
                .await?;
            interleave(
                wall,
                |_| async { Ok(lib.claim(batch).await?.len() as u64) },
                raw.map(|r| move |_| async move { Ok(r.claim(batch).await?.len() as u64) }),
            )
            .await?
        }
        Op::Renew | Op::WriteStep => {
            fx.admit(HELD * u64::from(sides)).await?;
            let la = claim_all(lib, HELD).await?;
            let lb = match raw {
                Some(r) => claim_all(r, HELD).await?,
                None => Vec::new(),
            };
            let n = HELD as usize;
            let write = op == Op::WriteStep;
            let lib_call = |prefix: &'static str| {
                let la = &la;
                move |i: u64| async move {
                    let lease = &la[i as usize % n];
                    if write {
                        lib.write_step(lease, &format!("{prefix}{i}")).await?;
                    } else {
                        lib.renew(lease).await?;
                    }
                    Ok(1)
                }
            };
            let raw_call = |prefix: &'static str| {
                let lb = &lb;
                raw.map(|r| {
                    move |i: u64| async move {
                        let lease = &lb[i as usize % n];
                        if write {
                            r.write_step(lease, &format!("{prefix}{i}")).await?;
                        } else {
                            r.renew(lease).await?;
                        }
                        Ok(1)
                    }
                })
            };
            interleave(PROBE, lib_call("warm-"), raw_call("warm-")).await?;
            interleave(wall, lib_call("s"), raw_call("s")).await?
        }
        Op::Acknowledge => {
            let probe = 500;
            fx.admit(probe * u64::from(sides)).await?;
            let mut la = claim_all(lib, probe).await?;
            let mut lb = match raw {
                Some(r) => claim_all(r, probe).await?,
                None => Vec::new(),
            };
            let (pa, pb) = interleave(
                PROBE,
                |i| {
                    let lease = la.get(i as usize).cloned();
                    async move { ack(lib, lease).await }
                },
                raw.map(|r| {
                    let lb = &lb;
                    move |i: u64| {
                        let lease = lb.get(i as usize).cloned();
                        async move { ack(r, lease).await }
                    }
                }),
            )
            .await?;
            la.drain(..(pa.count as usize).min(la.len()));
            lb.drain(..(pb.count as usize).min(lb.len()));
            let rate = (pa.count + pb.count) as f64 / (pa.secs + pb.secs).max(1e-9);
            let more = plan(fx.kind, rate / f64::from(sides), duration, la.len() as u64);
            fx.admit(more * u64::from(sides)).await?;
            la.extend(claim_all(lib, more).await?);
            if let Some(r) = raw {
                lb.extend(claim_all(r, more).await?);
            }
            interleave(
                wall,
                |i| {
                    let lease = la.get(i as usize).cloned();
                    async move { ack(lib, lease).await }
                },
                raw.map(|r| {
                    let lb = &lb;
                    move |i: u64| {
                        let lease = lb.get(i as usize).cloned();
                        async move { ack(r, lease).await }
                    }
                }),
            )
            .await?
        }
    };
    Ok((a, raw.map(|_| b)))
}

/// Acknowledges `lease`; 0 when there is none left.
async fn ack<C: Client>(client: &C, lease: Option<C::Lease>) -> Result<u64> {
    match lease {
        Some(l) => client.acknowledge(&l).await.map(|()| 1),
        None => Ok(0),
    }
}
