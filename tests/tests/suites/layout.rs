//! The layout the design promises, checked: the top level holds at most 20 entries (what
//! git tracks, dot-files aside), and no two source files of a crate import each other
//! (`crate::…` and `super::…` paths, tests included): a pair that does is one thing split
//! in two, or a shared type that belongs further down.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn tracked(root: &Path) -> Vec<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_top_level_reads_like_the_design() {
    let root = inspect_tests::root();
    let top: BTreeSet<String> = tracked(&root)
        .iter()
        .map(|p| p.split('/').next().unwrap().to_owned())
        .filter(|p| !p.starts_with('.'))
        .collect();
    assert!(top.len() <= 20, "{} entries: {top:?}", top.len());
    for part in [
        "Cargo.toml",
        "worker",
        "durable",
        "supervisor",
        "wrangler.toml",
        "migrations",
        "web",
        "tests",
        "README.md",
    ] {
        assert!(top.contains(part), "{part} is not at the top: {top:?}");
    }
}

/// Each crate's source files by module path (`["engine", "queue"]`).
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
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
            out.insert(path, p);
        }
    }
    out
}

/// The module paths a file names with `crate::a::b…` or `super::a…`, each resolved to the
/// longest that is a file of the crate.
fn named(
    text: &str,
    me: &[String],
    is_mod: bool,
    files: &BTreeMap<Vec<String>, PathBuf>,
) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for (i, _) in text
        .match_indices("crate::")
        .chain(text.match_indices("super::"))
    {
        if i > 0
            && text[..i]
                .chars()
                .next_back()
                .is_some_and(|c| ident(c) || c == ':')
        {
            continue; // `$crate::`, `inspect_x::crate::`…
        }
        let rest = &text[i..];
        let mut segs: Vec<&str> = rest.split("::").collect();
        let mut base: Vec<String> = match segs.first() {
            Some(&"crate") => Vec::new(),
            _ => {
                // `super` from a file is its parent module (from a mod.rs: that module's parent).
                let mut b = me.to_vec();
                if !is_mod || !b.is_empty() {
                    b.pop();
                }
                b
            }
        };
        segs.remove(0);
        while segs.first() == Some(&"super") {
            base.pop();
            segs.remove(0);
        }
        let mut path = base;
        let mut best: Option<Vec<String>> = files.contains_key(&path).then(|| path.clone());
        for s in segs {
            let s: String = s.chars().take_while(|c| ident(*c)).collect();
            if s.is_empty() {
                break;
            }
            path.push(s);
            if files.contains_key(&path) {
                best = Some(path.clone());
            }
        }
        if let Some(b) = best {
            out.insert(b);
        }
    }
    out
}

#[test]
fn no_two_files_import_each_other() {
    let root = inspect_tests::root();
    let manifests: BTreeSet<PathBuf> = tracked(&root)
        .iter()
        .filter(|p| p.ends_with("Cargo.toml") && *p != "Cargo.toml")
        .map(|p| root.join(p).parent().unwrap().to_owned())
        .collect();
    assert!(manifests.len() > 20, "{manifests:?}");
    let mut pairs = Vec::new();
    for krate in manifests {
        let src = krate.join("src");
        if !src.is_dir() {
            continue;
        }
        let files = modules(&src);
        let mut edges: BTreeSet<(Vec<String>, Vec<String>)> = BTreeSet::new();
        for (me, file) in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let is_mod = file
                .file_name()
                .is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs");
            for other in named(&text, me, is_mod, &files) {
                if &other != me {
                    edges.insert((me.clone(), other));
                }
            }
        }
        for (a, b) in &edges {
            if a < b && edges.contains(&(b.clone(), a.clone())) {
                pairs.push(format!(
                    "{} <-> {}",
                    files[a].strip_prefix(&root).unwrap().display(),
                    files[b].strip_prefix(&root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        pairs.is_empty(),
        "files that import each other:\n{}",
        pairs.join("\n")
    );
}
