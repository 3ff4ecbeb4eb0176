//! Single-operation throughput: claim_due (batch 1 and 32), renew, write_step and
//! acknowledge, one call in flight at a time, on the library and on the raw baseline.

use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use crate::fixture::Fixture;
use crate::measure::{PROBE, Sample, plan, run_for};

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

/// Leases held for the renew and write_step loops (rotated, one call at a time).
const HELD: u64 = 64;

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

/// Measures `op` through `client` on the fresh store `fx` for `duration`.
pub async fn measure<C: Client>(
    client: &C,
    fx: &mut Fixture,
    op: Op,
    duration: Duration,
) -> Result<Sample> {
    match op {
        Op::Claim(batch) => {
            let probe = (batch as u64 * 200).clamp(500, 5_000);
            fx.admit(probe).await?;
            let mut claimed = 0;
            let first = run_for(PROBE, |_| async {
                let n = client.claim(batch).await?.len() as u64;
                Ok(n)
            })
            .await?;
            claimed += first.count;
            let waiting = fx.admitted() - claimed;
            fx.admit(plan(fx.kind, first.rate(), duration, waiting))
                .await?;
            run_for(duration, |_| async {
                Ok(client.claim(batch).await?.len() as u64)
            })
            .await
        }
        Op::Renew | Op::WriteStep => {
            fx.admit(HELD).await?;
            let leases = claim_all(client, HELD).await?;
            let n = leases.len().max(1);
            let call = |prefix: &'static str, i: u64| {
                let lease = &leases[(i % n as u64) as usize];
                async move {
                    match op {
                        Op::Renew => client.renew(lease).await?,
                        _ => client.write_step(lease, &format!("{prefix}{i}")).await?,
                    }
                    Ok(1)
                }
            };
            run_for(PROBE, |i| call("warm-", i)).await?;
            run_for(duration, |i| call("s", i)).await
        }
        Op::Acknowledge => {
            fx.admit(500).await?;
            let mut leases = claim_all(client, 500).await?;
            let mut next = 0usize;
            let first = run_for(PROBE, |_| {
                let lease = leases.get(next).cloned();
                next += 1;
                async move {
                    match lease {
                        Some(l) => client.acknowledge(&l).await.map(|()| 1),
                        None => Ok(0),
                    }
                }
            })
            .await?;
            leases.drain(..(first.count as usize).min(leases.len()));
            let more = plan(fx.kind, first.rate(), duration, leases.len() as u64);
            fx.admit(more).await?;
            leases.extend(claim_all(client, more).await?);
            let mut next = 0usize;
            run_for(duration, |_| {
                let lease = leases.get(next).cloned();
                next += 1;
                async move {
                    match lease {
                        Some(l) => client.acknowledge(&l).await.map(|()| 1),
                        None => Ok(0),
                    }
                }
            })
            .await
        }
    }
}
