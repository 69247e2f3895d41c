//! Seal, open, rotate and key loading, including the failures: wrong key, unknown key,
//! tampered blobs, blobs moved to another cluster, unsafe key files.

use std::io::Write;

use base64::Engine;
use fedraft_core::model::{Credentials, SealedCredentials};
use zeroize::Zeroizing;

use crate::{KeySource, Keyring, KeyringConfig, SecretsError};

const TOKEN: &str = "token-0123456789abcdef-SECRET";

fn key(byte: u8) -> Zeroizing<Vec<u8>> {
    Zeroizing::new(vec![byte; 32])
}

fn ring(current: &str, keys: &[(&str, u8)]) -> Keyring {
    Keyring::new(
        current,
        keys.iter().map(|(id, b)| (id.to_string(), key(*b))),
    )
    .unwrap()
}

fn sealed(c: &Credentials) -> &SealedCredentials {
    match c {
        Credentials::Sealed(s) => s,
        other => panic!("not sealed: {other:?}"),
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn seal_then_unseal_gives_back_both_kinds() {
    let k = ring("k1", &[("k1", 1)]);
    for plain in [
        Credentials::BearerToken(TOKEN.into()),
        Credentials::Kubeconfig(format!("users: [{{user: {{token: {TOKEN}}}}}]")),
    ] {
        let s = k.seal("dc1", &plain).unwrap();
        let blob = sealed(&s);
        assert_eq!(blob.key_id, "k1");
        assert!(!contains(&blob.ciphertext, TOKEN.as_bytes()));
        assert!(!contains(&blob.wrapped_key, TOKEN.as_bytes()));
        assert_eq!(k.unseal("dc1", &s).unwrap(), plain);
    }
}

#[test]
fn every_write_draws_a_new_data_key_and_nonce() {
    let k = ring("k1", &[("k1", 1)]);
    let plain = Credentials::BearerToken(TOKEN.into());
    let (a, b) = (
        k.seal("dc1", &plain).unwrap(),
        k.seal("dc1", &plain).unwrap(),
    );
    assert_ne!(sealed(&a).wrapped_key, sealed(&b).wrapped_key);
    assert_ne!(sealed(&a).nonce, sealed(&b).nonce);
    assert_ne!(sealed(&a).ciphertext, sealed(&b).ciphertext);
}

#[test]
fn nothing_to_hide_passes_through() {
    let k = ring("k1", &[("k1", 1)]);
    assert_eq!(
        k.seal("dc1", &Credentials::None).unwrap(),
        Credentials::None
    );
    let plain = Credentials::BearerToken(TOKEN.into());
    assert_eq!(k.unseal("dc1", &plain).unwrap(), plain);
    let s = k.seal("dc1", &plain).unwrap();
    assert_eq!(
        k.seal("dc1", &s).unwrap(),
        s,
        "sealing twice changes nothing"
    );
}

#[test]
fn a_wrong_or_missing_key_does_not_open() {
    let s = ring("k1", &[("k1", 1)])
        .seal("dc1", &Credentials::BearerToken(TOKEN.into()))
        .unwrap();
    let other = ring("k1", &[("k1", 2)]);
    let err = other.unseal("dc1", &s).unwrap_err();
    assert!(matches!(err, SecretsError::Open { .. }), "{err}");
    let missing = ring("k2", &[("k2", 1)]);
    let err = missing.unseal("dc1", &s).unwrap_err();
    assert!(matches!(err, SecretsError::UnknownKey { ref key_id } if key_id == "k1"));
    assert!(!err.to_string().contains(TOKEN));
}

#[test]
fn tampering_or_moving_a_blob_is_detected() {
    let k = ring("k1", &[("k1", 1), ("k2", 1)]);
    let s = k
        .seal("dc1", &Credentials::BearerToken(TOKEN.into()))
        .unwrap();
    let blob = sealed(&s).clone();
    let mut cases: Vec<(&str, SealedCredentials)> = Vec::new();
    for i in [0, blob.ciphertext.len() / 2, blob.ciphertext.len() - 1] {
        let mut t = blob.clone();
        t.ciphertext[i] ^= 0x01;
        cases.push(("ciphertext", t));
    }
    let mut t = blob.clone();
    t.wrapped_key[20] ^= 0x80;
    cases.push(("wrapped key", t));
    let mut t = blob.clone();
    t.nonce[0] ^= 0x01;
    cases.push(("nonce", t));
    let mut t = blob.clone();
    t.nonce.pop();
    cases.push(("short nonce", t));
    let mut t = blob.clone();
    t.wrapped_key.truncate(10);
    cases.push(("short wrapped key", t));
    // Same key bytes under another id: the wrapping is bound to the id it names.
    let mut t = blob.clone();
    t.key_id = "k2".into();
    cases.push(("relabelled key id", t));
    for (what, t) in cases {
        let err = k.unseal("dc1", &Credentials::Sealed(t)).unwrap_err();
        assert!(matches!(err, SecretsError::Open { .. }), "{what}: {err}");
    }
    // A blob copied onto another cluster's registration does not open there.
    let err = k.unseal("dc2", &s).unwrap_err();
    assert!(matches!(err, SecretsError::Open { .. }), "{err}");
}

#[test]
fn rotation_rewraps_the_data_key_and_keeps_the_payload() {
    let old = ring("k1", &[("k1", 1)]);
    let plain = Credentials::BearerToken(TOKEN.into());
    let s = old.seal("dc1", &plain).unwrap();
    let both = ring("k2", &[("k1", 1), ("k2", 2)]);
    let re = both.rewrap("dc1", &s).unwrap().expect("re-wrapped");
    assert_eq!(re.key_id, "k2");
    assert_eq!(re.nonce, sealed(&s).nonce);
    assert_eq!(re.ciphertext, sealed(&s).ciphertext);
    assert_ne!(re.wrapped_key, sealed(&s).wrapped_key);
    let re = Credentials::Sealed(re);
    assert_eq!(both.rewrap("dc1", &re).unwrap(), None, "already current");
    // The old key can go: the newest alone opens it.
    let new_only = ring("k2", &[("k2", 2)]);
    assert_eq!(new_only.unseal("dc1", &re).unwrap(), plain);
    // Plaintext from before sealing existed is sealed by rotation; no credentials stay none.
    let from_plain = Credentials::Sealed(both.rewrap("dc1", &plain).unwrap().unwrap());
    assert_eq!(new_only.unseal("dc1", &from_plain).unwrap(), plain);
    assert_eq!(both.rewrap("dc1", &Credentials::None).unwrap(), None);
    // A blob under a key no longer configured cannot be rotated.
    assert!(matches!(
        new_only.rewrap("dc1", &s),
        Err(SecretsError::UnknownKey { .. })
    ));
}

#[test]
fn keyring_refuses_bad_keys_and_ids() {
    let one = |id: &str, bytes: Vec<u8>| vec![(id.to_string(), Zeroizing::new(bytes))];
    assert!(Keyring::new("k", one("k", vec![1; 16])).is_err());
    assert!(Keyring::new("k", one("", vec![1; 32])).is_err());
    assert!(Keyring::new("k", one("a b", vec![1; 32])).is_err());
    assert!(Keyring::new("other", one("k", vec![1; 32])).is_err());
    let twice = [("k".to_string(), key(1)), ("k".to_string(), key(2))];
    assert!(Keyring::new("k", twice).is_err());
    let k = ring("k", &[("k", 1)]);
    assert_eq!(k.current_id(), "k");
    assert!(!format!("{k:?}").contains("\\u{1}"));
}

fn write_key(dir: &std::path::Path, name: &str, bytes: &[u8], mode: u32) -> std::path::PathBuf {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(bytes).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    path
}

fn file_source(id: &str, path: std::path::PathBuf) -> KeySource {
    KeySource {
        id: id.into(),
        file: Some(path),
        env: None,
    }
}

#[test]
fn keys_load_from_files_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode([3u8; 32]);
    let cfg = KeyringConfig {
        current: "raw".into(),
        keys: vec![
            file_source("raw", write_key(dir.path(), "raw", &[5u8; 32], 0o600)),
            file_source(
                "text",
                write_key(dir.path(), "text", format!("{b64}\n").as_bytes(), 0o400),
            ),
            KeySource {
                id: "env".into(),
                file: None,
                env: Some("KEY_VAR".into()),
            },
        ],
    };
    let k = cfg
        .load_with(|name| (name == "KEY_VAR").then(|| b64.clone()))
        .unwrap();
    // The file holding base64 text and the variable hold the same key: same bytes, two ids.
    let s = ring("text", &[("text", 3)])
        .seal("dc1", &Credentials::BearerToken(TOKEN.into()))
        .unwrap();
    assert_eq!(
        k.unseal("dc1", &s).unwrap(),
        Credentials::BearerToken(TOKEN.into())
    );
    assert_eq!(k.current_id(), "raw");
    let err = cfg.load_with(|_| None).unwrap_err().to_string();
    assert!(err.contains("KEY_VAR"), "{err}");
}

#[test]
fn unsafe_or_malformed_key_sources_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let load = |src: KeySource| {
        KeyringConfig {
            current: src.id.clone(),
            keys: vec![src],
        }
        .load_with(|_| Some("c2hvcnQ=".into()))
        .unwrap_err()
        .to_string()
    };
    #[cfg(unix)]
    {
        let err = load(file_source(
            "k",
            write_key(dir.path(), "open", &[5u8; 32], 0o644),
        ));
        assert!(err.contains("chmod 600"), "{err}");
    }
    let err = load(file_source(
        "k",
        write_key(dir.path(), "short", &[5u8; 31], 0o600),
    ));
    assert!(err.contains("base64"), "{err}");
    let err = load(file_source("k", dir.path().join("absent")));
    assert!(err.contains("absent"), "{err}");
    let err = load(KeySource {
        id: "k".into(),
        file: None,
        env: Some("V".into()),
    });
    assert!(err.contains("decodes to 5 bytes"), "{err}");
    let err = load(KeySource {
        id: "k".into(),
        file: None,
        env: None,
    });
    assert!(err.contains("exactly one"), "{err}");
}
