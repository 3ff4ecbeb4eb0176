//! A small `--name value` / `--name=value` flag parser (no dependency needed for a dozen
//! flags).

use std::collections::BTreeMap;
use std::str::FromStr;

/// Parsed flags; each read removes the flag, and [`Flags::finish`] rejects leftovers.
#[derive(Debug)]
pub struct Flags {
    values: BTreeMap<String, String>,
}

impl Flags {
    /// Parses `args`; every flag takes a value except those listed in `switches` (none here:
    /// a switch is written `--keep` and reads as `true`).
    pub fn new(args: &[String]) -> Result<Self, String> {
        let mut values = BTreeMap::new();
        let mut it = args.iter().peekable();
        while let Some(arg) = it.next() {
            let Some(name) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument {arg:?}"));
            };
            let (name, value) = match name.split_once('=') {
                Some((n, v)) => (n.to_owned(), v.to_owned()),
                None => match it.peek() {
                    Some(v) if !v.starts_with("--") => {
                        let v = (*v).clone();
                        it.next();
                        (name.to_owned(), v)
                    }
                    _ => (name.to_owned(), "true".to_owned()),
                },
            };
            if values.insert(name.clone(), value).is_some() {
                return Err(format!("--{name} given twice"));
            }
        }
        Ok(Flags { values })
    }

    /// A flag's raw value.
    pub fn take(&mut self, name: &str) -> Option<String> {
        self.values.remove(name)
    }

    /// A flag that must be present.
    pub fn required(&mut self, name: &str) -> Result<String, String> {
        self.take(name)
            .ok_or_else(|| format!("--{name} is required"))
    }

    /// A number with a default.
    pub fn number<T: FromStr>(&mut self, name: &str, default: T) -> Result<T, String> {
        match self.take(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name} {v:?} is not a valid number")),
        }
    }

    /// A switch (`--keep`).
    pub fn switch(&mut self, name: &str) -> Result<bool, String> {
        match self.take(name).as_deref() {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(v) => Err(format!("--{name} takes no value (got {v:?})")),
        }
    }

    /// Fails on any flag nobody read.
    pub fn finish(self) -> Result<(), String> {
        match self.values.keys().next() {
            Some(name) => Err(format!("unknown flag --{name}")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn both_spellings_switches_and_leftovers() {
        let mut f =
            Flags::new(&args(&["--seed", "7", "--keep", "--faults=pause,kill"])).expect("parse");
        assert_eq!(f.number("seed", 0u64), Ok(7));
        assert_eq!(f.switch("keep"), Ok(true));
        assert_eq!(f.take("faults").as_deref(), Some("pause,kill"));
        assert_eq!(f.number("processes", 3usize), Ok(3));
        f.finish().expect("all read");
        let f = Flags::new(&args(&["--nope", "1"])).expect("parse");
        assert!(f.finish().is_err());
        assert!(Flags::new(&args(&["x"])).is_err());
        assert!(Flags::new(&args(&["--a", "1", "--a", "2"])).is_err());
        let mut f = Flags::new(&args(&["--seed", "x"])).expect("parse");
        assert!(f.number("seed", 0u64).is_err());
    }
}
