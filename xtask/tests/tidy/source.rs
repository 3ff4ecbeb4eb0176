//! The tree as the rules see it: every crate's Rust files, parsed, each with the module
//! path it declares and whether it is test code.

use std::path::{Path, PathBuf};

/// One parsed Rust file of a crate.
pub struct SourceFile {
    /// The file, relative to the workspace root.
    pub path: PathBuf,
    /// Its module path inside its target (`[]` for lib.rs / main.rs, `["dispatcher",
    /// "runtime"]` for src/dispatcher/runtime.rs, were there one).
    pub module: Vec<String>,
    /// Test code: under tests/, or declared behind `#[cfg(test)]`.
    pub test: bool,
    /// The parsed file.
    pub ast: syn::File,
}

/// One crate of the workspace: its directory and the files of its `src/` tree.
pub struct Crate {
    /// The crate's directory, relative to the root (`crates/lease-core`, `xtask`).
    pub dir: PathBuf,
    /// Files of src/, by module path.
    pub src: Vec<SourceFile>,
    /// Every other Rust file (tests/, examples/, benches/, build scripts).
    pub other: Vec<SourceFile>,
}

impl Crate {
    /// The crate directory's last component (`lease-core`).
    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Every crate of the workspace (crates/*, the example crates examples/* and xtask), its
/// files parsed.
pub fn crates(root: &Path) -> Vec<Crate> {
    let mut dirs: Vec<PathBuf> = ["crates", "examples"]
        .iter()
        .filter_map(|top| std::fs::read_dir(root.join(top)).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    assert!(
        dirs.iter().any(|d| d.starts_with(root.join("crates"))),
        "no crate under crates/"
    );
    dirs.push(root.join("xtask"));
    dirs.sort();
    dirs.iter().map(|dir| load_crate(root, dir)).collect()
}

fn load_crate(root: &Path, dir: &Path) -> Crate {
    let mut src = Vec::new();
    let mut other = Vec::new();
    for path in rust_files(dir) {
        let rel = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
        let in_src = rel.starts_with("src");
        let text = std::fs::read_to_string(&path).expect("readable source");
        let ast = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{}: does not parse: {e}", path.display()));
        let file = SourceFile {
            path: path.strip_prefix(root).unwrap_or(&path).to_path_buf(),
            module: if in_src { module_of(&rel) } else { Vec::new() },
            test: !in_src && !rel.starts_with("examples"),
            ast,
        };
        if in_src {
            src.push(file)
        } else {
            other.push(file)
        }
    }
    mark_test_modules(&mut src);
    Crate {
        dir: dir.strip_prefix(root).unwrap_or(dir).to_path_buf(),
        src,
        other,
    }
}

/// Rust files below `dir`, without target dirs or nested workspaces (bench anchors).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let nested = d != dir && path.join("Cargo.toml").is_file();
                if !(name == "target" || name == "node_modules" || name.starts_with('.') || nested)
                {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The module path of a file below src/ (`src/a/mod.rs` and `src/a.rs` are `["a"]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .skip(1)
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Marks as test code the files that a `#[cfg(test)] mod name;` declares, and their
/// descendants.
fn mark_test_modules(src: &mut [SourceFile]) {
    let mut test_modules: Vec<Vec<String>> = Vec::new();
    for file in src.iter() {
        for item in &file.ast.items {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
                && is_cfg_test(&m.attrs)
            {
                let mut path = file.module.clone();
                path.push(m.ident.to_string());
                test_modules.push(path);
            }
        }
    }
    for file in src.iter_mut() {
        if test_modules.iter().any(|t| file.module.starts_with(t)) {
            file.test = true;
        }
    }
}

/// `#[cfg(test)]` among `attrs`.
pub fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| {
                l.tokens
                    .to_string()
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|t| t == "test")
            })
    })
}

/// A test function's attribute (`#[test]`, `#[tokio::test]`, `#[rstest]`, ...).
pub fn is_test_fn(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let last = a.path().segments.last().map(|s| s.ident.to_string());
        matches!(last.as_deref(), Some("test" | "rstest"))
    })
}
