//! The payment provider: a simulated card processor that honours idempotency keys, as real
//! ones do, so a call repeated by a second holder of the lease charges once. It is an
//! external system: its state is a directory of plain files, outside the lease database and
//! every transaction of it, shared by the worker processes of one run and read back by the
//! orchestrator.
//!
//! - `charges/<hex of the key>.json`: one file per idempotency key, the charge the first
//!   call with that key made. It is written to a temporary file and hard-linked into place,
//!   which fails if the name exists: exactly one call per key creates it, whichever process,
//!   and a reader never sees a half-written charge.
//! - `calls.jsonl`: one line per call (key, caller, token, whether it charged, the receipt
//!   returned), appended with one `write` on a file opened for appending.
//!
//! A call with a key seen before charges nothing and returns the first call's response.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

/// A provider rooted at a directory (created if missing).
#[derive(Debug, Clone)]
pub struct Provider {
    dir: PathBuf,
}

/// What one call to the provider returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charged {
    /// The response, the same for every call with this key: `{"receipt", "charged_by"}`.
    pub response: Value,
    /// `true` for the call that made the charge; `false` for a repeat of its key.
    pub new: bool,
}

/// One line of the provider's call log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The idempotency key.
    pub key: String,
    /// The worker that called.
    pub caller: String,
    /// The caller's fencing token.
    pub token: u64,
    /// Whether this call made the charge.
    pub new: bool,
}

/// One charge the provider made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// The idempotency key it was made under.
    pub key: String,
    /// The order charged.
    pub order: u64,
    /// The amount.
    pub cents: u64,
    /// The response every call with the key gets.
    pub response: Value,
}

/// One charge request.
#[derive(Debug, Clone)]
pub struct ChargeRequest<'a> {
    /// The idempotency key (the charge step's effect id).
    pub key: &'a str,
    /// The calling worker's name.
    pub caller: &'a str,
    /// The caller's fencing token (logged only: the provider knows nothing of leases).
    pub token: u64,
    /// The order.
    pub order: u64,
    /// The amount.
    pub cents: u64,
}

impl Provider {
    /// The provider whose state lives in `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(dir.join("charges"))?;
        Ok(Provider { dir })
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Charges `request.cents` for `request.order` unless a charge with `request.key`
    /// exists, in which case that charge's response is returned and nothing is charged.
    pub fn charge(&self, request: &ChargeRequest<'_>) -> io::Result<Charged> {
        let response = json!({
            "receipt": format!("rcpt-{}-{}-{}", request.order, request.caller, request.token),
            "charged_by": request.caller,
        });
        let charge = json!({
            "key": request.key,
            "order": request.order,
            "cents": request.cents,
            "response": response,
        });
        // A name no other writer uses: this process, a counter of its calls.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join("charges").join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::write(&tmp, charge.to_string())?;
        let placed = self.place(&tmp, request.key);
        fs::remove_file(&tmp)?;
        let charged = match placed? {
            None => Charged {
                response,
                new: true,
            },
            Some(existing) => Charged {
                response: existing.response,
                new: false,
            },
        };
        self.log_call(request, &charged)?;
        Ok(charged)
    }

    /// Links `tmp` under `key`'s name: `None` when it is the first charge of `key`, else
    /// the charge already there. A long key's hashed name taken by another key (a
    /// collision) moves on to the next candidate, so names stay unique.
    fn place(&self, tmp: &Path, key: &str) -> io::Result<Option<Charge>> {
        for n in 0.. {
            let path = self.charge_path(key, n);
            match fs::hard_link(tmp, &path) {
                Ok(()) => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let existing = read_charge(&path)?;
                    if existing.key == key {
                        return Ok(Some(existing));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("an unbounded range ends")
    }

    /// Every call so far, in the order they were logged.
    pub fn calls(&self) -> io::Result<Vec<Call>> {
        let text = match fs::read_to_string(self.dir.join("calls.jsonl")) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        text.lines()
            .map(|line| {
                let v: Value = serde_json::from_str(line).map_err(io::Error::other)?;
                Ok(Call {
                    key: v["key"].as_str().unwrap_or_default().to_owned(),
                    caller: v["caller"].as_str().unwrap_or_default().to_owned(),
                    token: v["token"].as_u64().unwrap_or(0),
                    new: v["new"].as_bool().unwrap_or(false),
                })
            })
            .collect()
    }

    /// Every charge made, in key order.
    pub fn charges(&self) -> io::Result<Vec<Charge>> {
        let mut paths: Vec<PathBuf> = fs::read_dir(self.dir.join("charges"))?
            .map(|e| e.map(|e| e.path()))
            .collect::<io::Result<_>>()?;
        paths.retain(|p| p.extension().is_some_and(|x| x == "json"));
        let mut charges: Vec<Charge> = paths
            .iter()
            .map(|p| read_charge(p))
            .collect::<io::Result<_>>()?;
        charges.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(charges)
    }

    /// Candidate `n` of `key`'s file: the key in hex while that fits a file name (keys of
    /// up to [`MAX_HEX_KEY`] bytes, one name only), else `h<FNV-1a 64 of the key>-<n>`
    /// (`h` is no hex digit, so it never meets a short key's name. A longer key's hex name
    /// would pass the 255-byte file name limit and fail every redelivery).
    fn charge_path(&self, key: &str, n: u64) -> PathBuf {
        let name = if key.len() <= MAX_HEX_KEY {
            hex(key)
        } else {
            format!("h{:016x}-{n}", fnv1a(key.as_bytes()))
        };
        self.dir.join("charges").join(format!("{name}.json"))
    }

    fn log_call(&self, request: &ChargeRequest<'_>, charged: &Charged) -> io::Result<()> {
        let mut line = json!({
            "key": request.key,
            "caller": request.caller,
            "token": request.token,
            "new": charged.new,
            "receipt": charged.response["receipt"],
        })
        .to_string();
        line.push('\n');
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("calls.jsonl"))?;
        // One write of a short line to a file opened for appending: lines of concurrent
        // callers never interleave.
        log.write_all(line.as_bytes())
    }
}

fn read_charge(path: &Path) -> io::Result<Charge> {
    let v: Value = serde_json::from_str(&fs::read_to_string(path)?).map_err(io::Error::other)?;
    Ok(Charge {
        key: v["key"].as_str().unwrap_or_default().to_owned(),
        order: v["order"].as_u64().unwrap_or(0),
        cents: v["cents"].as_u64().unwrap_or(0),
        response: v["response"].clone(),
    })
}

/// A key as a file name: lower-case hex of its bytes (an effect id may hold any character).
/// The longest key named by its hex form: 2 * 125 + `.json` is 255 bytes, the usual limit
/// of a file name.
const MAX_HEX_KEY: usize = 125;

/// 64-bit FNV-1a (stable across builds, unlike `DefaultHasher`); uniqueness comes from
/// the collision check in `place`, not from the hash.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn hex(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(key: &'a str, caller: &'a str, token: u64) -> ChargeRequest<'a> {
        ChargeRequest {
            key,
            caller,
            token,
            order: 42,
            cents: 1999,
        }
    }

    #[test]
    fn a_repeated_key_charges_once_and_returns_the_first_response() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = Provider::open(dir.path()).expect("open");
        let first = p.charge(&request("8:order-42:charge", "A", 7)).expect("A");
        let again = p.charge(&request("8:order-42:charge", "B", 9)).expect("B");
        let other = p.charge(&request("8:order-43:charge", "B", 9)).expect("B");
        assert!(first.new && !again.new && other.new);
        assert_eq!(again.response, first.response);
        assert_eq!(first.response["receipt"], "rcpt-42-A-7");
        let calls = p.calls().expect("calls");
        assert_eq!(calls.len(), 3);
        assert_eq!((calls[1].caller.as_str(), calls[1].new), ("B", false));
        let charges = p.charges().expect("charges");
        assert_eq!(charges.len(), 2);
        assert_eq!(charges[0].cents, 1999);
    }

    /// A key too long for a hex file name charges once too.
    #[test]
    fn a_long_key_charges_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = Provider::open(dir.path()).expect("open");
        let long = "k".repeat(300);
        let other = format!("{long}x");
        let first = p.charge(&request(&long, "A", 7)).expect("A");
        let again = p.charge(&request(&long, "B", 9)).expect("B");
        let second = p.charge(&request(&other, "B", 9)).expect("other");
        assert!(first.new && !again.new && second.new);
        assert_eq!(again.response, first.response);
        let keys: Vec<String> = p
            .charges()
            .expect("charges")
            .into_iter()
            .map(|c| c.key)
            .collect();
        assert_eq!(keys, [long, other]);
    }

    /// Two long keys whose hashed names collide (forced by writing the first candidate of
    /// one under the other's key) both charge, each once.
    #[test]
    fn a_hashed_name_taken_by_another_key_moves_on() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = Provider::open(dir.path()).expect("open");
        let (a, b) = ("a".repeat(200), "b".repeat(200));
        let squatter = json!({"key": a, "order": 1, "cents": 1, "response": {"receipt": "r"}});
        fs::write(p.charge_path(&b, 0), squatter.to_string()).expect("squat");
        let first = p.charge(&request(&b, "A", 7)).expect("b");
        let again = p.charge(&request(&b, "B", 8)).expect("b again");
        assert!(first.new && !again.new);
        assert_eq!(again.response, first.response);
    }

    #[test]
    fn concurrent_calls_with_one_key_make_one_charge() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = Provider::open(dir.path()).expect("open");
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || {
                    p.charge(&request("k", &format!("w{i}"), i))
                        .expect("charge")
                })
            })
            .collect();
        let results: Vec<Charged> = threads
            .into_iter()
            .map(|t| t.join().expect("thread"))
            .collect();
        assert_eq!(results.iter().filter(|c| c.new).count(), 1);
        assert!(results.iter().all(|c| c.response == results[0].response));
        assert_eq!(p.calls().expect("calls").len(), 8);
        assert_eq!(p.charges().expect("charges").len(), 1);
    }
}
