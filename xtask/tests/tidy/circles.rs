//! No import circle between the modules (files) of a crate: module A uses an item of module
//! B through a `crate::`, `super::`, `self::` or child-module path, and B uses A, directly
//! or through a chain. A facade (a `lib.rs` or `mod.rs` holding only `mod` lines and
//! re-exports) is no module of its own here: a path through one of its re-exports is a use
//! of the module that defines the item. Test code does not count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::visit::Visit;

use crate::source::{self, Crate, SourceFile};

/// A module path inside a crate.
type Module = Vec<String>;

/// Circles known and not yet broken, each exactly (crate, its modules), with why. A known
/// circle that changes shape or is gone is reported too, so this list only shrinks.
///
/// Empty: lease-core's two (the vocabulary's, `LeaseError` naming the ids and tokens that
/// validate into it; the dispatcher's, every module taking `&Shared` from runtime.rs, now in
/// lease-runtime) were broken by giving the named data its own leaf modules (`ids::names`,
/// `lease::token`, `time::timestamp`, and lease-runtime's `shared` and `ack_queue`).
const KNOWN: &[(&str, &[&str])] = &[];

/// Every circle, as `crate: a -> b (via path), b -> a (via path)`, but the [`KNOWN`] ones;
/// a [`KNOWN`] one no longer found is reported as stale.
pub fn violations(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for krate in source::crates(root) {
        for (scc, text) in circles_of(&krate) {
            let names: Vec<String> = scc.iter().map(show).collect();
            let known = KNOWN.iter().position(|(k, members)| {
                *k == krate.name() && members.iter().copied().eq(names.iter().map(String::as_str))
            });
            match known {
                Some(i) => {
                    seen.insert(i);
                }
                None => found.push(text),
            }
        }
    }
    for (i, (krate, members)) in KNOWN.iter().enumerate() {
        if !seen.contains(&i) {
            found.push(format!(
                "{krate}: known circle {members:?} is gone or changed: update KNOWN"
            ));
        }
    }
    found
}

fn circles_of(krate: &Crate) -> Vec<(BTreeSet<Module>, String)> {
    let files: Vec<&SourceFile> = krate.src.iter().filter(|f| !f.test).collect();
    let graph = Graph::new(&files);
    let edges = graph.edges();
    strongly_connected(&edges)
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let text = describe(&krate.name(), &scc, &edges);
            (scc, text)
        })
        .collect()
}

fn describe(krate: &str, scc: &BTreeSet<Module>, edges: &Edges) -> String {
    let mut parts = Vec::new();
    for from in scc {
        for (to, via) in &edges[from] {
            if scc.contains(to) {
                parts.push(format!("{} -> {} (via {via})", show(from), show(to)));
            }
        }
    }
    format!("{krate}: {}", parts.join(", "))
}

fn show(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// For each module, the modules it uses and one path that shows it.
type Edges = BTreeMap<Module, BTreeMap<Module, String>>;

/// The files of one crate and their re-exports.
struct Graph<'a> {
    files: BTreeMap<Module, &'a SourceFile>,
    facades: BTreeSet<Module>,
    reexports: BTreeMap<Module, Vec<(String, Module)>>,
}

impl<'a> Graph<'a> {
    fn new(files: &[&'a SourceFile]) -> Self {
        let files: BTreeMap<Module, &SourceFile> =
            files.iter().map(|f| (f.module.clone(), *f)).collect();
        let facades = files
            .iter()
            .filter(|(_, f)| is_facade(f))
            .map(|(m, _)| m.clone())
            .collect();
        let reexports = files
            .iter()
            .map(|(m, f)| (m.clone(), reexports_of(m, &f.ast, &files)))
            .collect();
        Graph {
            files,
            facades,
            reexports,
        }
    }

    fn edges(&self) -> Edges {
        let mut edges = Edges::new();
        for (module, file) in &self.files {
            let out = edges.entry(module.clone()).or_default();
            if self.facades.contains(module) {
                continue;
            }
            let mut uses = Uses::new(module.clone(), &self.files);
            uses.visit_file(&file.ast);
            for (path, shown) in uses.paths {
                if let Some(target) = self.resolve(&path, 0)
                    && target != *module
                    && !self.facades.contains(&target)
                {
                    out.entry(target).or_insert(shown);
                }
            }
        }
        edges
    }

    /// The module that defines what absolute `path` names, through facades' re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<Module> {
        let (module, rest) = self.longest_module(path)?;
        if !self.facades.contains(&module) && !self.is_reexport(&module, rest) || depth > 8 {
            return Some(module);
        }
        let Some(name) = rest.first() else {
            return Some(module);
        };
        for (exported, source) in &self.reexports[&module] {
            if exported == name || exported == "*" {
                let mut next = source.clone();
                if exported == "*" {
                    next.push(name.clone());
                }
                next.extend(rest[1..].iter().cloned());
                if let Some(found) = self.resolve(&next, depth + 1)
                    && (exported != "*" || found != module)
                {
                    return Some(found);
                }
            }
        }
        Some(module)
    }

    fn is_reexport(&self, module: &Module, rest: &[String]) -> bool {
        rest.first()
            .is_some_and(|name| self.reexports[module].iter().any(|(e, _)| e == name))
    }

    fn longest_module<'p>(&self, path: &'p [String]) -> Option<(Module, &'p [String])> {
        (0..=path.len())
            .rev()
            .find(|n| self.files.contains_key(&path[..*n]))
            .map(|n| (path[..n].to_vec(), &path[n..]))
    }
}

/// A file with only `mod` lines, re-exports, macros and attributes: a facade.
fn is_facade(file: &SourceFile) -> bool {
    let is_root = file.path.ends_with("lib.rs") || file.path.ends_with("mod.rs");
    is_root
        && file.ast.items.iter().all(|item| match item {
            syn::Item::Mod(m) => m.content.is_none() || source::is_cfg_test(&m.attrs),
            syn::Item::Use(u) => !matches!(u.vis, syn::Visibility::Inherited),
            syn::Item::Macro(_) => true,
            _ => false,
        })
}

/// The names a file re-exports (`pub use`, any visibility but private), each with the
/// absolute path it stands for; `*` for a glob.
fn reexports_of(
    module: &Module,
    file: &syn::File,
    files: &BTreeMap<Module, &SourceFile>,
) -> Vec<(String, Module)> {
    let mut out = Vec::new();
    for item in &file.items {
        if let syn::Item::Use(u) = item
            && !matches!(u.vis, syn::Visibility::Inherited)
        {
            for (name, path) in flatten(&u.tree, Vec::new()) {
                if let Some(abs) = absolute(module, &path, files) {
                    out.push((name, abs));
                }
            }
        }
    }
    out
}

/// Each leaf of a use tree: the name it binds (`*` for a glob) and its path.
fn flatten(tree: &syn::UseTree, prefix: Vec<String>) -> Vec<(String, Vec<String>)> {
    let with = |seg: String| {
        let mut p = prefix.clone();
        p.push(seg);
        p
    };
    match tree {
        syn::UseTree::Path(p) => flatten(&p.tree, with(p.ident.to_string())),
        syn::UseTree::Name(n) if n.ident == "self" => {
            let name = prefix.last().cloned().unwrap_or_default();
            vec![(name, prefix)]
        }
        syn::UseTree::Name(n) => vec![(n.ident.to_string(), with(n.ident.to_string()))],
        syn::UseTree::Rename(r) => vec![(r.rename.to_string(), with(r.ident.to_string()))],
        syn::UseTree::Glob(_) => vec![("*".into(), prefix)],
        syn::UseTree::Group(g) => g
            .items
            .iter()
            .flat_map(|t| flatten(t, prefix.clone()))
            .collect(),
    }
}

/// `path` as written in `module`, made absolute (`None`: another crate or a local item).
fn absolute(
    module: &Module,
    path: &[String],
    files: &BTreeMap<Module, &SourceFile>,
) -> Option<Module> {
    let first = path.first()?;
    let mut base = module.clone();
    let mut rest = path;
    match first.as_str() {
        "crate" => {
            base.clear();
            rest = &path[1..];
        }
        "self" => rest = &path[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        child => {
            let mut candidate = base.clone();
            candidate.push(child.to_owned());
            if !files.contains_key(&candidate) {
                return None;
            }
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Every path a file uses, absolute, with the text that shows it.
struct Uses<'a> {
    module: Module,
    inline: Vec<String>,
    files: &'a BTreeMap<Module, &'a SourceFile>,
    paths: Vec<(Module, String)>,
}

impl<'a> Uses<'a> {
    fn new(module: Module, files: &'a BTreeMap<Module, &'a SourceFile>) -> Self {
        Uses {
            module,
            inline: Vec::new(),
            files,
            paths: Vec::new(),
        }
    }

    fn here(&self) -> Module {
        let mut m = self.module.clone();
        m.extend(self.inline.iter().cloned());
        m
    }

    fn add(&mut self, path: Vec<String>) {
        if let Some(abs) = absolute(&self.here(), &path, self.files) {
            self.paths.push((abs, path.join("::")));
        }
    }
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() && !source::is_cfg_test(&m.attrs) {
            self.inline.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.inline.pop();
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !source::is_cfg_test(&f.attrs) && !source::is_test_fn(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        for (_, path) in flatten(&u.tree, Vec::new()) {
            self.add(path);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() > 1 {
            self.add(p.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, p);
    }
}

/// Tarjan's strongly connected components of `edges`.
fn strongly_connected(edges: &Edges) -> Vec<BTreeSet<Module>> {
    struct State<'e> {
        edges: &'e Edges,
        index: BTreeMap<&'e Module, usize>,
        low: BTreeMap<&'e Module, usize>,
        stack: Vec<&'e Module>,
        on_stack: BTreeSet<&'e Module>,
        out: Vec<BTreeSet<Module>>,
    }
    fn visit<'e>(s: &mut State<'e>, v: &'e Module) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flat_map(|m| m.keys()) {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.insert(w.clone());
                if w == v {
                    break;
                }
            }
            s.out.push(scc);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.out
}
