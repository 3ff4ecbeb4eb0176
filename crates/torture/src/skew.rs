//! Clock skew (`--clock-skew`): every runtime incarnation runs under
//! libfaketime (`LD_PRELOAD` of `libfaketimeMT.so.1` with `FAKETIME="<offset> x<rate>"`),
//! its clock offset by up to an hour either way and running between half and twice as fast,
//! drawn from the seed, the slot and the incarnation (a respawned incarnation draws anew;
//! the same seed draws the same skews). libfaketime fakes the realtime *and* the monotonic
//! clocks, and scales sleeps and `epoll_wait` timeouts by the rate, so the library under
//! test lives in the faked time: its `SystemTime`, its tokio `Instant`s (renewal cadence,
//! the local lease deadline) and its timers. Only the backend's clock may decide
//! claimability; fencing must refuse whatever a worker with a slow clock writes after its
//! lease expired.
//!
//! The logs stay on the machine's true clock ([`crate::trueclock`]). Each skewed runtime
//! also samples its faked clocks against the true ones into a clock log
//! ([`sample_clock`]); the controller compares those samples with what it drew
//! ([`Skewer::figures`]), so a run whose skew did not take effect fails rather than passes
//! untested.

use std::fmt;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::hash::fnv;
use crate::trueclock;

/// Why `--clock-skew` is not applied on SQLite (printed when it is asked for).
pub const SQLITE_NOTE: &str = "skipping --clock-skew on SQLite (no server clock: each \
     process's own clock decides claimability of the shared file, so runtimes with different \
     clocks disagree and liveness cannot hold; one machine has one clock)";

/// The largest clock offset drawn, seconds (either way).
pub const MAX_OFFSET_S: i64 = 3600;
/// The rate is `2^(e / RATE_STEPS)` for `e` in `-RATE_STEPS..=RATE_STEPS`: 0.5 to 2.0,
/// slow and fast equally likely.
const RATE_STEPS: i32 = 1000;
/// Where a runtime writes its clock samples (set by the controller).
pub const CLOCK_LOG_ENV: &str = "LEASE_TORTURE_CLOCK_LOG";
/// Overrides where libfaketime's multithreaded library is looked for.
pub const LIBRARY_ENV: &str = "LEASE_TORTURE_LIBFAKETIME";
/// How often a runtime samples its clocks (its own, faked, time).
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
/// A drawn offset is confirmed when the observed one is this close, seconds.
const OFFSET_TOLERANCE_S: f64 = 1.0;
/// A drawn rate is confirmed when the observed one is within this fraction of it.
const RATE_TOLERANCE: f64 = 0.02;
/// The true time a runtime's samples must span before its rate is measured, seconds.
const RATE_SPAN_S: f64 = 1.0;

/// One incarnation's clock: offset from the true clock at its start, and rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Skew {
    /// Seconds added to the true clock at the process's start.
    pub offset_s: i64,
    /// Faked seconds per true second (0.5 to 2.0, three decimals).
    pub rate: f64,
}

impl Skew {
    /// The skew of incarnation `incarnation` of slot `slot` (from 0) under `seed`.
    pub fn draw(seed: u64, slot: usize, incarnation: u32) -> Skew {
        let key = fnv(&[
            "clock-skew",
            &seed.to_string(),
            &slot.to_string(),
            &incarnation.to_string(),
        ]);
        let mut rng = ChaCha8Rng::seed_from_u64(key);
        let offset_s = rng.random_range(-MAX_OFFSET_S..=MAX_OFFSET_S);
        let e = rng.random_range(-RATE_STEPS..=RATE_STEPS);
        let rate = (2f64.powf(f64::from(e) / f64::from(RATE_STEPS)) * 1000.0).round() / 1000.0;
        Skew { offset_s, rate }
    }

    /// The `FAKETIME` value: `+1234 x0.750` (seconds; the C locale's decimal point, which
    /// a Rust program keeps since it never calls `setlocale`).
    pub fn faketime(&self) -> String {
        format!("{:+} x{:.3}", self.offset_s, self.rate)
    }
}

/// Finds libfaketime's multithreaded library (`LEASE_TORTURE_LIBFAKETIME`, else Debian's
/// place for this architecture, else `/usr/local`).
pub fn find_library() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(LIBRARY_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "--clock-skew: {LIBRARY_ENV}={} is not a file",
                path.display()
            ))
        };
    }
    let arch = std::env::consts::ARCH;
    let candidates = [
        format!("/usr/lib/{arch}-linux-gnu/faketime/libfaketimeMT.so.1"),
        "/usr/lib/faketime/libfaketimeMT.so.1".to_owned(),
        "/usr/local/lib/faketime/libfaketimeMT.so.1".to_owned(),
    ];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "--clock-skew needs libfaketime (Debian: apt-get install faketime libfaketime); \
                 no libfaketimeMT.so.1 in {} (or set {LIBRARY_ENV})",
                candidates.join(", ")
            )
        })
}

/// One clock sample of a runtime: its faked clocks next to the true ones.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Sample {
    /// `SystemTime::now()` as the process sees it, µs since the epoch.
    pub fake_realtime_us: i64,
    /// The true realtime clock, µs since the epoch.
    pub true_realtime_us: i64,
    /// `Instant` time since the first sample, as the process sees it, µs.
    pub fake_elapsed_us: i64,
    /// True monotonic time since the first sample, µs.
    pub true_elapsed_us: i64,
}

fn std_realtime_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Runtime side: when the controller named a clock log ([`CLOCK_LOG_ENV`]), notes the
/// process's clocks on standard error and appends a [`Sample`] to the log at once and then
/// every half second of the process's own time, until the process exits.
pub fn sample_clock(process: u32) {
    let Some(path) = std::env::var_os(CLOCK_LOG_ENV).map(PathBuf::from) else {
        return;
    };
    let (std_now, true_now) = (std_realtime_us(), trueclock::realtime_us());
    eprintln!(
        "runtime {process}: SystemTime reads {std_now} us, the true clock {true_now} us \
         ({:+.1} s), FAKETIME={:?}",
        (std_now - true_now) as f64 / 1e6,
        std::env::var("FAKETIME").unwrap_or_default()
    );
    tokio::spawn(async move {
        let (fake0, true0) = (Instant::now(), trueclock::monotonic_us());
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        loop {
            tick.tick().await;
            let sample = Sample {
                fake_realtime_us: std_realtime_us(),
                true_realtime_us: trueclock::realtime_us(),
                fake_elapsed_us: i64::try_from(fake0.elapsed().as_micros()).unwrap_or(i64::MAX),
                true_elapsed_us: trueclock::monotonic_us() - true0,
            };
            if let Err(e) = append(&path, &sample) {
                eprintln!("runtime {process}: clock log {}: {e}", path.display());
                return;
            }
        }
    });
}

fn append(path: &Path, sample: &Sample) -> std::io::Result<()> {
    let mut line = serde_json::to_string(sample).map_err(std::io::Error::other)?;
    line.push('\n');
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(line.as_bytes())
}

/// What a runtime's samples show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// Faked minus true realtime at the incarnation's spawn, seconds.
    pub offset_s: f64,
    /// Faked per true monotonic time, when the samples span [`RATE_SPAN_S`].
    pub rate: Option<f64>,
}

/// Reads the skew off `samples` of an incarnation spawned at true time `spawned_us`: the
/// rate from the first and the last sample, the offset extrapolated back to the spawn
/// (with the observed rate, else `drawn_rate`).
pub fn observe(samples: &[Sample], spawned_us: i64, drawn_rate: f64) -> Option<Observed> {
    let (first, last) = (samples.first()?, samples.last()?);
    let span_us = last.true_elapsed_us - first.true_elapsed_us;
    let rate = (span_us as f64 >= RATE_SPAN_S * 1e6)
        .then(|| (last.fake_elapsed_us - first.fake_elapsed_us) as f64 / span_us as f64);
    let since_spawn_s = (first.true_realtime_us - spawned_us) as f64 / 1e6;
    let fake_at_spawn_s =
        first.fake_realtime_us as f64 / 1e6 - rate.unwrap_or(drawn_rate) * since_spawn_s;
    Some(Observed {
        offset_s: fake_at_spawn_s - spawned_us as f64 / 1e6,
        rate,
    })
}

/// One incarnation's drawn and observed skew.
#[derive(Debug, Clone, Serialize)]
pub struct IncarnationSkew {
    /// Runtime slot, from 1.
    pub slot: usize,
    /// Incarnation of the slot, from 1.
    pub incarnation: u32,
    /// The drawn skew.
    #[serde(flatten)]
    pub drawn: Skew,
    /// The offset its clock samples show, seconds (none without samples).
    pub observed_offset_s: Option<f64>,
    /// The rate its clock samples show (none when they span under a second).
    pub observed_rate: Option<f64>,
    /// The samples show the drawn offset, and the drawn rate where measured.
    pub as_drawn: bool,
}

/// The skews of a run and how many took effect as drawn.
#[derive(Debug, Clone, Serialize)]
pub struct SkewFigures {
    /// Path of libfaketime's library.
    pub library: String,
    /// Every incarnation, in spawn order.
    pub incarnations: Vec<IncarnationSkew>,
    /// Incarnations whose samples show the drawn skew.
    pub as_drawn: usize,
    /// Incarnations whose rate was measured too.
    pub rate_measured: usize,
    /// Incarnations whose samples show another skew (must be 0).
    pub mismatched: usize,
    /// Incarnations without a clock sample (killed before the first).
    pub unsampled: usize,
}

/// Controller side: draws each incarnation's skew, gives its environment, checks it.
#[derive(Debug)]
pub struct Skewer {
    library: PathBuf,
    seed: u64,
    spawned: Vec<Spawned>,
}

#[derive(Debug)]
struct Spawned {
    slot: usize,
    incarnation: u32,
    skew: Skew,
    clock_log: PathBuf,
    at_us: i64,
}

impl Skewer {
    /// A skewer for `seed`; fails when libfaketime is missing.
    pub fn new(seed: u64) -> Result<Self, String> {
        Ok(Skewer {
            library: find_library()?,
            seed,
            spawned: Vec::new(),
        })
    }

    /// Draws the skew of incarnation `incarnation` of `slot` (from 0), notes it, and returns
    /// the environment its process starts with (its clock log in `dir`).
    pub fn env(&mut self, slot: usize, incarnation: u32, dir: &Path) -> Vec<(String, String)> {
        let skew = Skew::draw(self.seed, slot, incarnation);
        let clock_log = dir.join(format!("p{}-{incarnation}.clock.jsonl", slot + 1));
        let env = vec![
            (
                "LD_PRELOAD".to_owned(),
                self.library.to_string_lossy().into_owned(),
            ),
            ("FAKETIME".to_owned(), skew.faketime()),
            (
                CLOCK_LOG_ENV.to_owned(),
                clock_log.to_string_lossy().into_owned(),
            ),
        ];
        self.spawned.push(Spawned {
            slot: slot + 1,
            incarnation,
            skew,
            clock_log,
            at_us: trueclock::realtime_us(),
        });
        env
    }

    /// Reads every incarnation's clock log and compares it with the drawn skew.
    pub fn figures(&self) -> SkewFigures {
        let incarnations: Vec<IncarnationSkew> = self.spawned.iter().map(check).collect();
        let sampled = incarnations
            .iter()
            .filter(|i| i.observed_offset_s.is_some());
        SkewFigures {
            library: self.library.display().to_string(),
            as_drawn: incarnations.iter().filter(|i| i.as_drawn).count(),
            rate_measured: sampled
                .clone()
                .filter(|i| i.observed_rate.is_some())
                .count(),
            mismatched: sampled.filter(|i| !i.as_drawn).count(),
            unsampled: incarnations
                .iter()
                .filter(|i| i.observed_offset_s.is_none())
                .count(),
            incarnations,
        }
    }
}

fn read_samples(path: &Path) -> Vec<Sample> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // A torn last line (a kill mid-write) does not parse and is skipped.
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn check(s: &Spawned) -> IncarnationSkew {
    let observed = observe(&read_samples(&s.clock_log), s.at_us, s.skew.rate);
    let as_drawn = observed.is_some_and(|o| {
        (o.offset_s - s.skew.offset_s as f64).abs() <= OFFSET_TOLERANCE_S
            && o.rate
                .is_none_or(|r| (r / s.skew.rate - 1.0).abs() <= RATE_TOLERANCE)
    });
    IncarnationSkew {
        slot: s.slot,
        incarnation: s.incarnation,
        drawn: s.skew,
        observed_offset_s: observed.map(|o| o.offset_s),
        observed_rate: observed.and_then(|o| o.rate),
        as_drawn,
    }
}

impl fmt::Display for SkewFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  clock skew ({}): {} incarnations, {} as drawn ({} with the rate measured), \
             {} mismatched, {} without a sample",
            self.library,
            self.incarnations.len(),
            self.as_drawn,
            self.rate_measured,
            self.mismatched,
            self.unsampled
        )?;
        for i in &self.incarnations {
            let seen = match (i.observed_offset_s, i.observed_rate) {
                (Some(o), Some(r)) => format!("seen {o:+.1} s x{r:.3}"),
                (Some(o), None) => format!("seen {o:+.1} s"),
                _ => "not seen".to_owned(),
            };
            writeln!(
                f,
                "    p{}.{} {:+} s x{:.3}: {seen}{}",
                i.slot,
                i.incarnation,
                i.drawn.offset_s,
                i.drawn.rate,
                if !i.as_drawn && i.observed_offset_s.is_some() {
                    " MISMATCH"
                } else {
                    ""
                }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_reproducible_within_bounds_and_spread() {
        let mut rates = Vec::new();
        for slot in 0..4 {
            for inc in 1..30 {
                let s = Skew::draw(7, slot, inc);
                assert_eq!(s, Skew::draw(7, slot, inc));
                assert!(s.offset_s.abs() <= MAX_OFFSET_S);
                assert!((0.5..=2.0).contains(&s.rate), "{s:?}");
                rates.push(s.rate);
            }
        }
        assert!(rates.iter().any(|r| *r < 0.7) && rates.iter().any(|r| *r > 1.5));
        assert_ne!(Skew::draw(7, 0, 1), Skew::draw(7, 0, 2));
        assert_ne!(Skew::draw(7, 0, 1), Skew::draw(8, 0, 1));
        let s = Skew {
            offset_s: -42,
            rate: 0.5,
        };
        assert_eq!(s.faketime(), "-42 x0.500");
    }

    fn sample(true_s: f64, skew: Skew, spawned_s: f64) -> Sample {
        let us = |s: f64| (s * 1e6) as i64;
        Sample {
            fake_realtime_us: us(spawned_s
                + skew.offset_s as f64
                + (true_s - spawned_s) * skew.rate),
            true_realtime_us: us(true_s),
            fake_elapsed_us: us((true_s - spawned_s - 0.1) * skew.rate),
            true_elapsed_us: us(true_s - spawned_s - 0.1),
        }
    }

    #[test]
    fn observes_offset_and_rate_and_needs_a_second_for_the_rate() {
        let skew = Skew {
            offset_s: 1800,
            rate: 0.5,
        };
        let spawned = 1_000.0;
        let samples: Vec<Sample> = [1_000.1, 1_000.6, 1_003.1]
            .into_iter()
            .map(|t| sample(t, skew, spawned))
            .collect();
        let o = observe(&samples, 1_000_000_000, 1.0).expect("observed");
        assert!((o.offset_s - 1800.0).abs() < 0.01, "{o:?}");
        assert!(o.rate.is_some_and(|r| (r - 0.5).abs() < 0.001), "{o:?}");
        let short = observe(&samples[..2], 1_000_000_000, 0.5).expect("observed");
        assert_eq!(short.rate, None);
        assert!((short.offset_s - 1800.0).abs() < 0.01);
        assert_eq!(observe(&[], 0, 1.0), None);
    }

    #[test]
    fn an_unfaked_clock_is_a_mismatch() {
        let dir = std::env::temp_dir().join(format!("skew-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("p1-1.clock.jsonl");
        let _ = std::fs::remove_file(&path);
        let at_us = trueclock::realtime_us();
        // What a runtime whose LD_PRELOAD did not take writes: no offset, rate 1.
        let unfaked = sample(
            at_us as f64 / 1e6 + 2.0,
            Skew {
                offset_s: 0,
                rate: 1.0,
            },
            at_us as f64 / 1e6,
        );
        append(&path, &unfaked).expect("append");
        let spawned = Spawned {
            slot: 1,
            incarnation: 1,
            skew: Skew {
                offset_s: -600,
                rate: 1.0,
            },
            clock_log: path.clone(),
            at_us,
        };
        let c = check(&spawned);
        assert!(!c.as_drawn, "{c:?}");
        assert!(c.observed_offset_s.is_some_and(|o| o.abs() < 1.0));
        let faked = sample(at_us as f64 / 1e6 + 2.0, spawned.skew, at_us as f64 / 1e6);
        std::fs::write(&path, "").expect("truncate");
        append(&path, &faked).expect("append");
        assert!(check(&spawned).as_drawn);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
