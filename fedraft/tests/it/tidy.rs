//! Tidiness rules of the workspace that no compiler checks, run as an ordinary test so that they
//! hold on every `cargo test`:
//! - every Rust source file under a crate's `src/`, `tests/`, `benches/` and `examples/` opens
//!   with a `//!` doc comment (the first non-empty line), which says what the file owns and
//!   must not do;
//! - no such file is longer than [`MAX_LINES`] lines unless [`LONG_FILES`] records why;
//! - `ARCHITECTURE.md` has one section per workspace crate, headed ``### `PATH/` (PACKAGE)``,
//!   whose one `Modules:` paragraph names exactly the crate's top-level modules (`src/foo.rs` or
//!   `src/foo/`; `lib.rs`, `main.rs` and `src/bin/` are not modules), and every path it names
//!   in backticks (`core/src/`, `docs/performance.md`) exists.
//!
//! The crates are the `members` of the root `Cargo.toml`, so moving a crate needs no change
//! here. Each failure says which file to change and how. Must not: write anything, or know a
//! crate by name.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Longest a source file may be before it is split (or listed in [`LONG_FILES`]).
const MAX_LINES: usize = 600;

/// Files allowed past [`MAX_LINES`], each with the reason. Paths are relative to the workspace
/// root. An entry whose file is gone or back under the limit fails the test, so the list only
/// ever holds files that need it.
const LONG_FILES: &[(&str, &str)] = &[
    (
        "apiserver/tests/it/api.rs",
        "one three-node cluster walked through every endpoint and error in order; starting a \
         cluster per resource would multiply the test's run time",
    ),
    (
        "core/src/state/mod.rs",
        "`State::apply`'s one match over every command is the dispatch table the handlers hang \
         from; cutting it in two would hide which handler a command reaches",
    ),
    (
        "core/tests/it/scheduler_rules.rs",
        "one test per scheduling rule through `schedule`; the bulk is cluster and spec fixtures",
    ),
];

/// Where a crate keeps Rust sources that must carry a `//!` header.
const SOURCE_DIRS: &[&str] = &["src", "tests", "benches", "examples"];

/// The line that lists a crate's modules inside its `ARCHITECTURE.md` section.
const MODULES_PREFIX: &str = "Modules:";

fn root() -> PathBuf {
    crate::manifest_dir()
        .parent()
        .expect("the fedraft crate sits one level below the workspace root")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// A workspace crate: its directory relative to the root and its package name.
#[derive(Debug)]
struct Member {
    path: String,
    package: String,
}

/// The root `Cargo.toml`'s members (a trailing `/*` expands to every subdirectory with a
/// `Cargo.toml`), each with the package name from its own manifest.
fn members(root: &Path) -> Vec<Member> {
    let manifest: toml::Table = toml::from_str(&read(&root.join("Cargo.toml")))
        .unwrap_or_else(|e| panic!("Cargo.toml does not parse: {e}"));
    let listed = manifest
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
        .expect("Cargo.toml has a [workspace] members array");
    let mut paths = Vec::new();
    for entry in listed {
        let entry = entry.as_str().expect("workspace members are strings");
        match entry.strip_suffix("/*") {
            Some(parent) => {
                let mut found: Vec<String> = fs::read_dir(root.join(parent))
                    .unwrap_or_else(|e| panic!("reading {parent}/: {e}"))
                    .filter_map(|d| d.ok())
                    .filter(|d| d.path().join("Cargo.toml").is_file())
                    .map(|d| format!("{parent}/{}", d.file_name().to_string_lossy()))
                    .collect();
                found.sort();
                paths.extend(found);
            }
            None => paths.push(entry.trim_end_matches('/').to_string()),
        }
    }
    paths
        .into_iter()
        .map(|path| {
            let crate_manifest: toml::Table =
                toml::from_str(&read(&root.join(&path).join("Cargo.toml")))
                    .unwrap_or_else(|e| panic!("{path}/Cargo.toml does not parse: {e}"));
            let package = crate_manifest
                .get("package")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
                .unwrap_or_else(|| panic!("{path}/Cargo.toml has no [package] name"))
                .to_string();
            Member { path, package }
        })
        .collect()
}

/// Every `.rs` file under `dir`, recursively, in name order.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Every checked source file: (path relative to the root, contents).
fn sources(root: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for member in members(root) {
        for dir in SOURCE_DIRS {
            rust_files(&root.join(&member.path).join(dir), &mut files);
        }
    }
    files
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(root).unwrap_or(path.as_path());
            (rel.to_string_lossy().replace('\\', "/"), read(&path))
        })
        .collect()
}

/// Why a file's opening fails the header rule, if it does.
fn header_problem(text: &str) -> Option<String> {
    match text.lines().map(str::trim).find(|l| !l.is_empty()) {
        None => Some("the file is empty".to_string()),
        Some(first) if first.starts_with("//!") => None,
        Some(first) => Some(format!("it opens with `{first}`")),
    }
}

/// A crate's top-level modules: `src/foo.rs` and `src/foo/` (a directory holding Rust
/// sources) name `foo`; `lib.rs`, `main.rs` and `bin/` are the crate's roots, not modules.
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    let Ok(entries) = fs::read_dir(src) else {
        return modules;
    };
    for entry in entries.filter_map(|e| e.ok()) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            let mut inside = Vec::new();
            rust_files(&path, &mut inside);
            if name != "bin" && !inside.is_empty() {
                modules.insert(name);
            }
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "lib" && stem != "main" {
                modules.insert(stem.to_string());
            }
        }
    }
    modules
}

/// One crate section of `ARCHITECTURE.md`.
#[derive(Debug, PartialEq)]
struct Section {
    /// 1-based line of the heading.
    line: usize,
    path: String,
    package: String,
    /// Each `Modules:` line of the section: its line number and the names in backticks.
    module_lines: Vec<(usize, Vec<String>)>,
}

/// The names in backticks on one line, in order.
fn backticked(line: &str) -> Vec<String> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// A crate heading: ``### `PATH/` (PACKAGE)``.
fn crate_heading(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix("### `")?;
    let (path, rest) = rest.split_once("/` (")?;
    let package = rest.strip_suffix(')')?;
    Some((path.to_string(), package.to_string()))
}

/// The crate sections of an architecture document, in order. A section runs from its heading
/// to the next heading of any level. A `Modules:` paragraph may wrap: it runs to the next blank
/// line.
fn sections(doc: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut open = false;
    let mut in_modules = false;
    for (i, line) in doc.lines().enumerate() {
        if line.starts_with('#') {
            open = false;
            in_modules = false;
            if let Some((path, package)) = crate_heading(line) {
                out.push(Section {
                    line: i + 1,
                    path,
                    package,
                    module_lines: Vec::new(),
                });
                open = true;
            }
            continue;
        }
        let Some(section) = out.last_mut().filter(|_| open) else {
            continue;
        };
        if line.trim().is_empty() {
            in_modules = false;
        } else if line.starts_with(MODULES_PREFIX) {
            section.module_lines.push((i + 1, backticked(line)));
            in_modules = true;
        } else if in_modules {
            if let Some((_, names)) = section.module_lines.last_mut() {
                names.extend(backticked(line));
            }
        }
    }
    out
}

/// Whether a backticked token is meant as a path in the workspace: a relative path of plain
/// characters that ends in `/` or in a file extension (`core/src/`, `deploy/README.md`).
/// URLs, API routes (`/v1/...`), label selectors and type paths are not.
fn is_path_reference(token: &str) -> bool {
    let plain = token
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '.'));
    if !plain || !token.contains('/') || token.starts_with('/') || token.starts_with('.') {
        return false;
    }
    let last = token.rsplit('/').next().unwrap_or("");
    token.ends_with('/')
        || ["rs", "md", "toml", "sh", "yaml", "yml", "json"]
            .iter()
            .any(|ext| last.ends_with(&format!(".{ext}")))
}

fn fail_on(problems: Vec<String>, what: &str) {
    assert!(
        problems.is_empty(),
        "tidy: {} problem(s) with {what}:\n- {}",
        problems.len(),
        problems.join("\n- ")
    );
}

#[test]
fn every_source_file_opens_with_a_doc_comment() {
    let problems: Vec<String> = sources(&root())
        .iter()
        .filter_map(|(path, text)| {
            header_problem(text).map(|why| {
                format!(
                    "{path}: {why}; make the first non-empty line a `//!` comment saying what \
                     the file owns and must not do (attributes go after it)"
                )
            })
        })
        .collect();
    fail_on(problems, "module doc comments");
}

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let root = root();
    let allowed: BTreeMap<&str, &str> = LONG_FILES.iter().copied().collect();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for (path, text) in sources(&root) {
        let lines = text.lines().count();
        if allowed.contains_key(path.as_str()) {
            seen.insert(path.clone());
            if lines <= MAX_LINES {
                problems.push(format!(
                    "{path}: {lines} lines, within the {MAX_LINES}-line limit now; remove its \
                     entry from LONG_FILES in fedraft/tests/tidy.rs"
                ));
            }
        } else if lines > MAX_LINES {
            problems.push(format!(
                "{path}: {lines} lines, over the {MAX_LINES}-line limit; split it, or add \
                 (\"{path}\", \"<why it stays long>\") to LONG_FILES in fedraft/tests/tidy.rs"
            ));
        }
    }
    for path in allowed.keys().filter(|p| !seen.contains(**p)) {
        problems.push(format!(
            "LONG_FILES in fedraft/tests/tidy.rs lists {path}, which is not a checked source \
             file (moved or removed?); update or remove the entry"
        ));
    }
    fail_on(problems, "file lengths");
}

#[test]
fn architecture_has_a_section_per_crate_naming_its_modules() {
    let root = root();
    let doc = read(&root.join("ARCHITECTURE.md"));
    let members = members(&root);
    let sections = sections(&doc);
    let mut problems = Vec::new();

    for section in &sections {
        let same: Vec<_> = sections.iter().filter(|s| s.path == section.path).collect();
        if same.len() > 1 && same[0].line == section.line {
            problems.push(format!(
                "ARCHITECTURE.md lines {}: {} sections for `{}/`; keep one",
                same.iter()
                    .map(|s| s.line.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                same.len(),
                section.path
            ));
        }
        if !members.iter().any(|m| m.path == section.path) {
            problems.push(format!(
                "ARCHITECTURE.md line {}: section `{}/` ({}) names no workspace member of \
                 Cargo.toml ({}); fix its path or remove it",
                section.line,
                section.path,
                section.package,
                members
                    .iter()
                    .map(|m| m.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }

    for member in &members {
        let Some(section) = sections.iter().find(|s| s.path == member.path) else {
            problems.push(format!(
                "ARCHITECTURE.md has no section for the workspace member {}: add a heading \
                 \"### `{}/` ({})\" with a paragraph on the crate and a \"{MODULES_PREFIX} ...\" line",
                member.path, member.path, member.package
            ));
            continue;
        };
        if section.package != member.package {
            problems.push(format!(
                "ARCHITECTURE.md line {}: the heading says ({}), but {}/Cargo.toml names the \
                 package {}; write \"### `{}/` ({})\"",
                section.line,
                section.package,
                member.path,
                member.package,
                member.path,
                member.package
            ));
        }
        let src = format!("{}/src", member.path);
        let actual = top_level_modules(&root.join(&src));
        let (line, listed) = match section.module_lines.as_slice() {
            [(line, names)] => (*line, names),
            [] => {
                problems.push(format!(
                    "ARCHITECTURE.md, section `{}/` (line {}): no \"{MODULES_PREFIX}\" line; add \
                     one at the start of a line naming, in backticks, its modules: {}",
                    member.path,
                    section.line,
                    actual
                        .iter()
                        .map(|m| format!("`{m}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                continue;
            }
            more => {
                problems.push(format!(
                    "ARCHITECTURE.md, section `{}/`: {} \"{MODULES_PREFIX}\" lines (lines {}); \
                     keep one",
                    member.path,
                    more.len(),
                    more.iter()
                        .map(|(l, _)| l.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                continue;
            }
        };
        let mut once = BTreeSet::new();
        for name in listed {
            if !once.insert(name.as_str()) {
                problems.push(format!(
                    "ARCHITECTURE.md line {line}: `{name}` is listed twice for `{}/`",
                    member.path
                ));
            }
        }
        for missing in actual.iter().filter(|m| !once.contains(m.as_str())) {
            problems.push(format!(
                "ARCHITECTURE.md line {line}: the {MODULES_PREFIX} line of `{}/` does not name \
                 `{missing}` ({src}/{missing}.rs or {src}/{missing}/); add it, and say in the \
                 section what it owns",
                member.path
            ));
        }
        for extra in once.iter().filter(|m| !actual.contains(**m)) {
            problems.push(format!(
                "ARCHITECTURE.md line {line}: the {MODULES_PREFIX} line of `{}/` names \
                 `{extra}`, but neither {src}/{extra}.rs nor {src}/{extra}/ exists; remove it \
                 or correct the name",
                member.path
            ));
        }
    }
    fail_on(problems, "ARCHITECTURE.md's crate sections");
}

#[test]
fn every_path_architecture_names_exists() {
    let root = root();
    let doc = read(&root.join("ARCHITECTURE.md"));
    let mut problems = Vec::new();
    let mut fenced = false;
    for (i, line) in doc.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for token in backticked(line).iter().filter(|t| is_path_reference(t)) {
            let path = root.join(token);
            let found = if token.ends_with('/') {
                path.is_dir()
            } else {
                path.is_file()
            };
            if !found {
                problems.push(format!(
                    "ARCHITECTURE.md line {}: `{token}` does not exist (paths are relative to \
                     the workspace root; a trailing `/` means a directory); correct or remove it",
                    i + 1
                ));
            }
        }
    }
    fail_on(problems, "paths named in ARCHITECTURE.md");
}

#[test]
fn the_rules_read_what_they_are_meant_to() {
    assert_eq!(header_problem("\n\n//! Owns x.\nfn f() {}\n"), None);
    assert_eq!(
        header_problem("#![allow(dead_code)]\n//! Owns x.\n"),
        Some("it opens with `#![allow(dead_code)]`".to_string())
    );
    assert_eq!(
        header_problem("  \n"),
        Some("the file is empty".to_string())
    );

    let doc = "# Title\n### `core/` (fedraft-core)\nText `x`.\nModules: `a`,\n`b`.\n\nText `y`.\n\
               ## Next\nModules: `stray`.\n### `deploy/`\n### `raft/` (fedraft-raft)\n";
    assert_eq!(
        sections(doc),
        vec![
            Section {
                line: 2,
                path: "core".into(),
                package: "fedraft-core".into(),
                module_lines: vec![(4, vec!["a".into(), "b".into()])],
            },
            Section {
                line: 11,
                path: "raft".into(),
                package: "fedraft-raft".into(),
                module_lines: vec![],
            },
        ]
    );

    for path in [
        "core/src/",
        "docs/performance.md",
        "testing/kubesim/",
        "a/b.rs",
    ] {
        assert!(is_path_reference(path), "{path} should be checked");
    }
    for other in [
        "/v1/audit",
        "fedraft.io/managed-by=fedraft",
        "NS/NAME",
        "discovery.k8s.io/v1",
        "fedraft/tests/e2e_*.rs",
        "https://example.invalid/x.md",
        "State::apply",
    ] {
        assert!(!is_path_reference(other), "{other} should not be checked");
    }
}
