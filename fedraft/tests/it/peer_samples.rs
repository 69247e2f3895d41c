//! The peer-samples proof: every document of Karmada's and KubeFed's published samples
//! (`../shared/peer-samples/`, or `$FEDRAFT_PEER_SAMPLES`) applied with the stock kubectl to one
//! running fedraft, through the Kubernetes-compatible door only, and the outcome of each written
//! as a table compared with the committed `docs/peer-samples.md`.
//!
//! Each complete object must be accepted, or refused by the server with a 4xx, or refused by
//! kubectl because fedraft does not serve its kind; a 5xx or a timeout fails the test whatever
//! the table says. Fragments (a snippet SOURCES.json marks incomplete) and KubeFed's e2e
//! fixtures (`kind: fixture`, no apiVersion) are listed but not applied.
//!
//! Run as a migrating administrator would: before applying anything, the admission policy is
//! set with `fedraft admission set` to let administrators federate the cluster-scoped kinds the
//! samples federate ([`CLUSTER_SCOPED_KINDS`]: namespaces, CRDs, ClusterRoles and their
//! bindings), since fedraft places no cluster-scoped kind until an administrator lists it.
//! Objects are applied in three passes so that what a policy selects exists before the policy:
//! CRDs and namespaces, then the other kinds Kubernetes builds in (the resource templates),
//! then everything else (policies, federated kinds, clusters, custom resources). The first two
//! passes' objects stay until the end, so a sample's custom resource is applied after its CRD;
//! the third pass's are deleted again once accepted so that every such row is a create that
//! does not depend on the rows before it. The table lists them in file order.
//!
//! After an intended change: `FEDRAFT_BLESS=1 cargo test -p fedraft --test it peer_samples`
//! rewrites the table; review its diff like code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::kubectl_door::{kubectl_for, kubectl_path};
use crate::support::*;

/// The table, from the workspace root.
const TABLE: &str = "docs/peer-samples.md";

/// The cluster-scoped kinds Karmada's and KubeFed's samples federate, which the test lets
/// administrators federate first (the admission policy's `clusterScopedKinds`).
const CLUSTER_SCOPED_KINDS: &str = "clusterScopedKinds:
  - Namespace
  - apiextensions.k8s.io/CustomResourceDefinition
  - rbac.authorization.k8s.io/ClusterRole
  - rbac.authorization.k8s.io/ClusterRoleBinding
";

/// `fedraft admission set`, as an administrator runs it against the federation.
pub(crate) fn allow_cluster_scoped_kinds(fed: &Fed, dir: &Path) {
    let file = dir.join("admission.yaml");
    std::fs::write(&file, CLUSTER_SCOPED_KINDS).expect("writing the admission policy");
    let out = std::process::Command::new(BIN)
        .args(["admission", "set", "-f"])
        .arg(&file)
        .env("FEDRAFT_SERVER", fed.procs.url(0, ""))
        .env("FEDRAFT_TOKEN", TOKEN)
        .env("FEDRAFT_CA_FILE", fed.root().join("tls").join("ca.crt"))
        .env("HOME", dir)
        .output()
        .expect("fedraft admission set runs");
    assert!(
        out.status.success(),
        "fedraft admission set: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn workspace() -> PathBuf {
    crate::manifest_dir()
        .parent()
        .expect("the fedraft crate sits in the workspace")
        .to_path_buf()
}

fn samples_dir() -> PathBuf {
    std::env::var_os("FEDRAFT_PEER_SAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared/peer-samples"))
}

/// What happened to one document.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Accepted,
    Refused(String),
    NotApplied(&'static str),
}

/// One YAML document of a sample file.
struct Doc {
    file: String,
    /// 1-based, over the file's non-empty documents.
    index: usize,
    api_version: String,
    kind: String,
    text: String,
    complete: bool,
}

impl Doc {
    /// 0: CRDs and namespaces; 1: Kubernetes' other kinds (resource templates); 2: the rest.
    fn pass(&self) -> u8 {
        if self.kind == "CustomResourceDefinition" || self.kind == "Namespace" {
            return 0;
        }
        // Kubernetes' own groups: the core group, dotless ones (apps, batch) and *.k8s.io.
        let group = self.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        if !group.contains('.') || group.ends_with(".k8s.io") {
            1
        } else {
            2
        }
    }
}

/// Which files SOURCES.json calls complete: whole files and CRD extracts always, documentation
/// snippets when `complete_object` says so.
fn complete_files(dir: &Path) -> BTreeMap<String, bool> {
    let text = std::fs::read_to_string(dir.join("SOURCES.json")).expect("SOURCES.json");
    let sources: Value = serde_json::from_str(&text).expect("SOURCES.json is JSON");
    let mut out = BTreeMap::new();
    for f in sources["files"].as_array().expect("files") {
        let file = f["file"].as_str().expect("file").to_string();
        let complete = match f["kind"].as_str() {
            Some("doc-snippet") => f["complete_object"].as_bool() == Some(true),
            Some("verbatim-file" | "crd-extract") => true,
            _ => false,
        };
        out.insert(file, complete);
    }
    out
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("sample directory")
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
}

/// Splits a file at its `---` lines, keeping each document's text as written.
fn split_documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line == "---" || line.starts_with("--- ") {
            docs.push(String::new());
            continue;
        }
        let cur = docs.last_mut().expect("at least one document");
        cur.push_str(line);
        cur.push('\n');
    }
    docs
}

fn read_docs(dir: &Path) -> Vec<Doc> {
    let complete = complete_files(dir);
    let mut files = Vec::new();
    yaml_files(dir, &mut files);
    let mut out = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(dir)
            .expect("under the sample directory")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("sample file");
        let mut index = 0;
        for chunk in split_documents(&text) {
            let value: Value = match serde_yaml::from_str(&chunk) {
                Ok(v) => v,
                // A snippet that is not YAML at all (an elided block) is still a row.
                Err(_) => Value::String(String::new()),
            };
            if value.is_null() {
                continue;
            }
            index += 1;
            let field = |k: &str| {
                value
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            out.push(Doc {
                file: rel.clone(),
                index,
                api_version: field("apiVersion"),
                kind: field("kind"),
                text: chunk,
                complete: complete.get(&rel).copied().unwrap_or(false),
            });
        }
    }
    out
}

/// kubectl's refusal in one line, or a panic if it is not a refusal at all (a server error, a
/// timeout, a connection failure).
fn refusal(stderr: &str, doc: &Doc) -> String {
    let line = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    // kubectl prints a 4xx as "Error from server (Reason): ..." or, for 422, "The request is
    // invalid: ..."; what must never appear is a server error or a failed connection.
    let server_error = [
        "(InternalError)",
        "(ServiceUnavailable)",
        "(Timeout)",
        "(ServerTimeout)",
        "(TooManyRequests)",
        "Unable to connect",
        "connection refused",
        "an error on the server",
    ]
    .iter()
    .any(|c| line.contains(c));
    assert!(
        !line.is_empty() && !server_error,
        "{} #{} ({}) was neither accepted nor refused with a 4xx: {line}",
        doc.file,
        doc.index,
        doc.kind
    );
    line
}

fn render_table(docs: &[Doc], outcomes: &BTreeMap<(String, usize), Outcome>) -> String {
    let (mut accepted, mut refused, mut skipped) = (0, 0, 0);
    let mut rows = String::new();
    for d in docs {
        let outcome = &outcomes[&(d.file.clone(), d.index)];
        let cell = match outcome {
            Outcome::Accepted => {
                accepted += 1;
                "accepted".to_string()
            }
            Outcome::Refused(m) => {
                refused += 1;
                format!("refused: {}", m.replace('|', "\\|"))
            }
            Outcome::NotApplied(why) => {
                skipped += 1;
                format!("not applied: {why}")
            }
        };
        let kind = if d.kind.is_empty() { "-" } else { &d.kind };
        rows.push_str(&format!("| {} | {} | {kind} | {cell} |\n", d.file, d.index));
    }
    format!(
        "# Karmada's and KubeFed's samples through fedraft's door\n\n\
         Every document of `../shared/peer-samples/` applied with the stock kubectl to a running \
         fedraft (`fedraft/tests/it/peer_samples.rs` writes this file and fails when it is not \
         what the test sees; `FEDRAFT_BLESS=1` rewrites it), after `fedraft admission set` let \
         administrators federate the cluster-scoped kinds the samples federate (Namespace, \
         CustomResourceDefinition, ClusterRole, ClusterRoleBinding). A refusal is kubectl's message: \
         the server's 4xx names the field it does not support, or kubectl reports that fedraft \
         serves no such kind.\n\n\
         Complete objects: {} accepted, {} refused; {} documents not applied (fragments of \
         documentation pages and KubeFed's e2e fixtures, which are not objects).\n\n\
         | file | # | kind | outcome |\n|---|---|---|---|\n{rows}",
        accepted, refused, skipped
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_peer_sample_is_accepted_or_refused_naming_why() {
    let dir = samples_dir();
    if !kubectl_path().exists() || !dir.join("SOURCES.json").exists() {
        eprintln!(
            "no kubectl at {} or no samples at {}: skipped",
            kubectl_path().display(),
            dir.display()
        );
        return;
    }
    let docs = read_docs(&dir);
    assert!(docs.len() > 100, "only {} documents read", docs.len());

    eprintln!(
        "peer samples: {} documents; starting the federation",
        docs.len()
    );
    // Sealed, as in production: a member Secret is accepted only where a key seals it.
    let fed = Fed::start_tls_sealed().await;
    let (home, k) = kubectl_for(&fed);
    allow_cluster_scoped_kinds(&fed, home.path());

    let mut outcomes = BTreeMap::new();
    for d in docs.iter().filter(|d| !d.complete) {
        outcomes.insert((d.file.clone(), d.index), Outcome::NotApplied("fragment"));
    }
    for d in docs
        .iter()
        .filter(|d| d.complete && (d.api_version.is_empty() || d.kind.is_empty()))
    {
        let why = if d.kind == "fixture" {
            "KubeFed e2e fixture, not an object"
        } else {
            "no apiVersion or kind"
        };
        outcomes.insert((d.file.clone(), d.index), Outcome::NotApplied(why));
    }
    for pass in 0..3 {
        for d in docs.iter().filter(|d| {
            d.complete && !d.api_version.is_empty() && !d.kind.is_empty() && d.pass() == pass
        }) {
            eprintln!("peer samples: pass {pass}: {} #{}", d.file, d.index);
            let out = k.run(&["apply", "-f", "-"], Some(&d.text));
            let outcome = if out.status.success() {
                // Samples reuse names: a policy or federated document is removed once accepted,
                // so that each row is a create of its own and does not depend on the others.
                if pass == 2 {
                    let gone = k.run(&["delete", "-f", "-"], Some(&d.text));
                    assert!(
                        gone.status.success(),
                        "{} #{}: {}",
                        d.file,
                        d.index,
                        String::from_utf8_lossy(&gone.stderr)
                    );
                }
                Outcome::Accepted
            } else {
                Outcome::Refused(refusal(&String::from_utf8_lossy(&out.stderr), d))
            };
            outcomes.insert((d.file.clone(), d.index), outcome);
        }
    }

    let table = render_table(&docs, &outcomes);
    let path = workspace().join(TABLE);
    if std::env::var_os("FEDRAFT_BLESS").is_some() {
        std::fs::write(&path, &table).expect("writing the table");
        return;
    }
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with FEDRAFT_BLESS=1)", path.display()));
    if committed != table {
        let changed: Vec<String> = table
            .lines()
            .zip(committed.lines().chain(std::iter::repeat("")))
            .filter(|(new, old)| new != old)
            .map(|(new, old)| format!("- {old}\n+ {new}"))
            .take(20)
            .collect();
        panic!(
            "{TABLE} is not what the door answers (FEDRAFT_BLESS=1 rewrites it):\n{}",
            changed.join("\n")
        );
    }
}
