//! RFC 6902 JSON Patch for overrides: a thin wrapper over the `json-patch` crate.
//!
//! Owns: turning one of fedraft's parsed operations into the crate's, applying it alone, and
//! wording a failure the way fedraft's render errors always read (which value a failed `test`
//! found, which pointer named nothing). Errors are plain strings; the caller wraps them with the
//! override and patch index. Must not: know about overrides or clusters.
//!
//! The crate follows RFC 6902/6901 as fedraft did by hand before: array indices without leading
//! zeros, `-` only where an element is added, no `move` into the moved value's own child, no
//! removal of the whole document. One operation is applied per call so a failure names its own
//! patch; the crate undoes a failed operation, and callers work on a copy of the template anyway.

use json_patch::jsonptr::PointerBuf;
use json_patch::{
    AddOperation, CopyOperation, MoveOperation, PatchErrorKind, PatchOperation, RemoveOperation,
    ReplaceOperation, TestOperation,
};
use serde_json::Value;

/// The operation to apply, with its arguments already parsed.
pub(crate) enum Op<'a> {
    Add { path: &'a str, value: Value },
    Remove { path: &'a str },
    Replace { path: &'a str, value: Value },
    Move { from: &'a str, path: &'a str },
    Copy { from: &'a str, path: &'a str },
    Test { path: &'a str, value: Value },
}

fn pointer(text: &str) -> Result<PointerBuf, String> {
    PointerBuf::parse(text).map_err(|e| format!("pointer {text:?} is malformed: {}", e.original()))
}

/// Applies one operation; on error the document is as it was.
pub(crate) fn apply(doc: &mut Value, op: Op<'_>) -> Result<(), String> {
    let (path, from) = match &op {
        Op::Add { path, .. }
        | Op::Remove { path }
        | Op::Replace { path, .. }
        | Op::Test { path, .. } => (*path, None),
        Op::Move { from, path } | Op::Copy { from, path } => (*path, Some(*from)),
    };
    if let Op::Move { from, path } = &op {
        if from == path {
            pointer(from)?;
            // RFC 6902 makes this a no-op once `from` exists. The crate removes and re-adds
            // the member, which moves it to the end of its object when serde_json keeps
            // insertion order (a feature any crate in the build may turn on); fedraft
            // leaves the document exactly as it was.
            return match doc.pointer(from) {
                Some(_) => Ok(()),
                None => Err(format!("from {from:?} names no value")),
            };
        }
    }
    let operation = match op {
        Op::Add { path, value } => PatchOperation::Add(AddOperation {
            path: pointer(path)?,
            value,
        }),
        Op::Remove { path } => PatchOperation::Remove(RemoveOperation {
            path: pointer(path)?,
        }),
        Op::Replace { path, value } => PatchOperation::Replace(ReplaceOperation {
            path: pointer(path)?,
            value,
        }),
        Op::Move { from, path } => PatchOperation::Move(MoveOperation {
            from: pointer(from)?,
            path: pointer(path)?,
        }),
        Op::Copy { from, path } => PatchOperation::Copy(CopyOperation {
            from: pointer(from)?,
            path: pointer(path)?,
        }),
        Op::Test { path, value } => PatchOperation::Test(TestOperation {
            path: pointer(path)?,
            value,
        }),
    };
    let Err(e) = json_patch::patch(doc, std::slice::from_ref(&operation)) else {
        return Ok(());
    };
    Err(match (e.kind, &operation) {
        (PatchErrorKind::TestFailed, PatchOperation::Test(t)) => {
            let found = doc.pointer(path).map_or_else(String::new, Value::to_string);
            format!("value at {path:?} is {found}, expected {}", t.value)
        }
        (PatchErrorKind::InvalidFromPointer, _) => {
            format!("from {:?} names no value", from.unwrap_or_default())
        }
        (PatchErrorKind::CannotMoveInsideItself, _) => format!(
            "cannot move {:?} into its own child {path:?}",
            from.unwrap_or_default()
        ),
        (
            PatchErrorKind::InvalidPointer,
            PatchOperation::Add(_) | PatchOperation::Move(_) | PatchOperation::Copy(_),
        ) => {
            format!("{path:?} names no place to add at (no parent, or an index out of bounds)")
        }
        (PatchErrorKind::InvalidPointer, PatchOperation::Remove(_)) if path.is_empty() => {
            "cannot remove the whole document".to_string()
        }
        (PatchErrorKind::InvalidPointer, _) => format!("{path:?} names no value"),
        (kind, _) => kind.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: Value, op: Op<'_>) -> Result<Value, String> {
        let mut d = doc;
        apply(&mut d, op).map(|()| d)
    }

    #[test]
    fn rfc6902_appendix_examples() {
        // A.1 add an object member
        assert_eq!(
            run(
                json!({"foo": "bar"}),
                Op::Add {
                    path: "/baz",
                    value: json!("qux")
                }
            )
            .unwrap(),
            json!({"baz": "qux", "foo": "bar"})
        );
        // A.2 add an array element
        assert_eq!(
            run(
                json!({"foo": ["bar", "baz"]}),
                Op::Add {
                    path: "/foo/1",
                    value: json!("qux")
                }
            )
            .unwrap(),
            json!({"foo": ["bar", "qux", "baz"]})
        );
        // A.3 remove an object member
        assert_eq!(
            run(
                json!({"baz": "qux", "foo": "bar"}),
                Op::Remove { path: "/baz" }
            )
            .unwrap(),
            json!({"foo": "bar"})
        );
        // A.4 remove an array element
        assert_eq!(
            run(
                json!({"foo": ["bar", "qux", "baz"]}),
                Op::Remove { path: "/foo/1" }
            )
            .unwrap(),
            json!({"foo": ["bar", "baz"]})
        );
        // A.5 replace a value
        assert_eq!(
            run(
                json!({"baz": "qux", "foo": "bar"}),
                Op::Replace {
                    path: "/baz",
                    value: json!("boo")
                }
            )
            .unwrap(),
            json!({"baz": "boo", "foo": "bar"})
        );
        // A.6 move a value
        assert_eq!(
            run(
                json!({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}),
                Op::Move {
                    from: "/foo/waldo",
                    path: "/qux/thud"
                }
            )
            .unwrap(),
            json!({"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}})
        );
        // A.7 move an array element
        assert_eq!(
            run(
                json!({"foo": ["all", "grass", "cows", "eat"]}),
                Op::Move {
                    from: "/foo/1",
                    path: "/foo/3"
                }
            )
            .unwrap(),
            json!({"foo": ["all", "cows", "eat", "grass"]})
        );
        // A.8 test success, A.9 test error
        assert!(run(
            json!({"baz": "qux", "foo": ["a", 2, "c"]}),
            Op::Test {
                path: "/foo/1",
                value: json!(2)
            }
        )
        .is_ok());
        assert!(run(
            json!({"baz": "qux"}),
            Op::Test {
                path: "/baz",
                value: json!("bar")
            }
        )
        .is_err());
        // A.10 add a nested member object
        assert_eq!(
            run(
                json!({"foo": "bar"}),
                Op::Add {
                    path: "/child",
                    value: json!({"grandchild": {}})
                }
            )
            .unwrap(),
            json!({"foo": "bar", "child": {"grandchild": {}}})
        );
        // A.12 add to a nonexistent target
        assert!(run(
            json!({"foo": "bar"}),
            Op::Add {
                path: "/baz/bat",
                value: json!("qux")
            }
        )
        .is_err());
        // A.14 ~ escape ordering
        assert!(run(
            json!({"/": 9, "~1": 10}),
            Op::Test {
                path: "/~01",
                value: json!(10)
            }
        )
        .is_ok());
        // A.16 add an array value with "-"
        assert_eq!(
            run(
                json!({"foo": ["bar"]}),
                Op::Add {
                    path: "/foo/-",
                    value: json!(["abc", "def"])
                }
            )
            .unwrap(),
            json!({"foo": ["bar", ["abc", "def"]]})
        );
        // copy
        assert_eq!(
            run(
                json!({"a": {"b": 1}}),
                Op::Copy {
                    from: "/a",
                    path: "/c"
                }
            )
            .unwrap(),
            json!({"a": {"b": 1}, "c": {"b": 1}})
        );
    }

    #[test]
    fn move_onto_itself_changes_nothing() {
        let doc = json!({"b": 1, "a": {"c": [1, 2]}, "z": 0});
        assert_eq!(
            run(
                doc.clone(),
                Op::Move {
                    from: "/a",
                    path: "/a"
                }
            )
            .unwrap(),
            doc
        );
        assert!(run(
            doc,
            Op::Move {
                from: "/x",
                path: "/x"
            }
        )
        .is_err());
    }

    #[test]
    fn errors() {
        assert!(run(json!({"a": [1]}), Op::Remove { path: "/a/1" }).is_err());
        assert!(run(
            json!({"a": [1]}),
            Op::Replace {
                path: "/a/01",
                value: json!(0)
            }
        )
        .is_err());
        assert!(run(
            json!({"a": {"b": 1}}),
            Op::Move {
                from: "/a",
                path: "/a/b/c"
            }
        )
        .is_err());
        assert!(run(json!({"a": 1}), Op::Remove { path: "" }).is_err());
        assert!(run(
            json!({"a": 1}),
            Op::Replace {
                path: "/b",
                value: json!(0)
            }
        )
        .is_err());
    }
}
