//! Karmada's overriders whose JSON patch depends on the object they override: `commandOverrider`
//! and `argsOverrider` (append to or remove from one container's list), the `remove` operator
//! of `labelsOverrider` and `annotationsOverrider`, and (since `OVERRIDERS_WIDENED_SINCE`)
//! `imageOverrider` items with `add`, `remove` or a `predicate` (`image_overrider`) and
//! `fieldOverrider` (`field_overrider`). Karmada builds their patches from the object at the
//! moment it overrides it; fedraft keeps such a rule as a list of [`Edit`]s and resolves it
//! against each template it applies to ([`resolve`]), into plain [`Override`]s: the JSON
//! patches, image rewrite and labels that the replicated object spec can carry and render applies.
//!
//! A rule that uses one of them follows Karmada's order of overriders exactly: image, command,
//! args, labels, annotations, field, plaintext, each list in the order written.
//!
//! What a resolution reads is the template as written plus what earlier edits of the same rule
//! did to it; it cannot see another rule's or policy's override, since each may target other
//! clusters. The patches are chosen to survive the usual stacking anyway: values are appended
//! with `add …/-`, a label or annotation is removed with an `add` then a `remove` of the key
//! (whoever added it), a list element is removed by index behind a `test` of its value, and a
//! rewritten string (an image, a field's document) is replaced behind a `test` of the value it
//! was computed from, so a value another override already changed fails loudly instead of
//! losing that change.
//!
//! Must not: read anything but the template it is handed, or panic. An edit that finds nothing
//! to change (no such container, no such key) produces no patch, as in Karmada; an image or
//! field edit whose path does not fit the template (no value, not a string, not an image, not
//! the document format, a sub-operation that does not apply) produces a `test` that always
//! fails with the reason as its expected value, so that each targeted cluster's render fails
//! saying why, as Karmada fails the override.

use std::collections::BTreeMap;

use serde_json::Value;

use super::field_overrider::FieldEdit;
use super::image_overrider::ImageEdit;
use crate::policy::{ImageOverride, JsonPatchOp, Override, PatchOpKind};

/// A container's list a command or args overrider edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum ListField {
    Command,
    Args,
}

impl ListField {
    fn key(self) -> &'static str {
        match self {
            ListField::Command => "command",
            ListField::Args => "args",
        }
    }
}

/// The metadata map a labels or annotations overrider edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MetaField {
    Labels,
    Annotations,
}

impl MetaField {
    fn key(self) -> &'static str {
        match self {
            MetaField::Labels => "labels",
            MetaField::Annotations => "annotations",
        }
    }
}

/// One overrider of a rule, in the rule's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Edit {
    Image(ImageOverride),
    /// One `imageOverrider` item that fedraft's image override cannot express.
    KarmadaImage(ImageEdit),
    /// Appends `values` to, or removes every element equal to one of them from, the list of
    /// each container named `container`.
    List {
        field: ListField,
        container: String,
        add: bool,
        values: Vec<String>,
    },
    /// `add` and `replace`: set, as fedraft always has for these overriders.
    SetMeta(MetaField, BTreeMap<String, String>),
    RemoveMeta(MetaField, Vec<String>),
    Field(FieldEdit),
    Patches(Vec<JsonPatchOp>),
}

/// What a JSON patch may touch, for deciding whether it can share an [`Override`] with what
/// came before it (render applies an override's patches before its image and metadata maps).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Touches {
    /// A container's command or args: never the image or metadata.
    Lists,
    Meta(MetaField),
    Anything,
}

/// The rule's edits as overrides for `template` (without a cluster target), in order. A
/// template that is not a JSON object gets only the edits that need no template.
pub(super) fn resolve(edits: &[Edit], template: &Value) -> Vec<Override> {
    let mut r = Resolver {
        template,
        lists: BTreeMap::new(),
        meta_exists: [
            meta_map(template, MetaField::Labels).is_some(),
            meta_map(template, MetaField::Annotations).is_some(),
        ],
        written: BTreeMap::new(),
        out: vec![Override::default()],
    };
    for edit in edits {
        match edit {
            Edit::Image(image) => r.image(image),
            Edit::List {
                field,
                container,
                add,
                values,
            } => r.list(*field, container, *add, values),
            Edit::SetMeta(field, map) => r.set_meta(*field, map),
            Edit::RemoveMeta(field, keys) => r.remove_meta(*field, keys),
            Edit::KarmadaImage(e) => {
                for path in e.targets(template) {
                    r.rewrite(&path, |image| e.rewrite(image));
                }
            }
            Edit::Field(e) => r.rewrite(&e.path, |text| e.apply(text)),
            Edit::Patches(patches) => {
                for p in patches {
                    r.patch(p.clone(), Touches::Anything);
                }
            }
        }
    }
    r.out.retain(|o| *o != Override::default());
    r.out
}

struct Resolver<'t> {
    template: &'t Value,
    /// Each edited list as earlier edits left it, by (field, container pointer); None when the
    /// container has no such list.
    lists: BTreeMap<(ListField, String), Option<Vec<Value>>>,
    /// Whether `metadata.labels` / `metadata.annotations` exist at this point.
    meta_exists: [bool; 2],
    /// String fields earlier edits set (Some) or removed (None), by pointer.
    written: BTreeMap<String, Option<String>>,
    out: Vec<Override>,
}

impl Resolver<'_> {
    fn last(&mut self) -> &mut Override {
        if self.out.is_empty() {
            self.out.push(Override::default());
        }
        let n = self.out.len() - 1;
        &mut self.out[n]
    }

    fn fresh(&mut self) -> &mut Override {
        self.out.push(Override::default());
        self.last()
    }

    fn patch(&mut self, p: JsonPatchOp, touches: Touches) {
        let cur = self.last();
        let blocked = match touches {
            Touches::Lists => false,
            Touches::Meta(MetaField::Labels) => !cur.labels.is_empty(),
            Touches::Meta(MetaField::Annotations) => !cur.annotations.is_empty(),
            Touches::Anything => {
                cur.image.is_some() || !cur.labels.is_empty() || !cur.annotations.is_empty()
            }
        };
        let cur = if blocked { self.fresh() } else { cur };
        cur.patches.push(p);
    }

    fn image(&mut self, image: &ImageOverride) {
        let cur = if self.last().image.is_some() {
            self.fresh()
        } else {
            self.last()
        };
        cur.image = Some(image.clone());
    }

    fn set_meta(&mut self, field: MetaField, map: &BTreeMap<String, String>) {
        let cur = self.last();
        let target = match field {
            MetaField::Labels => &mut cur.labels,
            MetaField::Annotations => &mut cur.annotations,
        };
        target.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.meta_exists[field as usize] = true;
        for (k, v) in map {
            let path = format!("/metadata/{}/{}", field.key(), escape(k));
            self.written.insert(path, Some(v.clone()));
        }
    }

    fn remove_meta(&mut self, field: MetaField, keys: &[String]) {
        // Without the map nothing can carry the key (render creates it only for what it adds).
        if !self.meta_exists[field as usize] {
            return;
        }
        for key in keys {
            let path = format!("/metadata/{}/{}", field.key(), escape(key));
            // `add` first makes the `remove` apply whether or not an earlier override set it.
            self.patch(
                op(PatchOpKind::Add, &path, Some(&Value::from(""))),
                Touches::Meta(field),
            );
            self.patch(op(PatchOpKind::Remove, &path, None), Touches::Meta(field));
            self.written.insert(path, None);
        }
    }

    /// The string at `path` as earlier edits left it.
    fn string_at(&self, path: &str) -> Result<String, String> {
        let current = match self.written.get(path) {
            Some(v) => v.clone().map(Value::String),
            None => self.template.pointer(path).cloned(),
        };
        match current {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(format!("{path} is not a string")),
            None => Err(format!("{path} names no value")),
        }
    }

    /// Replaces the string at `path` by what `change` makes of it, behind a `test` of its
    /// value. When `change` cannot, the patch is a `test` that always fails, naming the reason:
    /// the clusters the rule targets get that render error, as Karmada fails the override.
    fn rewrite(&mut self, path: &str, change: impl FnOnce(&str) -> Result<String, String>) {
        let changed = self
            .string_at(path)
            .and_then(|old| change(&old).map(|new| (old, new)));
        match changed {
            Ok((old, new)) => {
                self.patch(
                    op(PatchOpKind::Test, path, Some(&Value::from(old))),
                    Touches::Anything,
                );
                let new_value = Value::from(new.as_str());
                self.patch(
                    op(PatchOpKind::Replace, path, Some(&new_value)),
                    Touches::Anything,
                );
                self.written.insert(path.to_string(), Some(new));
            }
            Err(reason) => {
                let cannot = serde_json::json!({ "cannotOverride": reason });
                self.patch(
                    op(PatchOpKind::Test, path, Some(&cannot)),
                    Touches::Anything,
                );
            }
        }
    }

    fn list(&mut self, field: ListField, container: &str, add: bool, values: &[String]) {
        for base in containers_named(self.template, container) {
            let path = format!("{base}/{}", field.key());
            let template = self.template;
            let current = self
                .lists
                .entry((field, base.clone()))
                .or_insert_with(|| template.pointer(&path).and_then(Value::as_array).cloned())
                .clone();
            let (patches, after) = list_patches(&path, current, add, values);
            self.lists.insert((field, base), after);
            for p in patches {
                self.patch(p, Touches::Lists);
            }
        }
    }
}

/// The patches of one command/args edit of the list at `path` as it stands (`current`), and the
/// list after them.
fn list_patches(
    path: &str,
    current: Option<Vec<Value>>,
    add: bool,
    values: &[String],
) -> (Vec<JsonPatchOp>, Option<Vec<Value>>) {
    let mut patches = Vec::new();
    match (add, current) {
        (true, None) => {
            let list: Vec<Value> = values.iter().map(|v| Value::from(v.as_str())).collect();
            patches.push(op(PatchOpKind::Add, path, Some(&Value::from(list.clone()))));
            (patches, Some(list))
        }
        (true, Some(mut list)) => {
            for v in values {
                let v = Value::from(v.as_str());
                patches.push(op(PatchOpKind::Add, &format!("{path}/-"), Some(&v)));
                list.push(v);
            }
            (patches, Some(list))
        }
        (false, None) => (patches, None),
        (false, Some(mut list)) => {
            for i in (0..list.len()).rev() {
                let gone = list[i]
                    .as_str()
                    .is_some_and(|s| values.iter().any(|v| v == s));
                if gone {
                    let at = format!("{path}/{i}");
                    patches.push(op(PatchOpKind::Test, &at, Some(&list[i])));
                    patches.push(op(PatchOpKind::Remove, &at, None));
                    list.remove(i);
                }
            }
            (patches, Some(list))
        }
    }
}

/// The pointers of the containers named `name` in the template's pod spec (found as render's
/// image override finds it).
fn containers_named(template: &Value, name: &str) -> Vec<String> {
    let Some(pod) = crate::render::pod_spec_pointer(template) else {
        return Vec::new();
    };
    let Some(list) = template
        .pointer(&format!("{pod}/containers"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .enumerate()
        .filter(|(_, c)| c.get("name").and_then(Value::as_str) == Some(name))
        .map(|(i, _)| format!("{pod}/containers/{i}"))
        .collect()
}

fn meta_map(template: &Value, field: MetaField) -> Option<&serde_json::Map<String, Value>> {
    template.get("metadata")?.get(field.key())?.as_object()
}

/// A map key as one JSON pointer token (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn op(op: PatchOpKind, path: &str, value: Option<&Value>) -> JsonPatchOp {
    JsonPatchOp {
        op,
        path: path.to_string(),
        from: None,
        value: value.map(Value::to_string),
    }
}
