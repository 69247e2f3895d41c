//! Admission at apply: kind policy by role, rendered identity, patch bombs, rights of a tenant
//! actor checked on the log's state, tenant limits, and a property test that random templates
//! with random override patches are refused or render within the bounds, never a panic.

use std::time::Instant;

use fedraft_core::admission::{Actor, AdmissionPolicy};
use fedraft_core::command::{Command, LogEntry};
use fedraft_core::model::{ObjectSpec, TenantSpec};
use fedraft_core::policy::{JsonPatchOp, Override, PatchOpKind};
use fedraft_core::render::LIMITS;
use fedraft_core::state::{Outcome, RejectCode, Rejection, State};
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::state_support::Harness;

const ALICE: &str = "tenant:acme/alice";

fn entry(h: &mut Harness, actor: &str, command: Command) -> Outcome {
    h.index += 1;
    let e = LogEntry::new("", actor, h.now_ms, command);
    h.state.apply(h.index, &e).outcome
}

fn refusal(o: Outcome) -> Rejection {
    match o {
        Outcome::Rejected(r) => r,
        other => panic!("accepted: {other:?}"),
    }
}

fn put(ns: &str, name: &str, template: Value, overrides: Vec<Override>) -> Command {
    Command::PutObject {
        namespace: ns.into(),
        name: name.into(),
        spec: ObjectSpec {
            template: template.to_string(),
            placement: Default::default(),
            overrides,
        },
        expected_version: None,
    }
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn patch(op: PatchOpKind, path: &str, from: Option<&str>, value: Option<Value>) -> JsonPatchOp {
    JsonPatchOp {
        op,
        path: path.into(),
        from: from.map(str::to_string),
        value: value.map(|v| v.to_string()),
    }
}

fn with_patches(patches: Vec<JsonPatchOp>) -> Vec<Override> {
    vec![Override {
        patches,
        ..Override::default()
    }]
}

fn tenant(h: &mut Harness, namespaces: &[&str]) {
    h.ok(Command::PutTenant(TenantSpec {
        name: "acme".into(),
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        quota: Default::default(),
        slice_size: None,
        members: vec![],
    }));
}

#[test]
fn copy_bomb_is_refused_quickly_and_changes_nothing() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let before = h.state.state_hash_hex();
    let bomb: Vec<JsonPatchOp> = (0..40)
        .map(|i| patch(PatchOpKind::Copy, &format!("/x{i}"), Some(""), None))
        .collect();
    let started = Instant::now();
    let r = h.refused(put("ns", "bomb", cm("bomb"), with_patches(bomb)));
    assert!(
        started.elapsed().as_secs() < 5,
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(r.code, RejectCode::FailedPrecondition);
    let field = r.field.unwrap();
    assert!(field.starts_with("spec.overrides[0].patches["), "{field}");
    assert!(r.message.contains("render-limits"), "{}", r.message);
    assert_eq!(h.state.state_hash_hex(), before);

    // Depth: nesting the document into itself goes deeper each time.
    let deep: Vec<JsonPatchOp> = (0..120)
        .map(|_| patch(PatchOpKind::Add, "/n", None, Some(json!({"n": {"n": {}}}))))
        .chain((0..120).map(|_| patch(PatchOpKind::Copy, "/n/n/n", Some("/n"), None)))
        .collect();
    let r = h.refused(put("ns", "deep", cm("deep"), with_patches(deep)));
    assert!(r.message.contains("render-limits"), "{}", r.message);
}

#[test]
fn overrides_may_not_change_identity() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    for (path, value, field) in [
        ("/kind", json!("Secret"), "kind"),
        ("/apiVersion", json!("v2"), "apiVersion"),
        ("/metadata/name", json!("other"), "metadata.name"),
        (
            "/metadata/namespace",
            json!("kube-system"),
            "metadata.namespace",
        ),
    ] {
        let ov = vec![Override {
            cluster_name: Some("dc2".into()),
            patches: vec![patch(PatchOpKind::Add, path, None, Some(value))],
            ..Override::default()
        }];
        let r = h.refused(put("ns", "c", cm("c"), ov));
        assert_eq!(r.code, RejectCode::FailedPrecondition, "{path}");
        assert_eq!(
            r.field.as_deref(),
            Some(&*format!("spec.overrides.{field}"))
        );
        assert!(r.message.contains("rendered-identity"), "{}", r.message);
    }
    // Overrides that keep the identity are fine.
    let ov = with_patches(vec![patch(
        PatchOpKind::Add,
        "/data/extra",
        None,
        Some(json!("1")),
    )]);
    h.ok(put("ns", "c", cm("c"), ov));
}

#[test]
fn cluster_scoped_kinds_by_role_and_policy() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    tenant(&mut h, &["team-a"]);
    let ns_obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
    let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "own"}, "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}});
    for t in [&ns_obj, &crb] {
        let r = refusal(entry(&mut h, ALICE, put("team-a", "x", t.clone(), vec![])));
        assert_eq!(r.code, RejectCode::Forbidden);
        assert_eq!(r.field.as_deref(), Some("spec.template.kind"));
        // Admins too, until the policy allows the kind.
        let r = refusal(entry(&mut h, "root", put("infra", "x", t.clone(), vec![])));
        assert_eq!(r.code, RejectCode::FailedPrecondition);
    }
    let policy = AdmissionPolicy {
        cluster_scoped_kinds: vec!["Namespace".into()],
        ..AdmissionPolicy::default()
    };
    let r = refusal(entry(
        &mut h,
        ALICE,
        Command::SetAdmissionPolicy(policy.clone()),
    ));
    assert_eq!(r.code, RejectCode::Forbidden);
    assert!(entry(&mut h, "root", Command::SetAdmissionPolicy(policy.clone())).is_accepted());
    assert_eq!(h.state.admission_policy(), &policy);
    assert!(entry(&mut h, "root", put("infra", "x", ns_obj.clone(), vec![])).is_accepted());
    assert_eq!(
        refusal(entry(&mut h, ALICE, put("team-a", "y", ns_obj, vec![]))).code,
        RejectCode::Forbidden
    );
    // The policy survives a snapshot and counts in the hash.
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap();
    assert_eq!(restored.state_hash(), h.state.state_hash());
    assert_eq!(restored.admission_policy(), &policy);
    // A tenant's RoleBinding to cluster-admin, even through an override, is refused.
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "rb"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "app"}]});
    assert!(entry(&mut h, ALICE, put("team-a", "rb", rb.clone(), vec![])).is_accepted());
    let escalate = with_patches(vec![patch(
        PatchOpKind::Replace,
        "/roleRef/name",
        None,
        Some(json!("cluster-admin")),
    )]);
    let r = refusal(entry(&mut h, ALICE, put("team-a", "rb", rb, escalate)));
    assert_eq!(r.code, RejectCode::Forbidden);
    assert_eq!(r.field.as_deref(), Some("spec.overrides[0].roleRef.name"));
}

#[test]
fn a_namespace_template_in_its_own_namespace_needs_no_policy() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    tenant(&mut h, &["team-a"]);
    let ns =
        |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    // Before version 13 the admission policy had to list the kind, and a replayed entry of that
    // version is still refused.
    let mut old = LogEntry::new(
        "",
        "root",
        h.now_ms,
        put("shop", "shop", ns("shop"), vec![]),
    );
    old.version = fedraft_core::door::NAMESPACES_SINCE - 1;
    h.index += 1;
    let r = refusal(h.state.apply(h.index, &old).outcome);
    assert_eq!(r.code, RejectCode::FailedPrecondition);
    // Now an administrator declares any namespace, a tenant only its own.
    assert!(entry(&mut h, "root", put("shop", "shop", ns("shop"), vec![])).is_accepted());
    assert!(entry(&mut h, ALICE, put("team-a", "team-a", ns("team-a"), vec![])).is_accepted());
    let r = refusal(entry(
        &mut h,
        ALICE,
        put("shop", "shop2", ns("shop"), vec![]),
    ));
    assert_eq!(r.code, RejectCode::Forbidden);
    // A Namespace named after another namespace is still a cluster-scoped kind like any other.
    let r = refusal(entry(
        &mut h,
        "root",
        put("infra", "other", ns("other"), vec![]),
    ));
    assert_eq!(r.field.as_deref(), Some("spec.template.kind"));
    let r = refusal(entry(&mut h, ALICE, put("team-a", "x", ns("x"), vec![])));
    assert_eq!(r.code, RejectCode::Forbidden);
}

#[test]
fn tenant_rights_are_checked_at_apply() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    tenant(&mut h, &["team-a"]);
    assert!(entry(&mut h, ALICE, put("team-a", "c", cm("c"), vec![])).is_accepted());
    // Another tenant's (or nobody's) namespace.
    let r = refusal(entry(&mut h, ALICE, put("team-b", "c", cm("c"), vec![])));
    assert_eq!(r.code, RejectCode::Forbidden);
    assert_eq!(r.field.as_deref(), Some("metadata.namespace"));
    // Revoked: the namespace leaves the tenant; a lagging node's write fails at apply.
    tenant(&mut h, &["team-z"]);
    let before = h.state.state_hash_hex();
    for cmd in [
        put("team-a", "c", cm("c2"), vec![]),
        Command::DeleteObject {
            namespace: "team-a".into(),
            name: "c".into(),
            expected_version: None,
        },
        Command::RevokePlacement {
            namespace: "team-a".into(),
            name: "c".into(),
        },
    ] {
        assert_eq!(
            refusal(entry(&mut h, ALICE, cmd)).code,
            RejectCode::Forbidden
        );
    }
    assert_eq!(h.state.state_hash_hex(), before);
    // Members listed: others of the tenant are refused.
    h.ok(Command::PutTenant(TenantSpec {
        name: "acme".into(),
        namespaces: vec!["team-a".into()],
        quota: Default::default(),
        slice_size: None,
        members: vec!["bob".into()],
    }));
    let r = refusal(entry(&mut h, ALICE, put("team-a", "d", cm("d"), vec![])));
    assert!(r.message.contains("not a member"), "{}", r.message);
    let bob = Actor::tenant_actor("acme", "bob");
    assert!(entry(&mut h, &bob, put("team-a", "d", cm("d"), vec![])).is_accepted());
}

#[test]
fn tenant_limits_on_stored_state() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    tenant(&mut h, &["team-a", "team-b"]);
    let policy = AdmissionPolicy {
        tenant_max_objects: 2,
        tenant_max_template_bytes: 4096,
        ..AdmissionPolicy::default()
    };
    assert!(entry(&mut h, "root", Command::SetAdmissionPolicy(policy)).is_accepted());
    h.ok(put("team-a", "a", cm("a"), vec![]));
    h.ok(put("team-b", "b", cm("b"), vec![]));
    let r = h.refused(put("team-a", "c", cm("c"), vec![]));
    assert_eq!(r.field.as_deref(), Some("metadata.name"));
    assert!(r.message.contains("tenant-limits"), "{}", r.message);
    // Replacing an object does not count as another; growing its template past the bytes does.
    let mut big = cm("a");
    big["data"]["k"] = json!("x".repeat(5000));
    let r = h.refused(put("team-a", "a", big, vec![]));
    assert_eq!(r.field.as_deref(), Some("spec.template"));
    h.ok(Command::DeleteObject {
        namespace: "team-b".into(),
        name: "b".into(),
        expected_version: None,
    });
    h.ok(put("team-a", "c", cm("c"), vec![]));
    // Outside any tenant, no limit.
    for i in 0..3 {
        h.ok(put("free", &format!("o{i}"), cm("o"), vec![]));
    }
    h.state.check_consistency().unwrap();
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_pointer() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("metadata".to_string()),
            Just("name".to_string()),
            Just("kind".to_string()),
            Just("spec".to_string()),
            Just("-".to_string()),
            Just("0".to_string()),
            "[a-z]{1,3}",
        ],
        0..4,
    )
    .prop_map(|segs| segs.iter().map(|s| format!("/{s}")).collect())
}

fn arb_patch() -> impl Strategy<Value = JsonPatchOp> {
    (0..6u8, arb_pointer(), arb_pointer(), arb_value()).prop_map(|(op, path, from, value)| {
        let op = [
            PatchOpKind::Add,
            PatchOpKind::Remove,
            PatchOpKind::Replace,
            PatchOpKind::Move,
            PatchOpKind::Copy,
            PatchOpKind::Test,
        ][op as usize];
        let moves = matches!(op, PatchOpKind::Move | PatchOpKind::Copy);
        let valued = matches!(
            op,
            PatchOpKind::Add | PatchOpKind::Replace | PatchOpKind::Test
        );
        JsonPatchOp {
            op,
            path,
            from: moves.then_some(from),
            value: valued.then(|| value.to_string()),
        }
    })
}

fn arb_override() -> impl Strategy<Value = Override> {
    (
        prop::option::of(prop_oneof![
            Just("dc1".to_string()),
            Just("dc2".to_string())
        ]),
        prop::collection::vec(arb_patch(), 0..12),
    )
        .prop_map(|(cluster_name, patches)| Override {
            cluster_name,
            patches,
            ..Override::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random templates with random override patch lists (with copies of the whole document
    /// mixed in, the bomb's shape) are refused, or accepted and render within the bounds on
    /// every cluster, keeping the admitted identity. Never a panic.
    #[test]
    fn admission_refuses_or_renders_within_bounds(
        body in arb_value(),
        kind in prop_oneof![Just("ConfigMap"), Just("Namespace"), Just("Widget")],
        overrides in prop::collection::vec(arb_override(), 0..4),
        bombs in 0..30usize,
        tenant_actor in any::<bool>(),
    ) {
        let mut h = Harness::new();
        h.fleet(&["dc1", "dc2"]);
        tenant(&mut h, &["team-a"]);
        let mut template = json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": "o"}});
        template["spec"] = body;
        let mut overrides = overrides;
        if bombs > 0 {
            overrides.push(with_patches(
                (0..bombs).map(|i| patch(PatchOpKind::Copy, &format!("/b{i}"), Some(""), None)).collect(),
            ).remove(0));
        }
        let actor = if tenant_actor { ALICE } else { "root" };
        let outcome = entry(&mut h, actor, put("team-a", "o", template, overrides));
        if outcome.is_accepted() {
            for c in ["dc1", "dc2"] {
                for d in h.state.desired_for_cluster(c) {
                    if let Ok(m) = &d.manifest {
                        prop_assert!(m.to_string().len() <= LIMITS.max_bytes);
                        prop_assert_eq!(m["kind"].as_str(), Some(kind));
                        prop_assert_eq!(m["metadata"]["name"].as_str(), Some("o"));
                        prop_assert_eq!(m["metadata"]["namespace"].as_str(), Some("team-a"));
                    }
                }
            }
        }
        h.state.check_consistency().map_err(TestCaseError::fail)?;
    }
}

#[test]
fn entries_written_before_admission_replay_as_they_applied() {
    // A version-1 entry had no admission rules when it was applied; replaying it now must
    // give the state it gave then, or a newer node would disagree with the log's history.
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    tenant(&mut h, &["team-a"]);
    let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "own"}, "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}});
    let mut old = LogEntry::new(
        "",
        ALICE,
        h.now_ms,
        put("team-b", "own", crb.clone(), vec![]),
    );
    old.version = 1;
    h.index += 1;
    assert!(h.state.apply(h.index, &old).outcome.is_accepted());
    // The same write in the current envelope is refused.
    let r = refusal(entry(&mut h, ALICE, put("team-b", "own2", crb, vec![])));
    assert_eq!(r.code, RejectCode::Forbidden);
}
