//! Every setting the Worker-side code reads is documented: named in `.dev.vars.example`
//! (which the run command also uses as its list of names to pass from the environment) and
//! in the README or `docs/`. The reads are found in the source as the code makes them:
//! `setting(env, "NAME")`, a vendor reader's `get("NAME")` / `require(&get, &["NAME", …])`,
//! `env.var("NAME")` / `env.secret("NAME")`.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use std::collections::BTreeSet;
use std::path::Path;

/// The crates that run in the Worker or its objects (what reads Worker settings): every
/// workspace member but the native ones (the supervisor, the CLI, the tests).
fn worker_side(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let start = manifest.find("members = [").unwrap();
    let list = &manifest[start..start + manifest[start..].find(']').unwrap()];
    list.split('"')
        .skip(1)
        .step_by(2)
        .filter(|m| *m != "supervisor" && *m != "tests" && *m != "cli")
        .map(str::to_owned)
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target" && n != "tests") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs")
            && p.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
}

/// The upper-case names quoted right after each of `openers` in `text`.
fn names_after(text: &str, openers: &[&str], out: &mut BTreeSet<String>) {
    for opener in openers {
        let mut rest = text;
        while let Some(i) = rest.find(opener) {
            rest = &rest[i + opener.len()..];
            // The quoted names up to the closing bracket of the call.
            let end = rest.find(')').unwrap_or(rest.len());
            let args = &rest[..end];
            for (n, part) in args.split('"').enumerate() {
                if n % 2 == 1
                    && part.len() > 2
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
                    && part.as_bytes()[0].is_ascii_uppercase()
                {
                    out.insert(part.to_owned());
                }
            }
        }
    }
}

fn code_settings(root: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    let crates = worker_side(root);
    assert!(crates.len() > 10, "{crates:?}");
    for c in crates {
        rust_files(&root.join(c).join("src"), &mut files);
    }
    let mut names = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // Leave out the unit tests at the end of a file.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        names_after(
            text,
            &[
                "setting(env, ",
                "setting(&env, ",
                "setting(&self.env, ",
                "setting(env2, ",
                "get(\"",
                "require(&get, ",
                ".var(\"",
                ".secret(\"",
                "configured(&[",
            ],
            &mut names,
        );
    }
    names
}

#[test]
fn every_setting_the_code_reads_is_documented() {
    let root = inspect_tests::root();
    let read = code_settings(&root);
    assert!(
        read.contains("LOCAL_MODE") && read.contains("DAYTONA_API_KEY"),
        "{read:?}"
    );
    let example = std::fs::read_to_string(root.join(".dev.vars.example")).unwrap();
    let documented: BTreeSet<String> = example
        .lines()
        .filter_map(|l| {
            let l = l.trim_start_matches('#').trim();
            let (name, _) = l.split_once('=')?;
            (!name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'))
            .then(|| name.to_owned())
        })
        .collect();
    let mut docs = std::fs::read_to_string(root.join("README.md")).unwrap();
    for d in std::fs::read_dir(root.join("docs")).unwrap().flatten() {
        docs.push_str(&std::fs::read_to_string(d.path()).unwrap_or_default());
    }
    let missing_example: Vec<&String> = read.iter().filter(|n| !documented.contains(*n)).collect();
    let missing_docs: Vec<&String> = read.iter().filter(|n| !docs.contains(n.as_str())).collect();
    assert!(
        missing_example.is_empty(),
        "read by the code but not in .dev.vars.example: {missing_example:?}"
    );
    assert!(
        missing_docs.is_empty(),
        "read by the code but not in the README or docs/: {missing_docs:?}"
    );
}
