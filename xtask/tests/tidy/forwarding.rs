//! Wrappers forward every method: only backends implement the client traits themselves;
//! a wrapper implements the `Forward*` twins of lease-core's forward.rs, whose `forward!`
//! lists must name every method of their client trait (a method left out would fall back
//! to the trait's default instead of reaching the wrapped backend).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::skeleton::{ADAPTERS, TRAIT_FILES, client_trait};
use crate::source::{self, SourceFile};

/// Files that are backends, beside the adapters' own trait files: lease-core's engine for
/// stores with transactions (executions in one file, the other four traits in another; the
/// memory reference and the redb example are stores under it), the effect client of a
/// backend without effects (`NoEffects`), and the conformance suite's minimal out-of-tree
/// adapter and flawed lab backends.
const BACKEND_FILES: &[&str] = &[
    "crates/lease-core/src/engine.rs",
    "crates/lease-core/src/engine/rows.rs",
    "crates/lease-core/src/forward.rs",
    "crates/conformance/tests/minimal.rs",
    "crates/conformance/tests/mutants.rs",
];

/// Every direct impl by a non-backend and every twin that misses a method.
pub fn violations(root: &Path) -> Vec<String> {
    let mut found = direct_impls(root);
    found.extend(incomplete_twins(root));
    found
}

fn direct_impls(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for krate in source::crates(root) {
        let adapter = ADAPTERS.contains(&krate.name().as_str());
        for file in krate.src.iter().chain(&krate.other) {
            for (name, line) in impls_in(file) {
                let home = TRAIT_FILES
                    .iter()
                    .find(|(t, _)| *t == name)
                    .map(|(_, f)| *f);
                let is_backend =
                    (adapter && !file.test && home.is_some_and(|h| file.module == [h.to_string()]))
                        || BACKEND_FILES.iter().any(|b| file.path == Path::new(b));
                if !is_backend {
                    found.push(format!(
                        "{}:{line}: implements {name} directly; a wrapper implements Forward{} (lease_core::forward)",
                        file.path.display(),
                        name.trim_end_matches("Client")
                    ));
                }
            }
        }
    }
    found
}

/// (trait, line) of every client-trait impl in a file, inline modules included.
fn impls_in(file: &SourceFile) -> Vec<(&'static str, usize)> {
    fn walk(items: &[syn::Item], out: &mut Vec<(&'static str, usize)>) {
        for item in items {
            match item {
                syn::Item::Impl(imp) => {
                    if let Some(name) = client_trait(imp) {
                        out.push((name, imp.impl_token.span.start().line));
                    }
                }
                syn::Item::Mod(m) => {
                    if let Some((_, items)) = &m.content {
                        walk(items, out);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(&file.ast.items, &mut out);
    out
}

fn incomplete_twins(root: &Path) -> Vec<String> {
    let core = root.join("crates/lease-core/src");
    let traits = trait_methods(&read(&core.join("client.rs")));
    let twins = twin_methods(&read(&core.join("forward.rs")));
    let mut found = Vec::new();
    for (name, _) in TRAIT_FILES {
        let want = traits.get(*name).cloned().unwrap_or_default();
        let Some(have) = twins.get(*name) else {
            found.push(format!("forward.rs: no forward! twin of {name}"));
            continue;
        };
        for missing in want.difference(have) {
            found.push(format!(
                "forward.rs: the twin of {name} does not forward {missing}"
            ));
        }
        for extra in have.difference(&want) {
            found.push(format!(
                "forward.rs: the twin of {name} lists {extra}, not a method of it"
            ));
        }
    }
    found
}

fn read(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The method names of each trait a file declares.
fn trait_methods(file: &syn::File) -> BTreeMap<String, BTreeSet<String>> {
    file.items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Trait(t) => Some((
                t.ident.to_string(),
                t.items
                    .iter()
                    .filter_map(|i| match i {
                        syn::TraitItem::Fn(f) => Some(f.sig.ident.to_string()),
                        _ => None,
                    })
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

/// For each `forward! { Client => Twin, inner; ... }`, the methods it lists.
fn twin_methods(file: &syn::File) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for item in &file.items {
        let syn::Item::Macro(m) = item else { continue };
        if !m.mac.path.is_ident("forward") {
            continue;
        }
        let idents = idents(m.mac.tokens.clone());
        let Some(client) = idents.iter().find(|i| i.ends_with("Client")).cloned() else {
            continue;
        };
        let methods = idents
            .windows(2)
            .filter(|w| w[0] == "fn")
            .map(|w| w[1].clone())
            .collect();
        out.insert(client, methods);
    }
    out
}

fn idents(tokens: proc_macro2::TokenStream) -> Vec<String> {
    let mut out = Vec::new();
    for tree in tokens {
        match tree {
            proc_macro2::TokenTree::Ident(i) => out.push(i.to_string()),
            proc_macro2::TokenTree::Group(g) => out.extend(idents(g.stream())),
            _ => {}
        }
    }
    out
}
