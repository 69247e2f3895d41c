//! Karmada's `imageOverrider` as Karmada applies it, for the rules fedraft's own image override
//! cannot express (since `OVERRIDERS_WIDENED_SINCE`): the `add` and `remove` operators, and a
//! `predicate` naming the one image field to rewrite.
//!
//! Karmada reads an image as `[registry/]repository[:tag|@digest]` (a tag wins over a digest,
//! which it then drops) and edits one component: `add` appends the value to the component as it
//! is, `replace` sets it, `remove` empties it. A tag or digest is set only when the result reads
//! as one (a tag: a word character then at most 127 of word characters, `.` and `-`; a digest:
//! `algorithm:hex` with at least 32 hex digits); anything else leaves the image as it was.
//! Without a predicate the images rewritten are those of `containers` (not init containers) of a
//! Pod, ReplicaSet, Deployment, DaemonSet, StatefulSet or Job; any other kind is left alone.
//!
//! Must not: read anything but the image string it is handed; resolving against a template is
//! `edits`' job.

use serde::Deserialize;
use serde_json::Value;

use super::typed;
use crate::error::FieldError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Component {
    Registry,
    Repository,
    Tag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ImageOp {
    Add,
    Remove,
    Replace,
}

/// One `imageOverrider` item, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ImageEdit {
    pub component: Component,
    pub op: ImageOp,
    /// Empty for `remove`.
    pub value: String,
    /// The pointer of the one image field to rewrite; None: every container's image.
    pub predicate: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPredicate {
    path: String,
}

impl ImageEdit {
    /// Checks one item (`field` names it) from its parts as read.
    pub(super) fn check(
        component: Component,
        op: ImageOp,
        value: Option<String>,
        predicate: Option<&Value>,
        field: &str,
    ) -> Result<ImageEdit, FieldError> {
        let value = value.unwrap_or_default();
        if op != ImageOp::Remove && value.is_empty() {
            return Err(FieldError::new(
                format!("{field}.value"),
                "required for add and replace",
            ));
        }
        let predicate = match predicate {
            None => None,
            Some(raw) => {
                let p: RawPredicate = typed(raw, &format!("{field}.predicate"))?;
                check_pointer(&p.path, &format!("{field}.predicate.path"))?;
                Some(p.path)
            }
        };
        Ok(ImageEdit {
            component,
            op,
            value,
            predicate,
        })
    }

    /// The pointers of the image fields this edit rewrites in `template`.
    pub(super) fn targets(&self, template: &Value) -> Vec<String> {
        if let Some(p) = &self.predicate {
            return vec![p.clone()];
        }
        let base = match template.get("kind").and_then(Value::as_str) {
            Some("Pod") => "/spec",
            Some("ReplicaSet" | "Deployment" | "DaemonSet" | "StatefulSet" | "Job") => {
                "/spec/template/spec"
            }
            _ => return Vec::new(),
        };
        let count = template
            .pointer(&format!("{base}/containers"))
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        (0..count)
            .map(|i| format!("{base}/containers/{i}/image"))
            .collect()
    }

    /// `image` with this edit applied.
    pub(super) fn rewrite(&self, image: &str) -> Result<String, String> {
        let mut r = Parts::parse(image)?;
        match self.component {
            Component::Registry => {
                r.registry = match self.op {
                    ImageOp::Add => format!("{}{}", r.registry, self.value),
                    ImageOp::Replace => self.value.clone(),
                    ImageOp::Remove => String::new(),
                }
            }
            Component::Repository => {
                r.repository = match self.op {
                    ImageOp::Add => format!("{}{}", r.repository, self.value),
                    ImageOp::Replace => self.value.clone(),
                    ImageOp::Remove => String::new(),
                }
            }
            Component::Tag => match self.op {
                ImageOp::Add => {
                    let current = if r.tag.is_empty() { &r.digest } else { &r.tag };
                    r.set_tag_or_digest(&format!("{current}{}", self.value));
                }
                ImageOp::Replace => r.set_tag_or_digest(&self.value),
                ImageOp::Remove if !r.tag.is_empty() => r.tag.clear(),
                ImageOp::Remove => r.digest.clear(),
            },
        }
        Ok(r.to_string())
    }
}

/// A JSON pointer to a field: `/` then tokens (RFC 6901), never the whole document.
pub(super) fn check_pointer(path: &str, field: &str) -> Result<(), FieldError> {
    if !path.starts_with('/') {
        return Err(FieldError::new(
            field,
            "must be a JSON pointer starting with /",
        ));
    }
    json_patch::jsonptr::PointerBuf::parse(path)
        .map(|_| ())
        .map_err(|e| FieldError::new(field, format!("not a JSON pointer: {e}")))
}

/// An image as Karmada splits it; an empty part is absent.
#[derive(Debug, PartialEq, Eq)]
struct Parts {
    registry: String,
    repository: String,
    tag: String,
    digest: String,
}

impl Parts {
    fn parse(image: &str) -> Result<Parts, String> {
        if image.is_empty() {
            return Err("the image is empty".to_string());
        }
        let (name, digest) = image.split_once('@').unwrap_or((image, ""));
        let (registry, path) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first, rest)
            }
            _ => ("", name),
        };
        let last = path.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match path[last..].rfind(':') {
            Some(i) => (&path[..last + i], &path[last + i + 1..]),
            None => (path, ""),
        };
        if repository.is_empty() {
            return Err(format!("{image:?} has no repository"));
        }
        Ok(Parts {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.to_string(),
            // Karmada keeps one of the two, the tag first.
            digest: if tag.is_empty() {
                digest.to_string()
            } else {
                String::new()
            },
        })
    }

    fn set_tag_or_digest(&mut self, value: &str) {
        if is_tag(value) {
            self.tag = value.to_string();
            self.digest.clear();
        } else if is_digest(value) {
            self.digest = value.to_string();
            self.tag.clear();
        }
    }
}

impl std::fmt::Display for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.registry.is_empty() {
            write!(f, "{}/", self.registry)?;
        }
        f.write_str(&self.repository)?;
        if !self.tag.is_empty() {
            write!(f, ":{}", self.tag)
        } else if !self.digest.is_empty() {
            write!(f, "@{}", self.digest)
        } else {
            Ok(())
        }
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_tag(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(is_word)
        && s.len() <= 128
        && chars.all(|c| is_word(c) || c == '.' || c == '-')
}

/// `algorithm:hex`: the algorithm is letter-led alphanumeric parts joined by one of `-_+.`.
fn is_digest(s: &str) -> bool {
    let Some((algorithm, hex)) = s.split_once(':') else {
        return false;
    };
    let parts_ok = algorithm.split(['-', '_', '+', '.']).all(|p| {
        p.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && p.chars().all(|c| c.is_ascii_alphanumeric())
    });
    parts_ok && hex.len() >= 32 && hex.chars().all(|c| c.is_ascii_hexdigit())
}
