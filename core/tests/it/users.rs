//! The replicated user database at apply: only admins (by the log's account) manage users,
//! demoted or deleted users lose their rights on the log's state, token records carry hashes and
//! expire by log time, refusals name their field; snapshots keep the table and read the older
//! layout; and a property test that random user commands replay to the same hash and restore
//! from a snapshot mid-way to the same future.

use fedraft_core::command::{Command, LogEntry};
use fedraft_core::model::{ObjectSpec, TenantSpec};
use fedraft_core::state::{Outcome, RejectCode, Rejection, State};
use fedraft_core::users::{
    format_token, token_hash_hex, TokenIssue, UserKind, UserRole, UserSpec,
    MAX_LIVE_TOKENS_PER_USER,
};
use proptest::prelude::*;
use serde_json::json;

use crate::state_support::Harness;

/// A token-file admin: any actor not of a replicated form.
const ROOT: &str = "root";

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

fn put_user(name: &str, role: UserRole) -> Command {
    Command::PutUser {
        spec: UserSpec {
            name: name.into(),
            kind: UserKind::User,
            role,
        },
        expected_version: None,
    }
}

fn issue(user: &str, id: &str, ttl_ms: Option<u64>) -> Command {
    Command::IssueToken(TokenIssue {
        user: user.into(),
        id: id.into(),
        sha256_hex: token_hash_hex(&format_token(id, "secret")),
        ttl_ms,
    })
}

fn id(n: u64) -> String {
    format!("{n:016x}")
}

#[test]
fn only_admins_by_the_logs_account_manage_users() {
    let mut h = Harness::new();
    assert!(entry(&mut h, ROOT, put_user("alice", UserRole::Admin)).is_accepted());
    // A replicated admin acts as `user:NAME`.
    assert!(entry(&mut h, "user:alice", put_user("bob", UserRole::Operator)).is_accepted());
    // An operator, a tenant member and an unknown replicated user may not.
    for actor in ["user:bob", "tenant:acme/carol", "user:nobody"] {
        let r = refusal(entry(&mut h, actor, put_user("x", UserRole::Auditor)));
        assert_eq!(
            (r.code, r.field.as_deref()),
            (RejectCode::Forbidden, Some("actor"))
        );
    }
    // Demoted: the log says alice is an operator now, whatever a lagging node believed.
    assert!(entry(&mut h, ROOT, put_user("alice", UserRole::Operator)).is_accepted());
    let before = h.state.state_hash_hex();
    let r = refusal(entry(&mut h, "user:alice", issue("bob", &id(1), None)));
    assert!(r.message.contains("only admins"), "{}", r.message);
    assert_eq!(
        h.state.state_hash_hex(),
        before,
        "a refusal changes nothing"
    );
    // Deleted: the same.
    assert!(entry(
        &mut h,
        ROOT,
        Command::DeleteUser {
            name: "alice".into(),
            expected_version: None
        }
    )
    .is_accepted());
    let r = refusal(entry(&mut h, "user:alice", put_user("y", UserRole::Admin)));
    assert!(r.message.contains("no longer exists"), "{}", r.message);
    assert!(h.state.users().user("y").is_none());
}

#[test]
fn refusals_name_their_field() {
    let mut h = Harness::new();
    let r = refusal(entry(&mut h, ROOT, put_user("Bad_Name", UserRole::Admin)));
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::Invalid, Some("name"))
    );
    let role = UserRole::Tenant {
        tenant: "acme".into(),
    };
    let r = refusal(entry(&mut h, ROOT, put_user("dave", role)));
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::NotFound, Some("role"))
    );
    let r = refusal(entry(&mut h, ROOT, issue("ghost", &id(1), None)));
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::NotFound, Some("user"))
    );
    assert!(entry(&mut h, ROOT, put_user("alice", UserRole::Admin)).is_accepted());
    let r = refusal(entry(&mut h, ROOT, issue("alice", "short", None)));
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::Invalid, Some("id"))
    );
    assert!(entry(&mut h, ROOT, issue("alice", &id(1), None)).is_accepted());
    let r = refusal(entry(&mut h, ROOT, issue("alice", &id(1), None)));
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::AlreadyExists, Some("id"))
    );
    let revoke = |user: &str, n| Command::RevokeToken {
        user: user.into(),
        id: id(n),
    };
    let r = refusal(entry(&mut h, ROOT, revoke("bob", 1)));
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::NotFound, Some("id"))
    );
    let create_again = Command::PutUser {
        spec: UserSpec {
            name: "alice".into(),
            kind: UserKind::User,
            role: UserRole::Admin,
        },
        expected_version: Some(0),
    };
    let r = refusal(entry(&mut h, ROOT, create_again));
    assert_eq!(r.code, RejectCode::Conflict);
}

#[test]
fn tokens_carry_hashes_expire_by_log_time_and_stay_revoked() {
    let mut h = Harness::new();
    assert!(entry(&mut h, ROOT, put_user("alice", UserRole::Admin)).is_accepted());
    assert!(entry(&mut h, ROOT, issue("alice", &id(1), Some(60_000))).is_accepted());
    assert!(entry(&mut h, ROOT, issue("alice", &id(2), None)).is_accepted());
    let t1 = h.state.users().token(&id(1)).cloned().unwrap();
    assert_eq!(
        t1.sha256_hex,
        token_hash_hex(&format_token(&id(1), "secret"))
    );
    assert_eq!(t1.expires_ms, Some(h.now_ms + 60_000));
    assert_eq!(t1.issued_by, ROOT);
    assert!(t1.is_live(h.now_ms) && !t1.is_live(h.now_ms + 60_000));
    let revoke = Command::RevokeToken {
        user: "alice".into(),
        id: id(2),
    };
    assert!(entry(&mut h, ROOT, revoke.clone()).is_accepted());
    let revoked_at = h.state.users().token(&id(2)).and_then(|t| t.revoked_ms);
    assert_eq!(revoked_at, Some(h.now_ms));
    h.advance(1000);
    assert!(entry(&mut h, ROOT, revoke).is_accepted());
    let again = h.state.users().token(&id(2)).and_then(|t| t.revoked_ms);
    assert_eq!(again, revoked_at, "the first revocation time stays");
    // The live-token limit counts live tokens only; dead ones are dropped at the next issue.
    for n in 3..(2 + MAX_LIVE_TOKENS_PER_USER as u64) {
        assert!(entry(&mut h, ROOT, issue("alice", &id(n), None)).is_accepted());
    }
    let r = refusal(entry(&mut h, ROOT, issue("alice", &id(100), None)));
    assert_eq!(r.field.as_deref(), Some("user"));
    h.advance(60_000);
    assert!(entry(&mut h, ROOT, issue("alice", &id(100), None)).is_accepted());
    assert!(h.state.users().token(&id(1)).is_none(), "expired, dropped");
    assert!(h.state.users().token(&id(2)).is_none(), "revoked, dropped");
    // Deleting the user deletes its tokens.
    let del = Command::DeleteUser {
        name: "alice".into(),
        expected_version: None,
    };
    assert!(entry(&mut h, ROOT, del).is_accepted());
    assert!(h.state.users().is_empty());
}

#[test]
fn a_tenant_member_user_writes_only_while_the_log_gives_it_the_role() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    h.ok(Command::PutTenant(TenantSpec {
        name: "acme".into(),
        namespaces: vec!["team-a".into()],
        quota: Default::default(),
        slice_size: None,
        members: vec![],
    }));
    let member = UserRole::Tenant {
        tenant: "acme".into(),
    };
    assert!(entry(&mut h, ROOT, put_user("dave", member)).is_accepted());
    let put = |name: &str| Command::PutObject {
        namespace: "team-a".into(),
        name: name.into(),
        spec: ObjectSpec {
            template: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
                .to_string(),
            placement: Default::default(),
            overrides: vec![],
        },
        expected_version: None,
    };
    assert!(entry(&mut h, "tenant:acme/dave", put("a")).is_accepted());
    assert!(entry(&mut h, ROOT, put_user("dave", UserRole::Auditor)).is_accepted());
    let r = refusal(entry(&mut h, "tenant:acme/dave", put("b")));
    assert_eq!(r.code, RejectCode::Forbidden);
    assert!(h.state.object("team-a", "b").is_none());
}

/// A scoped role's entry at `version` (the envelope is otherwise this binary's).
fn entry_at(h: &mut Harness, version: u16, actor: &str, command: Command) -> Outcome {
    h.index += 1;
    let mut e = LogEntry::new("", actor, h.now_ms, command);
    e.version = version;
    h.state.apply(h.index, &e).outcome
}

#[test]
fn a_role_scoped_to_namespaces_writes_only_there_and_needs_version_10() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    h.ok(Command::PutTenant(TenantSpec {
        name: "acme".into(),
        namespaces: vec!["team-a".into(), "team-b".into()],
        quota: Default::default(),
        slice_size: None,
        members: vec![],
    }));
    let put = |ns: &str, name: &str| Command::PutObject {
        namespace: ns.into(),
        name: name.into(),
        spec: ObjectSpec {
            template: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
                .to_string(),
            placement: Default::default(),
            overrides: vec![],
        },
        expected_version: None,
    };
    let scoped = |s: &str| UserRole::parse(s).unwrap();
    // A version-9 entry could not carry a scoped role: refused, nothing stored.
    let before = h.state.state_hash_hex();
    let r = refusal(entry_at(
        &mut h,
        9,
        ROOT,
        put_user("erin", scoped("tenant:acme/team-a")),
    ));
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::Invalid, Some("role"))
    );
    assert_eq!(h.state.state_hash_hex(), before);
    // A version-9 tenant role applies as it did: every namespace of the tenant.
    let member = UserRole::Tenant {
        tenant: "acme".into(),
    };
    assert!(entry_at(&mut h, 9, ROOT, put_user("dave", member)).is_accepted());
    assert!(entry_at(&mut h, 9, "tenant:acme/dave", put("team-b", "d")).is_accepted());
    // Namespaces the tenant does not own are refused when the role is made.
    let r = refusal(entry(
        &mut h,
        ROOT,
        put_user("erin", scoped("tenant:acme/other")),
    ));
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::Invalid, Some("role"))
    );
    assert!(entry(&mut h, ROOT, put_user("erin", scoped("tenant:acme/team-a"))).is_accepted());
    assert!(entry(&mut h, "tenant:acme/erin", put("team-a", "a")).is_accepted());
    let r = refusal(entry(&mut h, "tenant:acme/erin", put("team-b", "b")));
    assert_eq!(r.code, RejectCode::Forbidden);
    assert!(r.message.contains("team-b"), "{}", r.message);
    assert!(h.state.object("team-b", "b").is_none());
    // A reader writes nothing, even in its namespaces.
    let reader = scoped("tenant-reader:acme/team-a");
    assert!(entry(&mut h, ROOT, put_user("erin", reader.clone())).is_accepted());
    let r = refusal(entry(&mut h, "tenant:acme/erin", put("team-a", "c")));
    assert!(r.message.contains("only read"), "{}", r.message);
    assert_eq!(
        h.state.users().user("erin").map(|u| &u.spec.role),
        Some(&reader)
    );
    // The table, scoped roles included, survives a snapshot.
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap();
    assert_eq!(restored.state_hash_hex(), h.state.state_hash_hex());
    assert_eq!(restored.users(), h.state.users());
}

#[test]
fn an_empty_user_database_leaves_the_hash_alone_and_snapshots_keep_it() {
    let (mut a, mut b) = (Harness::new(), Harness::new());
    assert!(entry(&mut a, ROOT, put_user("alice", UserRole::Admin)).is_accepted());
    let with_user = a.state.state_hash_hex();
    let del = Command::DeleteUser {
        name: "alice".into(),
        expected_version: None,
    };
    assert!(entry(&mut a, ROOT, del).is_accepted());
    b.ok(Command::Tick);
    b.ok(Command::Tick);
    assert_ne!(with_user, b.state.state_hash_hex());
    assert_eq!(a.state.state_hash_hex(), b.state.state_hash_hex());

    // The previous layouts are this one without the newer parts: version 7 without the owners'
    // book and the four fail-back tables (empty, seven zero bytes at the very end), the health book
    // before them, and the per-cluster quotas (an empty map at the end of the extended-resource
    // tables); version 6 also without the other five extended-resource tables, version 5 also
    // without the four rollout maps (records, workloads, holds and their deadlines), version 4
    // also without the user database's two.
    let book =
        bincode::serde::encode_to_vec(b.state.health(), bincode::config::standard()).unwrap();
    // The lifecycle tables come last (empty: five zero lengths), after the descheduler's six
    // (empty: six zero lengths), after the owners' book (empty: two zero lengths and no forming
    // window), after the fail-back tables; version 9 is this layout without the lifecycle
    // tables, version 8 also without the descheduler's.
    // The statePreservation tables and then the taint tables come last of all (empty: two zero
    // lengths each); version 10 is this layout without them, and the older layouts are read off
    // it below.
    // Version 12 added the health book's log stall (none: one zero byte before those 22), so
    // version 11 is this layout one zero byte shorter, and its health book is `book` without
    // its last byte.
    let newest = b.state.to_snapshot();
    assert_eq!(newest[0], 12);
    assert_eq!(newest[newest.len() - 23..], [0; 23]);
    let mut v11 = newest[..newest.len() - 1].to_vec();
    v11[0] = 11;
    let old = State::from_snapshot(&v11).expect("a version-11 snapshot decodes");
    assert_eq!(old.state_hash_hex(), b.state.state_hash_hex());
    assert_eq!(book.last(), Some(&0));
    let book = &book[..book.len() - 1];
    let mut full = v11[..v11.len() - 4].to_vec();
    full[0] = 10;
    let old = State::from_snapshot(&full).expect("a version-10 snapshot decodes");
    assert_eq!(old.state_hash_hex(), b.state.state_hash_hex());
    assert_eq!(full[full.len() - 18..], [0; 18]);
    let mut v9 = full[..full.len() - 5].to_vec();
    v9[0] = 9;
    let old = State::from_snapshot(&v9).expect("a version-9 snapshot decodes");
    assert_eq!(old.state_hash_hex(), b.state.state_hash_hex());
    let mut v8 = full[..full.len() - 11].to_vec();
    v8[0] = 8;
    let old = State::from_snapshot(&v8).expect("a version-8 snapshot decodes");
    assert_eq!(old.state_hash_hex(), b.state.state_hash_hex());
    let no_failbacks = &full[..full.len() - 18];
    assert!(no_failbacks.ends_with(book));
    let bytes = no_failbacks[..no_failbacks.len() - book.len()].to_vec();
    assert_eq!(bytes[bytes.len() - 12..], [0; 12]);
    let mut v7 = bytes[..bytes.len() - 1].to_vec();
    v7[0] = 7;
    let old = State::from_snapshot(&v7).expect("a version-7 snapshot decodes");
    assert_eq!(old.state_hash_hex(), b.state.state_hash_hex());
    let mut v6 = bytes[..bytes.len() - 6].to_vec();
    v6[0] = 6;
    let old = State::from_snapshot(&v6).expect("a version-6 snapshot decodes");
    assert_eq!(old.state_hash_hex(), b.state.state_hash_hex());
    let mut v5 = bytes[..bytes.len() - 10].to_vec();
    v5[0] = 5;
    let old = State::from_snapshot(&v5).expect("a version-5 snapshot decodes");
    assert_eq!(old.state_hash_hex(), b.state.state_hash_hex());
    let mut v4 = bytes[..bytes.len() - 12].to_vec();
    v4[0] = 4;
    let old = State::from_snapshot(&v4).expect("a version-4 snapshot decodes");
    assert_eq!(old.state_hash_hex(), b.state.state_hash_hex());

    assert!(entry(&mut a, ROOT, put_user("bob", UserRole::Auditor)).is_accepted());
    assert!(entry(&mut a, ROOT, issue("bob", &id(7), Some(1000))).is_accepted());
    let restored = State::from_snapshot(&a.state.to_snapshot()).unwrap();
    assert_eq!(restored.state_hash_hex(), a.state.state_hash_hex());
    assert_eq!(restored.users(), a.state.users());
}

#[derive(Debug, Clone)]
enum Op {
    Put(usize, usize, usize),
    Delete(usize, usize),
    Issue(usize, usize, u8, Option<u64>),
    Revoke(usize, usize, u8),
    Advance(u64),
}

const NAMES: [&str; 3] = ["alice", "bob", "carol"];
const ACTORS: [&str; 4] = ["root", "user:alice", "user:bob", "tenant:acme/carol"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, 0..4usize, 0..4usize).prop_map(|(a, n, r)| Op::Put(a, n, r)),
        (0..4usize, 0..3usize).prop_map(|(a, n)| Op::Delete(a, n)),
        (
            0..4usize,
            0..3usize,
            0..8u8,
            proptest::option::of(1..5000u64)
        )
            .prop_map(|(a, n, t, ttl)| Op::Issue(a, n, t, ttl)),
        (0..4usize, 0..3usize, 0..8u8).prop_map(|(a, n, t)| Op::Revoke(a, n, t)),
        (0..3000u64).prop_map(Op::Advance),
    ]
}

fn to_entry(op: &Op, now: &mut u64) -> LogEntry {
    let roles = [
        UserRole::Admin,
        UserRole::Operator,
        UserRole::Auditor,
        UserRole::Tenant {
            tenant: "acme".into(),
        },
    ];
    let (actor, command) = match op {
        Op::Put(a, n, r) => (ACTORS[*a], put_user(NAMES[*n % 3], roles[*r].clone())),
        Op::Delete(a, n) => (
            ACTORS[*a],
            Command::DeleteUser {
                name: NAMES[*n].into(),
                expected_version: None,
            },
        ),
        Op::Issue(a, n, t, ttl) => (ACTORS[*a], issue(NAMES[*n], &id(*t as u64), *ttl)),
        Op::Revoke(a, n, t) => (
            ACTORS[*a],
            Command::RevokeToken {
                user: NAMES[*n].into(),
                id: id(*t as u64),
            },
        ),
        Op::Advance(ms) => {
            *now += ms;
            ("root", Command::Tick)
        }
    };
    LogEntry::new("", actor, *now, command)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn user_commands_replay_and_restore_deterministically(
        ops in proptest::collection::vec(op(), 1..60),
        cut in 0usize..60,
    ) {
        let mut now = crate::state_support::T0;
        let mut entries = vec![LogEntry::new("", "root", now, Command::PutTenant(TenantSpec {
            name: "acme".into(),
            namespaces: vec!["team-a".into()],
            quota: Default::default(),
            slice_size: None,
            members: vec![],
        }))];
        entries.extend(ops.iter().map(|o| to_entry(o, &mut now)));
        let (mut a, mut b) = (State::new(), State::new());
        let cut = cut.min(entries.len());
        let mut restored = None;
        for (i, e) in entries.iter().enumerate() {
            let index = i as u64 + 1;
            let (x, y) = (a.apply(index, e), b.apply(index, e));
            prop_assert_eq!(x.outcome, y.outcome);
            if let Some(r) = restored.as_mut() {
                let r: &mut State = r;
                r.apply(index, e);
            }
            if i + 1 == cut {
                restored = Some(State::from_snapshot(&a.to_snapshot()).unwrap());
            }
            // Every live token belongs to a user that exists.
            for t in a.users().tokens.values() {
                prop_assert!(a.users().user(&t.user).is_some());
            }
        }
        prop_assert_eq!(a.state_hash_hex(), b.state_hash_hex());
        if let Some(r) = restored {
            prop_assert_eq!(r.state_hash_hex(), a.state_hash_hex());
        }
    }
}
