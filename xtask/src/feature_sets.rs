//! One feature set per registry crate across test-all's rows (checked by a test only).
//!
//! Cargo resolves features per invocation. When two rows give tokio (or any crate below
//! this workspace's) different features, the second row rebuilds that crate and everything
//! above it, this workspace's crates included: a cold CI run spent most of its time so.
//! `crates/workspace-hack` asks for the union; this test names any crate a row still
//! resolves differently, with the features to add there.

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;
    use std::process::Command;

    use crate::matrix::MATRIX;

    /// Rows whose different features are their purpose: the JSON row turns on serde_json's
    /// optional features, and xtask's own rows build syn as a library for the tidy checks.
    const OWN_FEATURES: &[&str] = &["json-features", "xtask", "tidy"];

    /// `cargo tree` arguments for a row: its packages and features, without the test
    /// filters (`--test NAME`, anything after `--`) and `--no-fail-fast`.
    fn tree_args(cargo_test: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        let mut args = cargo_test.iter().take_while(|a| **a != "--");
        while let Some(arg) = args.next() {
            match *arg {
                "--test" => {
                    args.next();
                }
                "--no-fail-fast" => {}
                other => out.push(other.to_owned()),
            }
        }
        out
    }

    /// For each registry crate (`name version`) of one row, the feature sets it is built with
    /// (one for target builds, another where proc macros use it, ...).
    fn feature_sets(root: &Path, args: &[String]) -> BTreeMap<String, BTreeSet<String>> {
        let out = Command::new(env!("CARGO"))
            .current_dir(root)
            .args(["tree", "--locked", "-e", "normal,dev", "--prefix", "none"])
            .args(["-f", "{p}|{f}"])
            .args(args)
            .output()
            .expect("run cargo tree");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut sets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // A crate printed before is marked ` (*)` after the whole line.
            let line = line.trim_end_matches(" (*)");
            let Some((package, features)) = line.split_once('|') else {
                continue;
            };
            // This workspace's crates (a path in parentheses) may differ by row: the facade
            // row turns on `otel` and `metrics`.
            if package.contains("(/") {
                continue;
            }
            let package = package.trim_end_matches(" (proc-macro)");
            let name = package.split(' ').take(2).collect::<Vec<_>>().join(" ");
            sets.entry(name)
                .or_default()
                .insert(features.trim().to_owned());
        }
        sets
    }

    #[test]
    fn rows_share_one_feature_set() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut seen: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
        let mut differ = Vec::new();
        for row in MATRIX.iter().filter(|r| !OWN_FEATURES.contains(&r.name)) {
            for (package, sets) in feature_sets(&root, &tree_args(row.cargo_test)) {
                match seen.get(&package) {
                    None => {
                        seen.insert(package, (row.name.to_owned(), sets));
                    }
                    Some((first, known)) if *known != sets => differ.push(format!(
                        "{package}: row {first} builds it with {known:?}, row {} with {sets:?}",
                        row.name
                    )),
                    Some(_) => {}
                }
            }
        }
        assert!(
            differ.is_empty(),
            "rows resolve crates differently (each such row rebuilds them and everything \
             above); add the union to crates/workspace-hack:\n{}",
            differ.join("\n")
        );
    }

    #[test]
    fn tree_arguments_keep_packages_and_features_only() {
        let args = tree_args(&["-p", "a", "--test", "t", "--features", "f", "--", "x"]);
        assert_eq!(args, ["-p", "a", "--features", "f"]);
    }
}
