//! Member clusters through the door: Karmada's `Cluster`, KubeFed's `KubeFedCluster` and the
//! Secrets of the credentials namespaces (`fedraft_core::door::CREDENTIALS_NAMESPACES`), which
//! hold members' tokens and are sealed here, at the edge, like the native registration's
//! credentials (`crate::sealing`).
//!
//! A write of one side of the join (a cluster document or its Secret) reads the other side
//! linearizably, opens the Secret's credentials (sealed under the context `secret:NS/NAME`),
//! composes the member's kubeconfig (its token, and the CA from the Secret's `caBundle` or the
//! KubeFedCluster's), seals it for the cluster's name and proposes ONE `PutMemberCluster` or
//! `PutMemberSecret` naming the version of the side it read; core refuses the write as a
//! conflict if that side moved, and the door's retry reads again.
//!
//! Must not: put credentials, sealed or not, in an answer, a log line or an error; let a Secret
//! of a credentials namespace become a resource template (`retarget` routes every path to one
//! of them here); accept these writes from anyone the native API would not let register a
//! cluster.

use std::sync::LazyLock;

use base64::Engine;
use fedraft_core::command::{Command, MemberBinding};
use fedraft_core::door::{
    is_credentials_namespace, member_secret_credentials, parse_member, MemberDoc, PolicyKindTag,
    PolicyRef, SecretRef,
};
use fedraft_core::model::Credentials;
use fedraft_kubeapi::meta;
use serde_json::Value;

use super::catalog::{Served, Store};
use super::{Call, KResult, Refusal};
use crate::routes::common::read;
use crate::sealing::CredentialsAtRest;

/// The `secrets` type as served in a credentials namespace: stored as member Secrets.
static MEMBER_SECRETS: LazyLock<Served> = LazyLock::new(|| {
    let def = super::catalog::find("", "v1", "secrets")
        .map(|s| s.def.clone())
        .unwrap_or_else(|| {
            fedraft_kubeapi::resource::ResourceDef::new("", "v1", "secrets", "Secret")
        });
    Served {
        def,
        store: Store::Policy(PolicyKindTag::MemberSecret),
        columns: None,
    }
});

/// The type a path in namespace `ns` is served by: Secrets of a credentials namespace are
/// member Secrets, never templates.
pub fn retarget(served: &'static Served, ns: Option<&str>) -> &'static Served {
    let secrets = served.store == Store::Template
        && served.def.group.is_empty()
        && served.def.plural == "secrets";
    if secrets && ns.is_some_and(is_credentials_namespace) {
        &MEMBER_SECRETS
    } else {
        served
    }
}

/// The context a member Secret's credentials are sealed under: not a DNS label, so never the
/// name of a cluster whose credentials could be swapped for them.
fn secret_context(secret: &SecretRef) -> String {
    format!("secret:{}/{}", secret.namespace, secret.name)
}

/// One value of a Secret's `stringData` (as written) or `data` (base64).
fn secret_value(obj: &Value, key: &str) -> KResult<Option<String>> {
    if let Some(s) = obj
        .pointer(&format!("/stringData/{key}"))
        .and_then(Value::as_str)
    {
        return Ok(Some(s.to_string()));
    }
    let Some(encoded) = obj.pointer(&format!("/data/{key}")).and_then(Value::as_str) else {
        return Ok(None);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| Refusal::bad_request(format!("data.{key}: not base64")))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| Refusal::bad_request(format!("data.{key}: not UTF-8 text")))
}

/// A member's credentials: its bearer token, and the CA (base64 of the PEM) when there is one,
/// as a kubeconfig without a server (the executor fills in the cluster's `apiEndpoint`).
fn compose(token: &str, ca_b64: Option<&str>) -> Credentials {
    let Some(ca) = ca_b64 else {
        return Credentials::BearerToken(token.to_string());
    };
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "member", "cluster": {"certificate-authority-data": ca}}],
        "users": [{"name": "member", "user": {"token": token}}],
        "contexts": [{"name": "member", "context": {"cluster": "member", "user": "member"}}],
        "current-context": "member",
    });
    // JSON is YAML: the executor's kubeconfig reader takes it as it is.
    Credentials::Kubeconfig(kubeconfig.to_string())
}

/// The token and CA of credentials `compose` built.
fn decompose(creds: &Credentials) -> Option<(String, Option<String>)> {
    match creds {
        Credentials::BearerToken(t) => Some((t.clone(), None)),
        Credentials::Kubeconfig(text) => {
            let v: Value = serde_json::from_str(text).ok()?;
            let token = v.pointer("/users/0/user/token")?.as_str()?.to_string();
            let ca = v
                .pointer("/clusters/0/cluster/certificate-authority-data")
                .and_then(Value::as_str)
                .map(str::to_string);
            Some((token, ca))
        }
        Credentials::None | Credentials::Sealed(_) => None,
    }
}

/// The credentials stored for a member Secret, opened.
fn open(at_rest: &CredentialsAtRest, context: &str, creds: &Credentials) -> KResult<Credentials> {
    let internal = |what: &str| {
        tracing::error!(
            context,
            what,
            "opening a member Secret's credentials failed"
        );
        Refusal::from(crate::ApiError::internal(
            "opening a member Secret's credentials failed",
        ))
    };
    match (at_rest.keyring(), creds) {
        (Some(k), c) => k.unseal(context, c).map_err(|_| internal("unseal")),
        (None, Credentials::Sealed(_)) => Err(internal("no key configured")),
        (None, c) => Ok(c.clone()),
    }
}

/// The credentials of the cluster `member` from its Secret's stored ones, sealed for it.
fn bind(
    at_rest: &CredentialsAtRest,
    member: &MemberDoc,
    secret_creds: &Credentials,
    read_version: u64,
) -> KResult<MemberBinding> {
    let plain = open(at_rest, &secret_context(&member.secret), secret_creds)?;
    let (token, ca) = decompose(&plain).ok_or_else(|| {
        Refusal::from(crate::ApiError::internal(
            "a member Secret holds credentials the door did not compose",
        ))
    })?;
    // KubeFed keeps the CA in the cluster document; Karmada in the Secret.
    let ca = member.ca_bundle.clone().or(ca);
    let credentials = at_rest
        .prepare(
            &member.name,
            Some(compose(&token, ca.as_deref())),
            Credentials::None,
        )
        .map_err(Refusal::from)?;
    Ok(MemberBinding {
        cluster: member.name.clone(),
        read_version,
        credentials,
    })
}

/// The command that writes `obj`, a member document or Secret, at `expected`.
pub async fn command(
    call: &Call,
    tag: PolicyKindTag,
    obj: &Value,
    expected: u64,
) -> KResult<Command> {
    if tag == PolicyKindTag::MemberSecret {
        return secret_command(call, obj, expected).await;
    }
    let manifest = obj.to_string();
    // A document core will refuse is proposed unbound: core's refusal names the field.
    let Some(Ok(member)) = parse_member(tag, obj) else {
        return Ok(Command::PutMemberCluster {
            manifest,
            binding: None,
            expected_version: Some(expected),
        });
    };
    let key = PolicyRef {
        kind: PolicyKindTag::MemberSecret,
        namespace: member.secret.namespace.clone(),
        name: member.secret.name.clone(),
    };
    let stored = read(&call.app, false, move |s| {
        s.door()
            .policies
            .get(&key)
            .map(|r| (member_secret_credentials(r), r.resource_version))
    })
    .await?;
    let binding = match stored {
        Some((Some(creds), version)) => {
            Some(bind(&call.app.cfg.credentials, &member, &creds, version)?)
        }
        _ => None,
    };
    Ok(Command::PutMemberCluster {
        manifest,
        binding,
        expected_version: Some(expected),
    })
}

async fn secret_command(call: &Call, obj: &Value, expected: u64) -> KResult<Command> {
    let secret = SecretRef {
        namespace: meta::meta_str(obj, "namespace").unwrap_or("").to_string(),
        name: meta::name(obj).to_string(),
    };
    let token = secret_value(obj, "token")?;
    let ca = match secret_value(obj, "caBundle")? {
        Some(ca) => Some(ca),
        // A service account token Secret, as `kubefedctl join` leaves it.
        None => secret_value(obj, "ca.crt")?,
    };
    let has_data = obj.get("data").is_some() || obj.get("stringData").is_some();
    let given =
        match (token, has_data) {
            (Some(t), _) => {
                let ca = ca.map(|c| base64::engine::general_purpose::STANDARD.encode(c));
                Some(compose(&t, ca.as_deref()))
            }
            (None, true) => return Err(Refusal::bad_request(
                "data.token: required: a member Secret holds the token fedraft authenticates to \
                 the member with",
            )),
            // A write without data (a label, an annotation) keeps the stored credentials.
            (None, false) => None,
        };
    let (key, who) = (secret.clone(), secret.clone());
    let (kept, naming) = read(&call.app, false, move |s| {
        let kept = s
            .door()
            .policies
            .get(&PolicyRef {
                kind: PolicyKindTag::MemberSecret,
                namespace: key.namespace.clone(),
                name: key.name.clone(),
            })
            .and_then(member_secret_credentials);
        (kept, s.member_docs_naming(&who))
    })
    .await?;
    let at_rest = &call.app.cfg.credentials;
    let context = secret_context(&secret);
    let credentials = at_rest
        .prepare(&context, given, kept.unwrap_or_default())
        .map_err(Refusal::from)?;
    let mut bindings = Vec::with_capacity(naming.len());
    for (_, member, version) in &naming {
        bindings.push(bind(at_rest, member, &credentials, *version)?);
    }
    let mut stored = obj.clone();
    if let Some(o) = stored.as_object_mut() {
        o.remove("data");
        o.remove("stringData");
    }
    // kubectl's client-side apply copies the whole object, data included, into this
    // annotation: it must not reach the log.
    if let Some(annotations) = meta::metadata_mut(&mut stored)
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    Ok(Command::PutMemberSecret {
        manifest: stored.to_string(),
        credentials,
        bindings,
        expected_version: Some(expected),
    })
}
