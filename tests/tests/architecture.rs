//! The shape of the code, read from the sources: the crate arrows (model at the bottom,
//! sim and live apart, figures never on live), libraries without clap, and no file inside
//! a crate that uses another file which uses it back (an import circle), so each file can
//! be read knowing only what lies below it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// The workspace crates a manifest's `[dependencies]` names, and whether it names clap.
fn dependencies(manifest: &Path) -> (BTreeSet<String>, bool) {
    let text = std::fs::read_to_string(manifest).expect("manifest");
    let mut in_deps = false;
    let (mut ours, mut clap) = (BTreeSet::new(), false);
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        let name = line.split(['.', ' ', '=']).next().unwrap_or("");
        if in_deps && name.starts_with("heisenbench-") {
            ours.insert(name.trim_start_matches("heisenbench-").to_string());
        }
        clap |= in_deps && name == "clap";
    }
    (ours, clap)
}

#[test]
fn the_crate_arrows_hold_and_libraries_are_clap_free() {
    let root = workspace();
    let expected: [(&str, &[&str]); 4] = [
        ("model", &[]),
        ("sim", &["model"]),
        ("live", &["model"]),
        ("figures", &["model", "sim"]),
    ];
    for (krate, allowed) in expected {
        let (ours, clap) = dependencies(&root.join(krate).join("Cargo.toml"));
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            ours, allowed,
            "{krate} depends on workspace crates {ours:?}"
        );
        assert!(!clap, "{krate} depends on clap: flags belong to the binary");
    }
    let (binary, clap) = dependencies(&root.join("Cargo.toml"));
    assert!(
        binary.contains("live") && clap,
        "the binary's manifest was not read"
    );
}

/// A module's path inside its crate (`["mock", "job"]`), per source file.
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("source folder").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src).expect("under src").with_extension("");
            let mut path: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                path.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                path.pop();
            }
            (path, p)
        })
        .collect()
}

/// The paths a source names through `crate::` or `super::` (outside comments and its test
/// module), resolved against `module`; a `{...}` group gives each of its members.
fn named_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let ident_at = |mut i: usize| {
        let start = i;
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
        (&code[start..i], i)
    };
    let mut out = Vec::new();
    let starts = code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
        // The head of a path, not `super` inside `super::super::` or `foo_crate::`.
        .filter(|(at, _)| *at == 0 || !(is_ident(bytes[at - 1]) || bytes[at - 1] == b':'));
    for (at, head) in starts {
        let mut base: Vec<String> = match head {
            "crate::" => Vec::new(),
            _ => module[..module.len().saturating_sub(1)].to_vec(),
        };
        let mut i = at + head.len();
        loop {
            let (word, next) = ident_at(i);
            if word == "super" {
                base.pop();
            } else if !word.is_empty() {
                base.push(word.to_string());
            }
            let group = if code[next..].starts_with("::{") {
                Some(next + 3)
            } else if word.is_empty() && code[next..].starts_with('{') {
                Some(next + 1)
            } else {
                None
            };
            if let Some(open) = group {
                // A group: each member's leading segments.
                let end = code[open..].find('}').map_or(code.len(), |e| open + e);
                for member in code[open..end].split(',') {
                    let mut p = base.clone();
                    p.extend(
                        member
                            .trim()
                            .split("::")
                            .take_while(|s| !s.is_empty() && s.bytes().all(is_ident))
                            .map(str::to_string),
                    );
                    out.push(p);
                }
                break;
            }
            if word.is_empty() || !code[next..].starts_with("::") {
                out.push(base);
                break;
            }
            i = next + 2;
        }
    }
    out
}

/// Each module's sibling-or-cousin modules it names (a module naming its own ancestor or
/// descendant is a part and its whole, not a circle).
fn import_graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mods = modules(src);
    let mut graph = BTreeMap::new();
    for (m, file) in &mods {
        let text = std::fs::read_to_string(file).expect("source");
        let mut edges = BTreeSet::new();
        for mut target in named_paths(&text, m) {
            while !target.is_empty() && !mods.contains_key(&target) {
                target.pop();
            }
            let nested = target.starts_with(m) || m.starts_with(&target);
            if !nested {
                edges.insert(target);
            }
        }
        graph.insert(m.clone(), edges);
    }
    graph
}

/// A circle in `graph`, as the modules along it, if there is one.
fn circle(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    fn visit(
        m: &Vec<String>,
        graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        done: &mut BTreeSet<Vec<String>>,
        path: &mut Vec<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c: Vec<String> = path[i..].iter().map(|p| p.join("/")).collect();
            c.push(m.join("/"));
            return Some(c);
        }
        if !done.insert(m.clone()) {
            return None;
        }
        path.push(m.clone());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, done, path) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut done, &mut Vec::new()))
}

#[test]
fn no_file_imports_one_that_imports_it_back() {
    let root = workspace();
    for krate in ["model", "sim", "live", "figures", "."] {
        let graph = import_graph(&root.join(krate).join("src"));
        let edges: usize = graph.values().map(BTreeSet::len).sum();
        assert!(
            edges > 0 || krate == "model",
            "{krate}: no imports were found"
        );
        assert_eq!(circle(&graph), None, "an import circle in {krate}");
    }
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let dir = std::env::temp_dir().join(format!("heisenbench-arch-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod x;\n").unwrap();
    // x names b through a group, b names x by its full path: a circle of two.
    std::fs::write(dir.join("a/x.rs"), "use crate::{b::B, a::x};\n").unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "// use crate::c;\npub struct B(crate::a::x::X);\n",
    )
    .unwrap();
    let graph = import_graph(&dir);
    assert_eq!(
        circle(&graph),
        Some(vec!["a/x".into(), "b".into(), "a/x".into()])
    );
    // A child naming its parent through super is no circle.
    std::fs::write(dir.join("b.rs"), "pub struct B;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod x;\nuse x::Y;\n").unwrap();
    std::fs::write(
        dir.join("a/x.rs"),
        "use super::super::b::B;\nuse super::Z;\n",
    )
    .unwrap();
    let graph = import_graph(&dir);
    assert_eq!(circle(&graph), None);
    assert!(graph[&vec!["a".to_string(), "x".to_string()]].contains(&vec!["b".to_string()]));
    let _ = std::fs::remove_dir_all(&dir);
}
