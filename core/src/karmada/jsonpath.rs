//! The part of Kubernetes' JSONPath that `failover.*.statePreservation.rules[].jsonPath` may
//! use: one `{...}` expression naming one field by keys and indexes, relative to the object's
//! `status` (`{ .jobStatus.jobID }`, `{.a[0].b}`, `{.a['x.y']}`, an optional leading `$`,
//! negative indexes counting from the end). What the rule's value becomes is a label value, so
//! only a path that names one scalar makes sense: wildcards, recursive descent, filters, slices,
//! unions, `range` and literal text around the expression are refused at policy write, where
//! the message can name the field, rather than yielding nothing at failover time.
//!
//! Core parses the paths (policy validation, the canonical text reports are keyed by) and
//! executors evaluate them on the live object (`fedraft_executors::preserve`); both use this
//! one definition so they agree on what a path means.
//!
//! Must not: panic on any input (a path comes from a user, a status from a member), allocate
//! more than the input's size, or accept anything whose value could be more than one field.

use std::fmt;

use serde_json::Value;

/// Longest path text read; a longer one is refused (a label value is at most 63 bytes; no
/// status worth preserving needs a path this long).
pub const MAX_PATH_BYTES: usize = 512;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// A member of an object.
    Key(String),
    /// An element of an array; negative counts from the end (`-1` is the last).
    Index(i64),
}

/// A parsed path: the steps from the object's `status`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JsonPath {
    steps: Vec<Step>,
}

fn plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The canonical text (`{.a.b[0]['x.y']}`): what reports name a path by, so that two ways of
/// writing one path are one value.
impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for s in &self.steps {
            match s {
                Step::Key(k) if plain_key(k) => write!(f, ".{k}")?,
                Step::Key(k) => {
                    f.write_str("['")?;
                    for c in k.chars() {
                        if c == '\'' || c == '\\' {
                            f.write_str("\\")?;
                        }
                        write!(f, "{c}")?;
                    }
                    f.write_str("']")?;
                }
                Step::Index(i) => write!(f, "[{i}]")?,
            }
        }
        f.write_str("}")
    }
}

struct Cursor<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
}

impl Cursor<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().map(|(_, c)| *c)
    }

    fn next(&mut self) -> Option<char> {
        self.chars.next().map(|(_, c)| c)
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.next();
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.next();
            true
        } else {
            false
        }
    }
}

/// Why a construct is refused, in the words of the Kubernetes JSONPath documentation.
fn refused(c: char) -> String {
    let what = match c {
        '*' => "a wildcard",
        '?' => "a filter",
        ':' => "a slice",
        ',' => "a union",
        '@' => "the current object",
        _ => return format!("unexpected {c:?}"),
    };
    format!("{what} may match several fields; name one field, as in {{ .jobStatus.jobID }}")
}

impl JsonPath {
    /// Reads `text`, or says why not.
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        if text.len() > MAX_PATH_BYTES {
            return Err(format!("longer than {MAX_PATH_BYTES} bytes"));
        }
        let mut cur = Cursor {
            chars: text.char_indices().peekable(),
        };
        cur.skip_ws();
        if !cur.eat('{') {
            return Err("must be one {...} expression, as in { .jobStatus.jobID }".to_string());
        }
        cur.skip_ws();
        if cur.peek().is_some_and(char::is_alphabetic) {
            return Err("a field starts with a dot, as in { .jobStatus.jobID }; \
                        range and end blocks are not read"
                .to_string());
        }
        cur.eat('$');
        let mut steps = Vec::new();
        loop {
            match cur.peek() {
                Some('.') => {
                    cur.next();
                    let mut key = String::new();
                    while let Some(c) = cur.peek() {
                        if c.is_whitespace() || "{}[].'\"$\\()".contains(c) {
                            break;
                        }
                        if "*?:,@".contains(c) {
                            return Err(refused(c));
                        }
                        key.push(c);
                        cur.next();
                    }
                    if key.is_empty() {
                        return Err(match cur.peek() {
                            Some('.') => "recursive descent (..) may match several fields; \
                                          name one field"
                                .to_string(),
                            Some('}') if steps.is_empty() => {
                                "names no field; name one, as in { .jobStatus.jobID }".to_string()
                            }
                            Some(c) => format!("a field name is expected before {c:?}"),
                            None => "a field name is expected".to_string(),
                        });
                    }
                    steps.push(Step::Key(key));
                }
                Some('[') => {
                    cur.next();
                    cur.skip_ws();
                    let step = match cur.peek() {
                        Some(q @ ('\'' | '"')) => {
                            cur.next();
                            Step::Key(quoted(&mut cur, q)?)
                        }
                        Some(c) if c == '-' || c.is_ascii_digit() => Step::Index(index(&mut cur)?),
                        Some(c) => return Err(refused(c)),
                        None => return Err("unclosed [".to_string()),
                    };
                    cur.skip_ws();
                    match cur.next() {
                        Some(']') => {}
                        Some(c) => return Err(refused(c)),
                        None => return Err("unclosed [".to_string()),
                    }
                    steps.push(step);
                }
                _ => break,
            }
        }
        cur.skip_ws();
        match cur.next() {
            Some('}') => {}
            Some(c) if "*?:,@".contains(c) => return Err(refused(c)),
            Some(c) => return Err(format!("unexpected {c:?} in the expression")),
            None => return Err("unclosed {".to_string()),
        }
        cur.skip_ws();
        if cur.peek().is_some() {
            return Err("text after the expression; give one {...} expression only".to_string());
        }
        if steps.is_empty() {
            return Err("names no field; name one, as in { .jobStatus.jobID }".to_string());
        }
        Ok(JsonPath { steps })
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The value the path names in `status`, if there is one.
    pub fn find<'v>(&self, status: &'v Value) -> Option<&'v Value> {
        let mut at = status;
        for s in &self.steps {
            at = match (s, at) {
                (Step::Key(k), Value::Object(m)) => m.get(k)?,
                (Step::Index(i), Value::Array(a)) => {
                    let len = i64::try_from(a.len()).ok()?;
                    let i = if *i < 0 { len.checked_add(*i)? } else { *i };
                    a.get(usize::try_from(i).ok()?)?
                }
                _ => return None,
            };
        }
        Some(at)
    }

    /// The label value the path gives for `status`: a string as it is, a number or boolean as
    /// its JSON text; None when the path is absent, names null, an object or an array, or the
    /// text is not a valid label value (a member would refuse the label).
    pub fn label_value(&self, status: &Value) -> Option<String> {
        let text = match self.find(status)? {
            Value::String(s) => s.clone(),
            v @ (Value::Number(_) | Value::Bool(_)) => v.to_string(),
            Value::Null | Value::Object(_) | Value::Array(_) => return None,
        };
        crate::policy::validate_label_value(&text, "")
            .is_ok()
            .then_some(text)
    }
}

/// A quoted key after its opening quote `q`, with `\` escaping the next character.
fn quoted(cur: &mut Cursor<'_>, q: char) -> Result<String, String> {
    let mut key = String::new();
    loop {
        match cur.next() {
            None => return Err(format!("unclosed {q}")),
            Some('\\') => match cur.next() {
                Some(c) => key.push(c),
                None => return Err(format!("unclosed {q}")),
            },
            Some(c) if c == q => return Ok(key),
            Some(c) => key.push(c),
        }
    }
}

fn index(cur: &mut Cursor<'_>) -> Result<i64, String> {
    let mut text = String::new();
    if cur.eat('-') {
        text.push('-');
    }
    while let Some(c) = cur.peek().filter(char::is_ascii_digit) {
        text.push(c);
        cur.next();
    }
    text.parse::<i64>()
        .map_err(|_| format!("{text:?} is not an array index"))
}
