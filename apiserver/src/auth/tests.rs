//! Unit tests of token parsing, authentication (token file and replicated tokens) and the
//! authorisation rules by role.

use super::*;
use axum::http::HeaderValue;

fn bearer(t: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
    );
    h
}

#[test]
fn parses_roles_and_refuses_the_cluster_secret() {
    let text = "# comment\nt1 alice admin\n\nt2 bob operator\nt3 carol tenant:blue\n";
    let store = TokenStore::parse(text, Some("s3cret".into())).unwrap();
    assert_eq!(
        store.authenticate(&bearer("t3")).unwrap().role,
        Role::Tenant("blue".into())
    );
    assert!(store.authenticate(&bearer("nope")).is_err());
    assert!(store.authenticate(&bearer("s3cret")).is_err());
    assert!(store.authenticate(&HeaderMap::new()).is_err());
    assert!(TokenStore::parse("s3cret x admin", Some("s3cret".into())).is_err());
    assert!(TokenStore::parse("a b wizard", None).is_err());
    assert!(TokenStore::parse("a b", None).is_err());
}

#[test]
fn refuses_a_token_given_to_two_principals() {
    let text = "t1 alice admin\nt2 bob operator\n\nt1 carol tenant:blue\n";
    let err = TokenStore::parse(text, None).unwrap_err();
    assert!(
        matches!(
            &err,
            TokenFileError::DuplicateToken { line: 4, first_line: 1, name, first_name }
                if name == "carol" && first_name == "alice"
        ),
        "{err:?}"
    );
    assert!(!err.to_string().contains("t1"), "errors never show a token");
    let p = |n: &str| Principal {
        name: n.into(),
        role: Role::Admin,
    };
    assert!(TokenStore::new([("x".into(), p("a")), ("x".into(), p("b"))], None).is_err());
}

#[test]
fn tenant_members_stay_in_their_namespaces() {
    let p = Principal {
        name: "carol".into(),
        role: Role::Tenant("blue".into()),
    };
    let owned = vec!["blue-prod".to_string()];
    assert!(authorize(&p, Access::WriteNamespace("blue-prod"), &owned).is_ok());
    assert!(authorize(&p, Access::WriteNamespace("red"), &owned).is_err());
    assert!(authorize(&p, Access::ReadClusters, &owned).is_err());
    assert!(authorize(&p, Access::ReadTenant("blue"), &owned).is_ok());
    assert!(authorize(&p, Access::ReadTenant("red"), &owned).is_err());
    assert!(authorize(&p, Access::ReadSomeNamespace, &owned).is_ok());
    assert!(authorize(&p, Access::ReadSomeNamespace, &[]).is_err());
    let op = Principal {
        name: "bob".into(),
        role: Role::Operator,
    };
    assert!(authorize(&op, Access::WriteClusters, &[]).is_ok());
    assert!(authorize(&op, Access::WriteNamespace("x"), &[]).is_err());
}

#[test]
fn auditors_read_everything_and_write_nothing() {
    let store = TokenStore::parse("t1 dora auditor\n", None).unwrap();
    let p = store.authenticate(&bearer("t1")).unwrap();
    assert_eq!(p.role, Role::Auditor);
    for read in [
        Access::ReadClusters,
        Access::ReadNamespace("any"),
        Access::ReadSomeNamespace,
        Access::ReadAllObjects,
        Access::ReadTenant("blue"),
    ] {
        assert!(authorize(&p, read, &[]).is_ok(), "{read:?}");
    }
    for write in [
        Access::WriteClusters,
        Access::WriteNamespace("any"),
        Access::WriteTenant,
    ] {
        assert!(authorize(&p, write, &[]).is_err(), "{write:?}");
    }
    assert!(TokenStore::parse("t1 user:eve admin\n", None).is_err());
    assert!(TokenStore::parse("t1 tenant:blue/eve admin\n", None).is_err());
}

#[test]
fn replicated_tokens_match_by_hash_and_stop_when_not_live() {
    let token = fedraft_core::users::format_token("0123456789abcdef", &"ab".repeat(32));
    let record = |live, hash: String| ReplicatedToken {
        sha256_hex: hash,
        live,
        user: "alice".into(),
        role: UserRole::Admin,
    };
    let store = TokenStore::parse("file-token alice-file admin\n", Some("s3cret".into())).unwrap();
    let good = record(true, token_hash_hex(&token));
    let p = store
        .authenticate_with(&bearer(&token), |id| {
            assert_eq!(id, "0123456789abcdef");
            Some(good.clone())
        })
        .unwrap();
    assert_eq!((p.name.as_str(), p.role), ("user:alice", Role::Admin));
    // The token file still answers first, and the cluster secret is never a token.
    let p = store
        .authenticate_with(&bearer("file-token"), |_| panic!("not asked"))
        .unwrap();
    assert_eq!(p.name, "alice-file");
    assert!(store
        .authenticate_with(&bearer("s3cret"), |_| panic!("not asked"))
        .is_err());
    // Another secret under the same id, a revoked or expired record, no record: 401.
    let wrong = fedraft_core::users::format_token("0123456789abcdef", "cd");
    assert!(store
        .authenticate_with(&bearer(&wrong), |_| Some(good.clone()))
        .is_err());
    let dead = record(false, token_hash_hex(&token));
    let err = store
        .authenticate_with(&bearer(&token), |_| Some(dead.clone()))
        .unwrap_err();
    assert!(matches!(err, ApiError::Unauthenticated { .. }), "{err:?}");
    assert!(store.authenticate_with(&bearer(&token), |_| None).is_err());
    let tenant = user_principal(
        "dave",
        &UserRole::Tenant {
            tenant: "blue".into(),
        },
    );
    assert_eq!(
        (tenant.name.as_str(), tenant.role),
        ("dave", Role::Tenant("blue".into()))
    );
}
