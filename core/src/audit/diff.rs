//! What changed between two states: clusters (health, cordon, drain, labels, taints), objects
//! (added, removed, spec, placement with per-cluster moves, shortfall) and tenants. Exact: two
//! states with equal hashes have an empty diff, and every field listed differs.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::view::{ClusterView, ObjectView, StateView, TenantView};
use crate::scheduler::decision::{diff as placement_moves, ReplicaMove};
use crate::state::State;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DiffOp {
    Added,
    Removed,
    Modified,
}

/// What a [`FieldChange`]'s `before` and `after` hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Text to show as it is.
    Text,
    /// A log time: milliseconds since the epoch, in decimal. Core does not turn time into
    /// calendar text; the edges render it (RFC 3339 in the API's JSON).
    EpochMs,
}

/// One field's value before and after, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldChange {
    pub field: String,
    pub before: String,
    pub after: String,
    pub kind: FieldKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemDiff {
    /// Cluster or tenant name, or `namespace/name`.
    pub key: String,
    pub op: DiffOp,
    pub fields: Vec<FieldChange>,
    /// Objects only: per-cluster replica changes, sorted by cluster.
    pub moves: Vec<ReplicaMove>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDiff {
    pub from_index: u64,
    pub to_index: u64,
    pub from_hash: String,
    pub to_hash: String,
    pub clusters: Vec<ItemDiff>,
    pub objects: Vec<ItemDiff>,
    pub tenants: Vec<ItemDiff>,
}

impl StateDiff {
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty() && self.objects.is_empty() && self.tenants.is_empty()
    }
}

fn field(out: &mut Vec<FieldChange>, name: &str, a: String, b: String) {
    if a != b {
        out.push(FieldChange {
            field: name.to_string(),
            before: a,
            after: b,
            kind: FieldKind::Text,
        });
    }
}

fn time_field(out: &mut Vec<FieldChange>, name: &str, a_ms: u64, b_ms: u64) {
    if a_ms != b_ms {
        out.push(FieldChange {
            field: name.to_string(),
            before: a_ms.to_string(),
            after: b_ms.to_string(),
            kind: FieldKind::EpochMs,
        });
    }
}

fn dbg<T: std::fmt::Debug>(v: &T) -> String {
    format!("{v:?}")
}

fn cluster_fields(a: &ClusterView, b: &ClusterView) -> Vec<FieldChange> {
    let mut f = Vec::new();
    field(&mut f, "health", dbg(&a.health), dbg(&b.health));
    time_field(&mut f, "healthSince", a.health_since_ms, b.health_since_ms);
    field(
        &mut f,
        "cordoned",
        a.cordoned.to_string(),
        b.cordoned.to_string(),
    );
    field(
        &mut f,
        "drained",
        a.drained.to_string(),
        b.drained.to_string(),
    );
    field(&mut f, "labels", dbg(&a.labels), dbg(&b.labels));
    field(&mut f, "taints", a.taints.join(","), b.taints.join(","));
    field(
        &mut f,
        "resourceVersion",
        a.resource_version.to_string(),
        b.resource_version.to_string(),
    );
    f
}

fn placement_text(p: &BTreeMap<String, u32>) -> String {
    if p.is_empty() {
        return "-".into();
    }
    p.iter()
        .map(|(c, n)| format!("{c}={n}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn object_fields(a: &ObjectView, b: &ObjectView, spec_changed: bool) -> Vec<FieldChange> {
    let mut f = Vec::new();
    if spec_changed {
        field(&mut f, "spec", "old".into(), "new".into());
    }
    field(
        &mut f,
        "replicas",
        a.replicas.to_string(),
        b.replicas.to_string(),
    );
    field(
        &mut f,
        "placement",
        placement_text(&a.placement),
        placement_text(&b.placement),
    );
    field(
        &mut f,
        "readyReplicas",
        a.ready_replicas.to_string(),
        b.ready_replicas.to_string(),
    );
    field(
        &mut f,
        "unschedulable",
        dbg(&a.unschedulable),
        dbg(&b.unschedulable),
    );
    field(&mut f, "decision", a.decision.clone(), b.decision.clone());
    field(
        &mut f,
        "resourceVersion",
        a.resource_version.to_string(),
        b.resource_version.to_string(),
    );
    f
}

fn tenant_fields(a: &TenantView, b: &TenantView) -> Vec<FieldChange> {
    let mut f = Vec::new();
    field(
        &mut f,
        "namespaces",
        a.namespaces.join(","),
        b.namespaces.join(","),
    );
    field(
        &mut f,
        "resourceVersion",
        a.resource_version.to_string(),
        b.resource_version.to_string(),
    );
    f
}

/// Generic keyed comparison: added, removed, or modified with a non-empty field list.
fn compare<T>(
    a: BTreeMap<String, T>,
    b: BTreeMap<String, T>,
    fields: impl Fn(&str, &T, &T) -> Vec<FieldChange>,
    moves: impl Fn(Option<&T>, Option<&T>) -> Vec<ReplicaMove>,
) -> Vec<ItemDiff> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = Vec::new();
    for k in keys {
        let (x, y) = (a.get(k), b.get(k));
        let (op, fields) = match (x, y) {
            (Some(x), Some(y)) => (DiffOp::Modified, fields(k, x, y)),
            (None, Some(_)) => (DiffOp::Added, Vec::new()),
            (Some(_), None) => (DiffOp::Removed, Vec::new()),
            (None, None) => continue,
        };
        let moves = moves(x, y);
        if op == DiffOp::Modified && fields.is_empty() && moves.is_empty() {
            continue;
        }
        out.push(ItemDiff {
            key: k.clone(),
            op,
            fields,
            moves,
        });
    }
    out
}

/// The difference from `a` to `b`; `namespaces` restricts it to a tenant's view.
pub fn diff(a: &State, b: &State, namespaces: Option<&[String]>) -> StateDiff {
    let (va, vb) = (StateView::of(a, namespaces), StateView::of(b, namespaces));
    let by_name = |v: &[ClusterView]| -> BTreeMap<String, ClusterView> {
        v.iter().map(|c| (c.name.clone(), c.clone())).collect()
    };
    let objs = |v: &[ObjectView]| -> BTreeMap<String, ObjectView> {
        v.iter()
            .map(|o| (format!("{}/{}", o.namespace, o.name), o.clone()))
            .collect()
    };
    let tens = |v: &[TenantView]| -> BTreeMap<String, TenantView> {
        v.iter().map(|t| (t.name.clone(), t.clone())).collect()
    };
    let spec_changed = |key: &str| -> bool {
        let Some((ns, n)) = key.split_once('/') else {
            return false;
        };
        match (a.object(ns, n), b.object(ns, n)) {
            (Some(x), Some(y)) => x.spec != y.spec,
            _ => false,
        }
    };
    let empty = BTreeMap::new();
    StateDiff {
        from_index: va.index,
        to_index: vb.index,
        from_hash: va.state_hash.clone(),
        to_hash: vb.state_hash.clone(),
        clusters: compare(
            by_name(&va.clusters),
            by_name(&vb.clusters),
            |_, x, y| cluster_fields(x, y),
            |_, _| Vec::new(),
        ),
        objects: compare(
            objs(&va.objects),
            objs(&vb.objects),
            |k, x, y| object_fields(x, y, spec_changed(k)),
            |x, y| {
                placement_moves(
                    x.map_or(&empty, |o| &o.placement),
                    y.map_or(&empty, |o| &o.placement),
                )
            },
        ),
        tenants: compare(
            tens(&va.tenants),
            tens(&vb.tenants),
            |_, x, y| tenant_fields(x, y),
            |_, _| Vec::new(),
        ),
    }
}
