//! The adapter skeleton (docs/decisions/0039-adapter-skeleton.md): every adapter crate has the
//! same file for the same concern, implements each client trait in its own file, and keeps
//! its statements in `.sql` / `.lua` files in the directory named after the one module that
//! `include_str!`s them, never in a Rust string literal.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

use crate::source::{self, Crate};

/// The adapter crates.
pub const ADAPTERS: &[&str] = &["lease-sqlite", "lease-postgres", "lease-redis"];

/// The files every adapter has in src/, by concern.
const FILES: &[&str] = &[
    "lib",
    "backend",
    "config",
    "error",
    "execution",
    "heap",
    "store",
    "start",
    "effect",
    "fenced",
    "counts",
    "wakeup",
    "migrate",
];

/// Each client trait and the one file of an adapter that implements it.
pub const TRAIT_FILES: &[(&str, &str)] = &[
    ("ExecutionClient", "execution"),
    ("HeapClient", "heap"),
    ("StoreClient", "store"),
    ("StartClient", "start"),
    ("EffectClient", "effect"),
];

/// Concerns that are part of a client trait's calls (`counts`: `status_counts`), so an
/// adapter that runs that trait on the engine answers them there.
const PARTS: &[(&str, &str)] = &[("counts", "ExecutionClient")];

/// Words that open a SQL statement.
const SQL_WORDS: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "CREATE", "ALTER", "DROP",
];

/// Every break of the skeleton, one line each.
pub fn violations(root: &Path) -> Vec<String> {
    let crates = source::crates(root);
    let mut found = Vec::new();
    for krate in crates
        .iter()
        .filter(|k| ADAPTERS.contains(&k.name().as_str()))
    {
        found.extend(missing_files(root, krate));
        found.extend(misplaced_impls(krate));
        found.extend(inline_statements(krate));
        found.extend(stray_statement_files(root, krate));
    }
    found
}

fn missing_files(root: &Path, krate: &Crate) -> Vec<String> {
    let src = root.join(&krate.dir).join("src");
    FILES
        .iter()
        .filter(|f| !src.join(format!("{f}.rs")).is_file() && !src.join(f).join("mod.rs").is_file())
        .filter(|f| !runs_on_engine(krate, f))
        .map(|f| format!("{}: no src/{f}.rs", krate.dir.display()))
        .collect()
}

/// True when the client trait whose home is `file` (or that `file`'s concern is part of)
/// runs on lease-core's engine in this adapter (it implements the trait's `Forward*` twin
/// onto the engine): then the adapter has no file of its own for it.
fn runs_on_engine(krate: &Crate, file: &str) -> bool {
    let Some((_, name)) = PARTS
        .iter()
        .map(|(f, t)| (*f, *t))
        .chain(TRAIT_FILES.iter().map(|(t, f)| (*f, *t)))
        .find(|(f, _)| *f == file)
    else {
        return false;
    };
    let twin = format!("Forward{}", name.trim_end_matches("Client"));
    let is_twin = |item: &syn::Item| {
        let syn::Item::Impl(imp) = item else {
            return false;
        };
        imp.trait_
            .as_ref()
            .and_then(|(_, path, _)| path.segments.last())
            .is_some_and(|last| last.ident == twin)
    };
    krate
        .src
        .iter()
        .any(|f| !f.test && f.ast.items.iter().any(is_twin))
}

/// The client trait an impl block implements, if it is one of [`TRAIT_FILES`].
pub fn client_trait(item: &syn::ItemImpl) -> Option<&'static str> {
    let (_, path, _) = item.trait_.as_ref()?;
    let last = path.segments.last()?.ident.to_string();
    TRAIT_FILES.iter().map(|(t, _)| *t).find(|t| *t == last)
}

fn misplaced_impls(krate: &Crate) -> Vec<String> {
    let mut found = Vec::new();
    for file in krate.src.iter().filter(|f| !f.test) {
        for item in &file.ast.items {
            let syn::Item::Impl(imp) = item else { continue };
            let Some(name) = client_trait(imp) else {
                continue;
            };
            let (_, home) = TRAIT_FILES
                .iter()
                .find(|(t, _)| *t == name)
                .expect("listed");
            if file.module != [home.to_string()] {
                found.push(format!(
                    "{}: impl {name} belongs in src/{home}.rs",
                    file.path.display()
                ));
            }
        }
    }
    found
}

fn inline_statements(krate: &Crate) -> Vec<String> {
    let mut found = Vec::new();
    for file in krate.src.iter().filter(|f| !f.test) {
        let mut literals = Literals::default();
        literals.visit_file(&file.ast);
        for (line, text) in literals.found {
            if is_statement(&text) {
                let head: String = text.trim().chars().take(40).collect();
                found.push(format!(
                    "{}:{line}: statement in a Rust literal: {head:?}",
                    file.path.display()
                ));
            }
        }
    }
    found
}

/// SQL (a literal opening with a statement word) or Lua (a `redis.call`).
fn is_statement(text: &str) -> bool {
    let trimmed = text.trim_start();
    let first: String = trimmed
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let opens_sql = SQL_WORDS.contains(&first.to_ascii_uppercase().as_str())
        && trimmed[first.len()..].starts_with(char::is_whitespace);
    opens_sql || text.contains("redis.call(")
}

/// String literals outside test code, including those inside macro calls.
#[derive(Default)]
struct Literals {
    found: Vec<(usize, String)>,
}

impl Literals {
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        for tree in tokens {
            match tree {
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                proc_macro2::TokenTree::Literal(l) => {
                    if let Ok(syn::Lit::Str(s)) = syn::parse_str::<syn::Lit>(&l.to_string()) {
                        self.found.push((l.span().start().line, s.value()));
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Literals {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !source::is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !source::is_cfg_test(&f.attrs) && !source::is_test_fn(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.found.push((s.span().start().line, s.value()));
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
    }

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {
        // Doc comments show statements as examples; they are not run.
    }
}

/// A `.sql`/`.lua` file must sit in `src/P/` and be included by `src/P.rs` (as
/// `"last/name"`) or by `src/P/mod.rs` (as `"name"`).
fn stray_statement_files(root: &Path, krate: &Crate) -> Vec<String> {
    let src = root.join(&krate.dir).join("src");
    statement_files(&src)
        .into_iter()
        .filter(|file| !included_beside(&src, file))
        .map(|file| {
            format!(
                "{}: not include_str!'d by the module its directory is named after",
                file.strip_prefix(root).unwrap_or(&file).display()
            )
        })
        .collect()
}

fn included_beside(src: &Path, file: &Path) -> bool {
    let Some(dir) = file.parent().filter(|d| *d != src) else {
        return false;
    };
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let last = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let includes = |module: PathBuf, quoted: String| {
        std::fs::read_to_string(module).is_ok_and(|t| t.contains(&quoted))
    };
    includes(dir.with_extension("rs"), format!("\"{last}/{name}\""))
        || includes(dir.join("mod.rs"), format!("\"{name}\""))
}

fn statement_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "sql" || e == "lua") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}
