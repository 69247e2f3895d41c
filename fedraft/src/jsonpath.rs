//! `-o jsonpath=TEMPLATE`, as kubectl reads it: text with `{...}` holes, each hole a JSONPath
//! relative to the document (`{.items[*].name}`; the leading `$` is implied), a string literal
//! (`{"\n"}`), or a `{range PATH}...{end}` block that repeats its body for every match.
//! Several matches in one hole are joined by spaces; strings print bare, anything else as
//! compact JSON. The path language itself is RFC 9535 (serde_json_path), which reads kubectl's
//! usual filters (`[?(@.health=="Ready")]`) as they are.
//!
//! Must not: reach the network or the file system; it formats a value it is given.

use serde_json::Value;
use serde_json_path::JsonPath;

/// Why a template cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("jsonpath template: unclosed {{ at byte {0}")]
    Unclosed(usize),
    #[error("jsonpath template: {{end}} without {{range}}")]
    StrayEnd,
    #[error("jsonpath template: {{range {0}}} without {{end}}")]
    OpenRange(String),
    #[error("jsonpath template: bad string literal {0}")]
    Literal(String),
    #[error("jsonpath template: {path}: {message}")]
    Path { path: String, message: String },
}

#[derive(Debug)]
enum Node {
    Text(String),
    Path(JsonPath),
    Range(JsonPath, Vec<Node>),
}

/// A parsed template.
#[derive(Debug)]
pub struct Template(Vec<Node>);

fn path(expr: &str) -> Result<JsonPath, TemplateError> {
    let e = expr.trim();
    let full = if e.starts_with('$') {
        e.to_string()
    } else if e.starts_with('.') || e.starts_with('[') {
        format!("${e}")
    } else {
        format!("$.{e}")
    };
    JsonPath::parse(&full).map_err(|err| TemplateError::Path {
        path: expr.to_string(),
        message: err.to_string(),
    })
}

/// The byte index of the `}` that closes the hole opened at `open`, skipping quoted text (a
/// filter may compare with a string holding `}`).
fn close_of(t: &str, open: usize) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, ch) in t[open + 1..].char_indices() {
        match (quote, ch) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(ch),
            (None, '}') => return Some(open + 1 + i),
            (None, _) => {}
        }
    }
    None
}

fn literal(inner: &str) -> Result<String, TemplateError> {
    // JSON's string syntax is the one kubectl's literals follow (`"\n"`, `"\t"`, `"\""`).
    serde_json::from_str::<String>(inner).map_err(|_| TemplateError::Literal(inner.to_string()))
}

/// A block being parsed: the nodes gathered so far, and the `range` path (its text and compiled
/// form) that opened it; the outermost block has none.
type OpenBlock = (Vec<Node>, Option<(String, JsonPath)>);

impl Template {
    /// Parses `text` (the part after `jsonpath=`).
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        // Stack of open blocks: the nodes gathered so far, and the range path that opened it.
        let mut stack: Vec<OpenBlock> = vec![(Vec::new(), None)];
        let mut rest_start = 0;
        let mut i = 0;
        while let Some(off) = text[i..].find('{') {
            let open = i + off;
            let close = close_of(text, open).ok_or(TemplateError::Unclosed(open))?;
            let top = &mut stack.last_mut().ok_or(TemplateError::StrayEnd)?.0;
            if open > rest_start {
                top.push(Node::Text(text[rest_start..open].to_string()));
            }
            let inner = text[open + 1..close].trim();
            if inner == "end" {
                let (body, opened) = stack.pop().ok_or(TemplateError::StrayEnd)?;
                let Some((_, p)) = opened else {
                    return Err(TemplateError::StrayEnd);
                };
                let parent = &mut stack.last_mut().ok_or(TemplateError::StrayEnd)?.0;
                parent.push(Node::Range(p, body));
            } else if let Some(expr) = inner.strip_prefix("range ") {
                stack.push((Vec::new(), Some((expr.trim().to_string(), path(expr)?))));
            } else if inner.starts_with('"') {
                top.push(Node::Text(literal(inner)?));
            } else {
                top.push(Node::Path(path(inner)?));
            }
            i = close + 1;
            rest_start = i;
        }
        let (mut nodes, opened) = stack.pop().ok_or(TemplateError::StrayEnd)?;
        if let Some((expr, _)) = opened {
            return Err(TemplateError::OpenRange(expr));
        }
        if rest_start < text.len() {
            nodes.push(Node::Text(text[rest_start..].to_string()));
        }
        Ok(Template(nodes))
    }

    /// The template filled in from `doc`.
    pub fn render(&self, doc: &Value) -> String {
        let mut out = String::new();
        render(&self.0, doc, &mut out);
        out
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn render(nodes: &[Node], doc: &Value, out: &mut String) {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Path(p) => {
                let parts: Vec<String> = p.query(doc).all().into_iter().map(text_of).collect();
                out.push_str(&parts.join(" "));
            }
            Node::Range(p, body) => {
                for item in p.query(doc).all() {
                    render(body, item, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({"items": [
            {"name": "dc1", "status": {"health": "Ready"}, "labels": {"region": "eu"}},
            {"name": "dc2", "status": {"health": "NotReady"}, "labels": {}},
        ]})
    }

    fn run(t: &str) -> String {
        Template::parse(t).unwrap().render(&doc())
    }

    #[test]
    fn holes_ranges_and_literals() {
        assert_eq!(run("{.items[*].name}"), "dc1 dc2");
        assert_eq!(run("{$.items[0].name}"), "dc1");
        assert_eq!(run("first: {.items[0].name}!"), "first: dc1!");
        assert_eq!(
            run(r#"{range .items[*]}{.name}{"\t"}{.status.health}{"\n"}{end}"#),
            "dc1\tReady\ndc2\tNotReady\n"
        );
        assert_eq!(run(r#"{.items[?(@.status.health=="Ready")].name}"#), "dc1");
        assert_eq!(run("{.items[0].labels}"), r#"{"region":"eu"}"#);
        assert_eq!(run("{.items[5].name}"), "");
        assert_eq!(run("no holes"), "no holes");
        assert_eq!(run(r#"{.items[?(@.name=="}")].name}"#), "");
    }

    #[test]
    fn malformed_templates_are_errors() {
        for bad in [
            "{.items",
            "{end}",
            "{range .items[*]}{.name}",
            "{.items[}",
            r#"{"unterminated}"#,
        ] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
    }
}
