//! No function over 80 lines in the library crates (their src/ and examples), none over 150
//! anywhere outside tests. A function's length runs from its `fn` line to its closing brace;
//! test functions and `#[cfg(test)]` modules do not count.

use std::path::Path;

use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::source::{self, SourceFile};

/// The crates a user builds on: their code is read most, so the tighter limit.
const LIBRARY_CRATES: &[&str] = &[
    "lease",
    "lease-core",
    "lease-runtime",
    "lease-schedule",
    "lease-sqlite",
    "lease-postgres",
    "lease-redis",
    "conformance",
];

/// The limit in the library crates.
const LIBRARY_LIMIT: usize = 80;

/// The limit everywhere else outside tests.
const TOOL_LIMIT: usize = 150;

/// Every function over its crate's limit, as `path:line fn name: N lines (limit L)`.
pub fn violations(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for krate in source::crates(root) {
        let limit = if LIBRARY_CRATES.contains(&krate.name().as_str()) {
            LIBRARY_LIMIT
        } else {
            TOOL_LIMIT
        };
        for file in krate.src.iter().chain(&krate.other).filter(|f| !f.test) {
            found.extend(long_functions(file, limit));
        }
    }
    found
}

fn long_functions(file: &SourceFile, limit: usize) -> Vec<String> {
    let mut visitor = Lengths::default();
    visitor.visit_file(&file.ast);
    visitor
        .found
        .into_iter()
        .filter(|(_, _, lines)| *lines > limit)
        .map(|(name, line, lines)| {
            format!(
                "{}:{line} fn {name}: {lines} lines (limit {limit})",
                file.path.display()
            )
        })
        .collect()
}

/// Collects (name, first line, lines) of every non-test function.
#[derive(Default)]
struct Lengths {
    found: Vec<(String, usize, usize)>,
}

impl Lengths {
    fn record(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let first = sig.fn_token.span().start().line;
        let last = block.brace_token.span.close().end().line;
        self.found
            .push((sig.ident.to_string(), first, last.saturating_sub(first) + 1));
    }
}

impl<'ast> Visit<'ast> for Lengths {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !source::is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !source::is_test_fn(&f.attrs) && !source::is_cfg_test(&f.attrs) {
            self.record(&f.sig, &f.block);
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !source::is_cfg_test(&f.attrs) {
            self.record(&f.sig, &f.block);
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.record(&f.sig, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}
