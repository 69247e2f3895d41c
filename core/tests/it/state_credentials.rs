//! `Command::RewrapCredentials` at apply time: a rotation lands whole or not at all, only on
//! clusters whose credentials are still the ones it read, and survives snapshot and replay.

use fedraft_core::command::{Command, CredentialsRewrap, LogEntry};
use fedraft_core::model::{ClusterSpec, Credentials, SealedCredentials};
use fedraft_core::state::{RejectCode, State};

use crate::state_support::Harness;

fn blob(key: &str, wrap: u8, payload: u8) -> SealedCredentials {
    SealedCredentials {
        key_id: key.into(),
        wrapped_key: vec![wrap; 60],
        nonce: vec![payload; 12],
        ciphertext: vec![payload; 40],
    }
}

fn register(h: &mut Harness, name: &str, creds: Credentials) -> u64 {
    let mut spec = ClusterSpec::new(name, "https://10.0.0.1:6443");
    spec.credentials = creds;
    h.ok(Command::RegisterCluster(spec));
    h.state.cluster(name).unwrap().resource_version
}

fn item(cluster: &str, expected_version: u64, credentials: SealedCredentials) -> CredentialsRewrap {
    CredentialsRewrap {
        cluster: cluster.into(),
        expected_version,
        credentials,
    }
}

fn creds(h: &Harness, name: &str) -> Credentials {
    h.state.cluster(name).unwrap().spec.credentials.clone()
}

#[test]
fn rotation_replaces_the_wrapping_of_sealed_and_seals_plaintext() {
    let mut h = Harness::new();
    let v1 = register(&mut h, "dc1", Credentials::Sealed(blob("k1", 1, 7)));
    let v2 = register(&mut h, "dc2", Credentials::BearerToken("plain".into()));
    let batch = vec![
        item("dc1", v1, blob("k2", 2, 7)),
        item("dc2", v2, blob("k2", 3, 9)),
    ];
    let a = h.ok(Command::RewrapCredentials(batch));
    let idx = h.index;
    assert_eq!(creds(&h, "dc1"), Credentials::Sealed(blob("k2", 2, 7)));
    assert_eq!(creds(&h, "dc2"), Credentials::Sealed(blob("k2", 3, 9)));
    assert_eq!(h.state.cluster("dc1").unwrap().resource_version, idx);
    assert_eq!(a.changes.len(), 2, "{:?}", a.changes);
    // Snapshot and replay agree byte for byte.
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap();
    assert_eq!(restored.state_hash_hex(), h.state.state_hash_hex());
}

#[test]
fn a_changed_payload_or_version_refuses_the_whole_batch() {
    let mut h = Harness::new();
    let v1 = register(&mut h, "dc1", Credentials::Sealed(blob("k1", 1, 7)));
    let v2 = register(&mut h, "dc2", Credentials::Kubeconfig("kc".into()));
    let before = h.state.state_hash_hex();
    // dc1 got new credentials (another payload) since the rotation read it.
    let r = h.refused(Command::RewrapCredentials(vec![
        item("dc2", v2, blob("k2", 3, 9)),
        item("dc1", v1, blob("k2", 2, 8)),
    ]));
    assert_eq!(r.code, RejectCode::Conflict);
    assert_eq!(r.field.as_deref(), Some("clusters[1]"));
    // Plaintext: only the resource version can tell, and it moved.
    let r = h.refused(Command::RewrapCredentials(vec![item(
        "dc2",
        v2 + 100,
        blob("k2", 3, 9),
    )]));
    assert_eq!(r.code, RejectCode::Conflict);
    assert_eq!(creds(&h, "dc2"), Credentials::Kubeconfig("kc".into()));
    assert_eq!(
        h.state.state_hash_hex(),
        before,
        "a refused rotation changes nothing"
    );
}

#[test]
fn malformed_rotations_are_refused() {
    let mut h = Harness::new();
    let v1 = register(&mut h, "dc1", Credentials::Sealed(blob("k1", 1, 7)));
    let v3 = register(&mut h, "dc3", Credentials::None);
    let cases = [
        (vec![], RejectCode::Invalid),
        (
            vec![
                item("dc1", v1, blob("k2", 2, 7)),
                item("dc1", v1, blob("k2", 2, 7)),
            ],
            RejectCode::Invalid,
        ),
        (vec![item("dc1", v1, blob("", 2, 7))], RejectCode::Invalid),
        (
            vec![item("nope", 1, blob("k2", 2, 7))],
            RejectCode::NotFound,
        ),
        (
            vec![item("Bad_Name", 1, blob("k2", 2, 7))],
            RejectCode::Invalid,
        ),
        (
            vec![item("dc3", v3, blob("k2", 2, 7))],
            RejectCode::FailedPrecondition,
        ),
    ];
    for (batch, code) in cases {
        let r = h.refused(Command::RewrapCredentials(batch.clone()));
        assert_eq!(r.code, code, "{batch:?}: {r:?}");
    }
    assert_eq!(creds(&h, "dc1"), Credentials::Sealed(blob("k1", 1, 7)));
}

#[test]
fn the_new_command_round_trips_through_the_log_encoding() {
    let e = LogEntry::new(
        "r",
        "admin",
        5,
        Command::RewrapCredentials(vec![item("dc1", 4, blob("k2", 2, 7))]),
    );
    assert_eq!(LogEntry::decode(&e.encode()).unwrap(), e);
    let mut d = fedraft_core::command::EntryDecoder::new();
    assert_eq!(d.decode(&e.encode()).unwrap(), &e);
}
