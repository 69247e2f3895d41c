//! RFC 6902 JSON Patch (the six operations) over RFC 6901 JSON Pointers.
//!
//! Owns: applying one operation to a `serde_json::Value`. Errors are plain strings; the caller
//! wraps them with the override and patch index. Must not: know about overrides or clusters.

use serde_json::Value;

/// Splits a pointer into unescaped reference tokens ("" is the whole document).
fn tokens(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("pointer {pointer:?} must start with '/'"));
    };
    rest.split('/')
        .map(|t| {
            let b = t.as_bytes();
            let bad = b
                .iter()
                .enumerate()
                .any(|(i, &c)| c == b'~' && !matches!(b.get(i + 1), Some(b'0' | b'1')));
            if bad {
                return Err(format!("bad escape in pointer token {t:?}"));
            }
            Ok(t.replace("~1", "/").replace("~0", "~"))
        })
        .collect()
}

fn array_index(token: &str, len: usize, allow_end: bool) -> Result<usize, String> {
    if allow_end && token == "-" {
        return Ok(len);
    }
    let valid = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    let idx: usize = if valid {
        token.parse().map_err(|_| format!("bad index {token:?}"))?
    } else {
        return Err(format!("bad array index {token:?}"));
    };
    let limit = if allow_end {
        len
    } else {
        len.saturating_sub(1)
    };
    if idx > limit || (!allow_end && len == 0) {
        return Err(format!("index {idx} out of bounds (length {len})"));
    }
    Ok(idx)
}

fn get_mut<'v>(doc: &'v mut Value, toks: &[String]) -> Result<&'v mut Value, String> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(map) => map.get_mut(t).ok_or_else(|| format!("no member {t:?}"))?,
            Value::Array(arr) => {
                let i = array_index(t, arr.len(), false)?;
                &mut arr[i]
            }
            _ => return Err(format!("cannot descend into a scalar at {t:?}")),
        };
    }
    Ok(cur)
}

fn get<'v>(doc: &'v Value, toks: &[String]) -> Result<&'v Value, String> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(map) => map.get(t).ok_or_else(|| format!("no member {t:?}"))?,
            Value::Array(arr) => &arr[array_index(t, arr.len(), false)?],
            _ => return Err(format!("cannot descend into a scalar at {t:?}")),
        };
    }
    Ok(cur)
}

fn add(doc: &mut Value, toks: &[String], value: Value) -> Result<(), String> {
    let Some((last, parent)) = toks.split_last() else {
        *doc = value;
        return Ok(());
    };
    match get_mut(doc, parent)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(arr) => {
            let i = array_index(last, arr.len(), true)?;
            arr.insert(i, value);
            Ok(())
        }
        _ => Err("parent is not an object or array".to_string()),
    }
}

fn remove(doc: &mut Value, toks: &[String]) -> Result<Value, String> {
    let Some((last, parent)) = toks.split_last() else {
        return Err("cannot remove the whole document".to_string());
    };
    match get_mut(doc, parent)? {
        Value::Object(map) => map
            .remove(last)
            .ok_or_else(|| format!("no member {last:?}")),
        Value::Array(arr) => {
            let i = array_index(last, arr.len(), false)?;
            Ok(arr.remove(i))
        }
        _ => Err("parent is not an object or array".to_string()),
    }
}

/// The operation to apply, with its arguments already parsed.
pub(crate) enum Op<'a> {
    Add { path: &'a str, value: Value },
    Remove { path: &'a str },
    Replace { path: &'a str, value: Value },
    Move { from: &'a str, path: &'a str },
    Copy { from: &'a str, path: &'a str },
    Test { path: &'a str, value: Value },
}

/// Applies one operation. On error the document may be unchanged or partly changed only for
/// `move` (never in practice: the source is checked before removal); callers work on a copy.
pub(crate) fn apply(doc: &mut Value, op: Op<'_>) -> Result<(), String> {
    match op {
        Op::Add { path, value } => add(doc, &tokens(path)?, value),
        Op::Remove { path } => remove(doc, &tokens(path)?).map(drop),
        Op::Replace { path, value } => {
            let toks = tokens(path)?;
            let slot = get_mut(doc, &toks)?;
            *slot = value;
            Ok(())
        }
        Op::Move { from, path } => {
            let (ft, pt) = (tokens(from)?, tokens(path)?);
            if from == path {
                return get(doc, &ft).map(drop);
            }
            if pt.len() > ft.len() && pt[..ft.len()] == ft[..] {
                return Err(format!("cannot move {from:?} into its own child {path:?}"));
            }
            let value = remove(doc, &ft)?;
            add(doc, &pt, value)
        }
        Op::Copy { from, path } => {
            let value = get(doc, &tokens(from)?)?.clone();
            add(doc, &tokens(path)?, value)
        }
        Op::Test { path, value } => {
            let found = get(doc, &tokens(path)?)?;
            if *found == value {
                Ok(())
            } else {
                Err(format!("value at {path:?} is {found}, expected {value}"))
            }
        }
    }
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
