//! Kubeconfigs given as cluster credentials must be self-contained.
//!
//! The executor builds its member client from the kubeconfig on whichever node leads, so a
//! kubeconfig naming an `exec` plugin or an `auth-provider` runs a command there, and one naming
//! `tokenFile`, `client-certificate`, `client-key` or `certificate-authority` reads a file from
//! that node's disk (and sends it to the member's server). Registration refuses all of them with
//! the path of the first offending field; an admin may allow `exec` for a named list of plugin
//! commands in the node config (`ApiConfig::kubeconfig_exec_allow`). The executor refuses the same
//! fields again for entries already in the log.
//!
//! Must not: put any value of the kubeconfig (they are credentials) in an error, only paths and
//! command names from the allow-list.

use serde_json::Value;

use crate::body::yaml;
use crate::error::ApiError;

/// Where the kubeconfig sits in a cluster body.
const ROOT: &str = "credentials.kubeconfig";

/// Fields of `users[i].user` that read a file or run a command, and why each is refused.
const USER_FIELDS: [(&str, &str); 4] = [
    ("auth-provider", "runs an auth-provider plugin on the node"),
    (
        "tokenFile",
        "reads a file on the node; put the token in `token`",
    ),
    (
        "client-certificate",
        "reads a file on the node; use `client-certificate-data`",
    ),
    (
        "client-key",
        "reads a file on the node; use `client-key-data`",
    ),
];

/// Refuses a kubeconfig that is not one YAML document, or that reads files or runs commands
/// (exec plugins are accepted when their command is in `exec_allow`). `limit_bytes` bounds what
/// the YAML may expand to, as for a body.
pub fn check(text: &str, exec_allow: &[String], limit_bytes: usize) -> Result<(), ApiError> {
    let doc = yaml::parse(text.as_bytes(), yaml::Budget::for_body_limit(limit_bytes)).map_err(
        |e| match e {
            yaml::YamlError::TooLarge(message) => ApiError::TooLarge { message },
            // The library's message may quote the text, which is a credential.
            yaml::YamlError::TooDeep | yaml::YamlError::Invalid(_) => {
                ApiError::invalid(ROOT, "not a single YAML document")
            }
        },
    )?;
    if !doc.is_object() {
        return Err(ApiError::invalid(ROOT, "must be a kubeconfig (a mapping)"));
    }
    for (i, named) in list(&doc, "users").iter().enumerate() {
        let Some(user) = named.get("user").and_then(Value::as_object) else {
            continue;
        };
        let at = |field: &str| format!("{ROOT}.users[{i}].user.{field}");
        for (field, why) in USER_FIELDS {
            if user.contains_key(field) {
                return Err(ApiError::invalid(at(field), why));
            }
        }
        if let Some(exec) = user.get("exec") {
            let command = exec.get("command").and_then(Value::as_str).unwrap_or("");
            if !exec_allow.iter().any(|c| c == command) {
                let allowed = if exec_allow.is_empty() {
                    "no exec plugin is allowed on this cluster".to_string()
                } else {
                    format!("allowed plugin commands: {}", exec_allow.join(", "))
                };
                return Err(ApiError::invalid(
                    at("exec"),
                    format!("runs a command on the node; {allowed}"),
                ));
            }
        }
    }
    for (i, named) in list(&doc, "clusters").iter().enumerate() {
        let reads_file = named
            .get("cluster")
            .and_then(Value::as_object)
            .is_some_and(|c| c.contains_key("certificate-authority"));
        if reads_file {
            return Err(ApiError::invalid(
                format!("{ROOT}.clusters[{i}].cluster.certificate-authority"),
                "reads a file on the node; use `certificate-authority-data`",
            ));
        }
    }
    Ok(())
}

fn list<'a>(doc: &'a Value, key: &str) -> &'a [Value] {
    doc.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 1 << 20;

    fn field(text: &str, allow: &[&str]) -> Option<String> {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        match check(text, &allow, LIMIT) {
            Ok(()) => None,
            Err(e) => {
                assert_eq!(e.status().as_u16(), 400, "{e:?}");
                assert!(!e.to_string().contains("s3cret"), "{e}");
                Some(e.field().unwrap_or("").to_string())
            }
        }
    }

    const GOOD: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://k:6443', certificate-authority-data: QUJD}\nusers:\n- name: u\n  user: {token: s3cret}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";

    #[test]
    fn self_contained_kubeconfigs_pass() {
        assert_eq!(field(GOOD, &[]), None);
        let certs = GOOD.replace(
            "{token: s3cret}",
            "{client-certificate-data: QUJD, client-key-data: s3cret}",
        );
        assert_eq!(field(&certs, &[]), None);
    }

    #[test]
    fn file_references_and_plugins_are_refused_by_path() {
        let user = |u: &str| GOOD.replace("{token: s3cret}", u);
        let cases = [
            (
                user("{exec: {command: /bin/sh, args: [-c, id]}}"),
                "users[0].user.exec",
            ),
            (
                user("{auth-provider: {name: gcp, config: {cmd-path: /bin/sh}}}"),
                "users[0].user.auth-provider",
            ),
            (user("{tokenFile: /etc/shadow}"), "users[0].user.tokenFile"),
            (
                user("{client-certificate: /a, client-key-data: s3cret}"),
                "users[0].user.client-certificate",
            ),
            (
                user("{client-key: /var/lib/fedraft/key}"),
                "users[0].user.client-key",
            ),
            (
                GOOD.replace(
                    "certificate-authority-data: QUJD",
                    "certificate-authority: /etc/ssl/x",
                ),
                "clusters[0].cluster.certificate-authority",
            ),
        ];
        for (text, path) in cases {
            assert_eq!(field(&text, &[]), Some(format!("{ROOT}.{path}")), "{text}");
        }
        // A second user is checked too, and its index named.
        let two = GOOD.replace(
            "users:\n- name: u\n  user: {token: s3cret}\n",
            "users:\n- name: u\n  user: {token: s3cret}\n- name: v\n  user: {tokenFile: /x}\n",
        );
        assert_eq!(
            field(&two, &[]),
            Some(format!("{ROOT}.users[1].user.tokenFile"))
        );
    }

    #[test]
    fn exec_is_allowed_only_for_listed_commands() {
        let text = GOOD.replace(
            "{token: s3cret}",
            "{exec: {command: aws-iam-authenticator}}",
        );
        assert_eq!(
            field(&text, &[]),
            Some(format!("{ROOT}.users[0].user.exec"))
        );
        assert_eq!(field(&text, &["aws-iam-authenticator"]), None);
        assert!(field(&text, &["gke-gcloud-auth-plugin"]).is_some());
    }

    #[test]
    fn not_one_document_is_refused_without_quoting_it() {
        assert!(field("users: [s3cret", &[]).is_some());
        assert!(field(&format!("{GOOD}---\n{GOOD}"), &[]).is_some());
        assert!(field("just s3cret text", &[]).is_some());
    }
}
