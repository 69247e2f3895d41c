//! Admission: who may federate which manifest, decided at apply from the entry alone.
//!
//! Owns the replicated [`AdmissionPolicy`] (set by an admin with a logged command, with a
//! conservative default), the actor's role as the log entry carries it ([`Actor`]), the scope of
//! kinds (`kinds`), the identity an object is admitted with ([`Admitted`]) and the RBAC rules for
//! tenants' RoleBindings. The state's object handler (`state/handlers/admission.rs`) runs these
//! checks on the template and on every rendered variant; executors re-check the identity and
//! compare the scope with the member's discovery before writing.
//!
//! The rules, in order (the first that fails names its field and rule in the refusal):
//! 1. `tenant-namespace` (403): an actor `tenant:T/NAME` writes only in namespaces tenant T owns,
//!    and only if NAME is one of T's members (or T lists none), and, when NAME is a user of the
//!    replicated user database (`crate::users`), only while that user's role is a member of T.
//!    Any other actor is an admin (the API writes every tenant principal's actor in that form).
//! 2. `cluster-scoped-kind`: a kind admitted as cluster-scoped ([`kinds::admitted_scope`]) is
//!    refused for tenants (403) and for admins unless the policy's `clusterScopedKinds` lists it
//!    (422).
//! 3. `tenant-rbac` (403): a tenant's RoleBinding may reference a Role, or a ClusterRole the
//!    policy's `bindableClusterRoles` lists (default view, edit, admin); its subjects may be
//!    ServiceAccounts of the object's own namespace, and Users or Groups not named `system:*`.
//! 4. `render-limits` (422): every override combination a cluster may get renders within
//!    `render::LIMITS`.
//! 5. `rendered-identity` (422): each rendered variant keeps the template's apiVersion, kind and
//!    metadata.name, and carries no namespace other than the object's.
//! 6. `tenant-limits` (422): a tenant's object count and stored template bytes stay within the
//!    policy's `tenantMaxObjects` and `tenantMaxTemplateBytes` (0 = no limit).
//!
//! Must not: do I/O, or read anything but the command, the actor and the replicated state.

pub mod kinds;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::FieldError;
use crate::render::RenderError;
pub use kinds::Scope;

/// Prefix of a tenant principal's actor: `tenant:TENANT/NAME`.
pub const TENANT_ACTOR_PREFIX: &str = "tenant:";
/// Most overrides one object may carry.
pub const MAX_OVERRIDES: usize = 64;

/// The first log envelope version whose entries are admitted at apply.
pub const ADMISSION_SINCE_VERSION: u16 = 2;

/// Who proposed an entry, as far as rights go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// Any actor not in the tenant form: admins (and, before roles reached the log, everyone).
    Admin,
    /// A member of a tenant.
    Tenant { tenant: String, name: String },
    /// The actor of an entry written before admission reached the log (envelope version 1).
    /// Such entries replay exactly as they applied when they were written: no admission rule
    /// existed then, so none applies now, and every node agrees on the state they produce.
    Legacy,
}

impl Actor {
    /// The actor of an entry of envelope `version`, whose actor string is `actor`.
    pub fn of_entry(version: u16, actor: &str) -> Actor {
        if version < ADMISSION_SINCE_VERSION {
            Actor::Legacy
        } else {
            Actor::parse(actor)
        }
    }

    /// Reads the role an entry's actor string carries.
    pub fn parse(actor: &str) -> Actor {
        match actor
            .strip_prefix(TENANT_ACTOR_PREFIX)
            .and_then(|rest| rest.split_once('/'))
        {
            Some((tenant, name)) => Actor::Tenant {
                tenant: tenant.to_string(),
                name: name.to_string(),
            },
            None => Actor::Admin,
        }
    }

    /// The actor string of principal `name`, member of `tenant`.
    pub fn tenant_actor(tenant: &str, name: &str) -> String {
        format!("{TENANT_ACTOR_PREFIX}{tenant}/{name}")
    }
}

/// What admins allow on top of the fixed rules; replicated, set by `SetAdmissionPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionPolicy {
    /// Cluster-scoped kinds admins may federate: `Kind` for the core group (`Namespace`),
    /// `group/Kind` otherwise (`rbac.authorization.k8s.io/ClusterRole`). Default: none.
    #[serde(default)]
    pub cluster_scoped_kinds: Vec<String>,
    /// ClusterRoles a tenant's RoleBinding may reference.
    #[serde(default = "default_bindable")]
    pub bindable_cluster_roles: Vec<String>,
    /// Most objects per tenant (over its namespaces); 0 = no limit.
    #[serde(default = "default_max_objects")]
    pub tenant_max_objects: u64,
    /// Most template bytes stored per tenant; 0 = no limit.
    #[serde(default = "default_max_template_bytes")]
    pub tenant_max_template_bytes: u64,
}

fn default_bindable() -> Vec<String> {
    ["view", "edit", "admin"].map(String::from).to_vec()
}
fn default_max_objects() -> u64 {
    10_000
}
fn default_max_template_bytes() -> u64 {
    256 * 1024 * 1024
}

impl Default for AdmissionPolicy {
    fn default() -> Self {
        AdmissionPolicy {
            cluster_scoped_kinds: Vec::new(),
            bindable_cluster_roles: default_bindable(),
            tenant_max_objects: default_max_objects(),
            tenant_max_template_bytes: default_max_template_bytes(),
        }
    }
}

impl AdmissionPolicy {
    pub fn validate(&self, prefix: &str) -> Result<(), FieldError> {
        for (i, k) in self.cluster_scoped_kinds.iter().enumerate() {
            let field = format!("{prefix}.clusterScopedKinds[{i}]");
            let (group, kind) = k.rsplit_once('/').unwrap_or(("", k));
            let kind_ok = kind.len() <= 63
                && kind.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && kind.chars().all(|c| c.is_ascii_alphanumeric());
            let group_ok =
                group.is_empty() || crate::policy::validate_dns_subdomain(group, &field).is_ok();
            if !kind_ok || !group_ok {
                return Err(FieldError::new(
                    field,
                    format!("{k:?} is not `Kind` or `group/Kind`"),
                ));
            }
            if kinds::admitted_scope(group, kind, false) != Scope::Cluster {
                return Err(FieldError::new(
                    field,
                    format!("{k:?} is a namespaced kind; list only cluster-scoped kinds"),
                ));
            }
        }
        for (i, r) in self.bindable_cluster_roles.iter().enumerate() {
            if r.is_empty()
                || r.len() > 253
                || r.contains(['/', '%'])
                || r.contains(char::is_whitespace)
            {
                return Err(FieldError::new(
                    format!("{prefix}.bindableClusterRoles[{i}]"),
                    format!("{r:?} is not a ClusterRole name"),
                ));
            }
        }
        Ok(())
    }

    /// Whether admins may federate the cluster-scoped `kind` of `group`.
    pub fn allows_cluster_kind(&self, group: &str, kind: &str) -> bool {
        let key = kinds::kind_key(group, kind);
        self.cluster_scoped_kinds.contains(&key)
    }
}

/// The identity an object was admitted with, and the scope admission assumed for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// The federated object's namespace (where a namespaced kind is written).
    pub namespace: String,
    pub scope: Scope,
}

impl Admitted {
    pub fn group(&self) -> &str {
        kinds::group_of(&self.api_version)
    }

    /// Reads the identity from a template (a JSON object with apiVersion, kind and
    /// metadata.name, as validation ensured) of an object in `namespace`.
    pub fn from_template(doc: &Value, namespace: &str) -> Result<Admitted, FieldError> {
        Self::from_parts(
            doc.get("apiVersion"),
            doc.get("kind"),
            doc.pointer("/metadata/name"),
            doc.pointer("/metadata/namespace"),
            namespace,
        )
    }

    /// [`Admitted::from_template`] from the template's text, reading only the identity fields
    /// (the rest is skipped, not built: a put of a large template pays one scan, not a tree).
    pub fn from_template_text(template: &str, namespace: &str) -> Result<Admitted, FieldError> {
        #[derive(Deserialize)]
        struct Head {
            #[serde(rename = "apiVersion")]
            api_version: Option<Value>,
            kind: Option<Value>,
            metadata: Option<Meta>,
        }
        #[derive(Deserialize)]
        struct Meta {
            name: Option<Value>,
            namespace: Option<Value>,
        }
        let head: Head = serde_json::from_str(template)
            .map_err(|e| FieldError::new("spec.template", format!("not a manifest: {e}")))?;
        let meta = head.metadata.as_ref();
        Self::from_parts(
            head.api_version.as_ref(),
            head.kind.as_ref(),
            meta.and_then(|m| m.name.as_ref()),
            meta.and_then(|m| m.namespace.as_ref()),
            namespace,
        )
    }

    fn from_parts(
        api_version: Option<&Value>,
        kind: Option<&Value>,
        name: Option<&Value>,
        template_ns: Option<&Value>,
        namespace: &str,
    ) -> Result<Admitted, FieldError> {
        let s = |v: Option<&Value>, field: &str| {
            v.and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| FieldError::new(field, "required: a non-empty string"))
        };
        let api_version = s(api_version, "spec.template.apiVersion")?;
        let kind = s(kind, "spec.template.kind")?;
        let name = s(name, "spec.template.metadata.name")?;
        let template_ns = match template_ns {
            None | Some(Value::Null) => false,
            Some(Value::String(ns)) if ns == namespace => true,
            Some(other) => {
                return Err(FieldError::new(
                    "spec.template.metadata.namespace",
                    format!(
                        "is {other}; a template may carry only its object's namespace {namespace:?}"
                    ),
                ))
            }
        };
        let scope = kinds::admitted_scope(kinds::group_of(&api_version), &kind, template_ns);
        Ok(Admitted {
            api_version,
            kind,
            name,
            namespace: namespace.to_string(),
            scope,
        })
    }

    /// Checks that `rendered` keeps this identity: same apiVersion, kind, metadata.name, and
    /// no namespace but the object's (rendering writes the object's namespace last).
    pub fn check(&self, rendered: &Value) -> Result<(), RenderError> {
        let field_str = |p: &str| rendered.pointer(p).and_then(Value::as_str);
        for (field, pointer, want) in [
            ("apiVersion", "/apiVersion", &self.api_version),
            ("kind", "/kind", &self.kind),
            ("metadata.name", "/metadata/name", &self.name),
        ] {
            let got = field_str(pointer);
            if got != Some(want.as_str()) {
                return Err(RenderError::Identity {
                    field,
                    admitted: want.clone(),
                    rendered: got.map_or_else(
                        || {
                            rendered
                                .pointer(pointer)
                                .map_or("nothing".to_string(), Value::to_string)
                        },
                        str::to_string,
                    ),
                });
            }
        }
        match rendered.pointer("/metadata/namespace") {
            None | Some(Value::Null) => Ok(()),
            Some(Value::String(ns)) if *ns == self.namespace => Ok(()),
            Some(other) => Err(RenderError::Identity {
                field: "metadata.namespace",
                admitted: self.namespace.clone(),
                rendered: other.to_string(),
            }),
        }
    }
}

/// The manifest of `obj` for `cluster`, checked against the identity admitted from its
/// template: what executors write. An identity the overrides changed is an error (the cluster's
/// status says why), whatever admission said when the object was put (cluster labels change).
pub fn render_admitted(
    obj: &crate::model::FederatedObject,
    cluster: &str,
    cluster_labels: &std::collections::BTreeMap<String, String>,
    replicas: Option<u32>,
) -> (Result<Value, RenderError>, Option<Admitted>) {
    render_admitted_template(obj, &obj.spec.template, cluster, cluster_labels, replicas)
}

/// [`render_admitted`] of another template of the object (a rollout's revision): the same
/// overrides and checks, the identity read from that template.
pub fn render_admitted_template(
    obj: &crate::model::FederatedObject,
    template: &str,
    cluster: &str,
    cluster_labels: &std::collections::BTreeMap<String, String>,
    replicas: Option<u32>,
) -> (Result<Value, RenderError>, Option<Admitted>) {
    let admitted = Admitted::from_template_text(template, &obj.namespace);
    let manifest = crate::render::render(
        template,
        &obj.namespace,
        &obj.name,
        cluster,
        cluster_labels,
        &obj.spec.overrides,
        replicas,
    );
    match admitted {
        Ok(a) => {
            let manifest = manifest.and_then(|m| a.check(&m).map(|()| m));
            (manifest, Some(a))
        }
        Err(e) => (
            manifest.and(Err(RenderError::Template(format!(
                "{}: {}",
                e.field, e.message
            )))),
            None,
        ),
    }
}

/// A refusal by one of the rules above: which rule, which field, why, and whether it is about
/// rights (403) or shape (422).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub rule: &'static str,
    pub field: String,
    pub message: String,
    pub forbidden: bool,
}

impl Refusal {
    pub fn forbidden(rule: &'static str, field: impl Into<String>, message: String) -> Self {
        Refusal {
            rule,
            field: field.into(),
            message,
            forbidden: true,
        }
    }

    pub fn invalid(rule: &'static str, field: impl Into<String>, message: String) -> Self {
        Refusal {
            rule,
            field: field.into(),
            message,
            forbidden: false,
        }
    }
}

/// Rule 2: whether `actor` may place an object of this identity's scope.
pub fn check_scope(
    policy: &AdmissionPolicy,
    actor: &Actor,
    admitted: &Admitted,
) -> Result<(), Refusal> {
    if admitted.scope == Scope::Namespaced {
        return Ok(());
    }
    let key = kinds::kind_key(admitted.group(), &admitted.kind);
    match actor {
        Actor::Tenant { .. } => Err(Refusal::forbidden(
            "cluster-scoped-kind",
            "spec.template.kind",
            format!(
                "{key} is (or may be) cluster-scoped; tenants may place only namespaced kinds \
                 (a custom resource counts as namespaced when its template carries the object's \
                 namespace in metadata.namespace)"
            ),
        )),
        Actor::Admin if policy.allows_cluster_kind(admitted.group(), &admitted.kind) => Ok(()),
        Actor::Legacy => Ok(()),
        Actor::Admin => Err(Refusal::invalid(
            "cluster-scoped-kind",
            "spec.template.kind",
            format!(
                "{key} is (or may be) cluster-scoped and the admission policy's \
                 clusterScopedKinds does not list it"
            ),
        )),
    }
}

/// Rule 3: a tenant's RoleBinding (`doc`, the template or a rendered variant) may not escalate.
pub fn check_tenant_rbac(
    policy: &AdmissionPolicy,
    admitted: &Admitted,
    doc: &Value,
    field_prefix: &str,
) -> Result<(), Refusal> {
    if admitted.group() != "rbac.authorization.k8s.io" || admitted.kind != "RoleBinding" {
        return Ok(());
    }
    let refuse = |field: &str, message: String| {
        Err(Refusal::forbidden(
            "tenant-rbac",
            format!("{field_prefix}.{field}"),
            message,
        ))
    };
    let role_kind = doc.pointer("/roleRef/kind").and_then(Value::as_str);
    let role_name = doc.pointer("/roleRef/name").and_then(Value::as_str);
    match (role_kind, role_name) {
        (Some("Role"), Some(_)) => {}
        (Some("ClusterRole"), Some(name))
            if policy.bindable_cluster_roles.iter().any(|r| r == name) => {}
        (Some("ClusterRole"), Some(name)) => {
            return refuse(
                "roleRef.name",
                format!(
                    "ClusterRole {name:?} is not one tenants may bind (allowed: {})",
                    policy.bindable_cluster_roles.join(", ")
                ),
            )
        }
        _ => {
            return refuse(
                "roleRef",
                "must reference a Role or an allowed ClusterRole by kind and name".to_string(),
            )
        }
    }
    let subjects = match doc.get("subjects") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(s)) => s,
        Some(_) => return refuse("subjects", "must be a list".to_string()),
    };
    for (i, s) in subjects.iter().enumerate() {
        let kind = s.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = s.get("name").and_then(Value::as_str).unwrap_or("");
        let ns = s.get("namespace").and_then(Value::as_str);
        match kind {
            "ServiceAccount" if ns.is_none_or(|n| n == admitted.namespace) => {}
            "ServiceAccount" => {
                return refuse(
                    &format!("subjects[{i}].namespace"),
                    format!(
                        "a tenant may bind only service accounts of namespace {:?}",
                        admitted.namespace
                    ),
                )
            }
            "User" | "Group" if !name.starts_with("system:") && !name.is_empty() => {}
            _ => {
                return refuse(
                    &format!("subjects[{i}]"),
                    format!(
                        "subject {kind} {name:?} may not be bound by a tenant (system: users and \
                         groups, and unknown subject kinds, are refused)"
                    ),
                )
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
