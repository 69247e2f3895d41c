//! Bounds on what rendering may build, counted while it builds it.
//!
//! Owns [`RenderLimits`] and the running [`Budget`] one render carries: patch operations
//! counted, an upper estimate of the manifest's JSON size and of its nesting depth. Every
//! operation that can grow the document is measured *before* it runs, and the measurement of
//! a value stops as soon as it passes what is left of the budget: a patch list that doubles the
//! document (`copy from ""` forty times) fails after a few doublings, having walked and
//! allocated no more than the limit. Must not: know about overrides or clusters (the caller
//! names the override and patch in the error).
//!
//! The estimate never shrinks (a `remove` or a smaller `replace` does not give budget back), so
//! it is an upper bound of the real size: a manifest that renders is within the limits.

use serde_json::Value;

/// What one rendered manifest may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderLimits {
    /// Most bytes of JSON text (estimated from above), template included.
    pub max_bytes: usize,
    /// Most nesting levels below the document's root.
    pub max_depth: usize,
    /// Most JSON patch operations applied to one manifest (over every override that targets
    /// the cluster).
    pub max_patch_ops: usize,
    /// Most bytes the overrides may add to the template.
    pub max_growth_bytes: usize,
}

/// The limits every render uses: twice the largest template, Kubernetes' own object size being
/// about 1.5 MiB; depth well inside serde_json's parse limit of 128 (the member must be able to
/// read what fedraft sends).
pub const LIMITS: RenderLimits = RenderLimits {
    max_bytes: 2 * 1024 * 1024,
    max_depth: 100,
    max_patch_ops: 256,
    max_growth_bytes: 1024 * 1024,
};

/// The running count of one render.
#[derive(Debug)]
pub(crate) struct Budget {
    limits: RenderLimits,
    size: usize,
    grown: usize,
    depth: usize,
    ops: usize,
}

/// Which limit a measurement ran into.
#[derive(Debug)]
enum Over {
    Bytes,
    Depth,
}

impl Budget {
    /// Starts from a parsed template of `template_len` bytes.
    pub fn new(limits: RenderLimits, template_len: usize, doc: &Value) -> Result<Self, String> {
        if template_len > limits.max_bytes {
            return Err(format!(
                "bytes: the template's {template_len} bytes exceed the limit of {}",
                limits.max_bytes
            ));
        }
        // The template is already in memory; only its depth is unknown.
        let depth = measure(doc, usize::MAX, limits.max_depth).map_or_else(
            |_| {
                Err(format!(
                    "depth: the template nests deeper than {} levels",
                    limits.max_depth
                ))
            },
            |(_, d)| Ok(d),
        )?;
        Ok(Budget {
            limits,
            size: template_len,
            grown: 0,
            depth,
            ops: 0,
        })
    }

    /// Counts one patch operation.
    pub fn op(&mut self) -> Result<(), String> {
        self.ops += 1;
        if self.ops > self.limits.max_patch_ops {
            return Err(format!(
                "patch operations: more than {} apply to this cluster",
                self.limits.max_patch_ops
            ));
        }
        Ok(())
    }

    /// Admits `value` placed at `path` (a JSON pointer): its size counts as growth, its depth
    /// below the path's as the document's.
    pub fn insert(&mut self, path: &str, value: &Value) -> Result<(), String> {
        let left = self.bytes_left();
        let depth_left = self.limits.max_depth.saturating_sub(segments(path));
        match measure(value, left, depth_left) {
            Ok((bytes, depth)) => {
                self.depth = self.depth.max(segments(path) + depth);
                self.add_bytes(bytes)
            }
            Err(Over::Bytes) => Err(self.bytes_error(left.saturating_add(1))),
            Err(Over::Depth) => Err(format!(
                "depth: the value at {path:?} would nest deeper than {} levels",
                self.limits.max_depth
            )),
        }
    }

    /// Admits moving the value at `from` to `path`: no growth, but it may move deeper. Its depth
    /// is at most the document's below `from`.
    pub fn relocate(&mut self, from: &str, path: &str) -> Result<(), String> {
        let moved = self.depth.saturating_sub(segments(from));
        let depth = self.depth.max(segments(path) + moved);
        if depth > self.limits.max_depth {
            return Err(format!(
                "depth: moving {from:?} to {path:?} may nest deeper than {} levels",
                self.limits.max_depth
            ));
        }
        self.depth = depth;
        Ok(())
    }

    /// Counts `n` bytes of growth made outside JSON patches (labels, annotations, images).
    pub fn add_bytes(&mut self, n: usize) -> Result<(), String> {
        let grown = self.grown.saturating_add(n);
        let size = self.size.saturating_add(n);
        if grown > self.limits.max_growth_bytes || size > self.limits.max_bytes {
            return Err(self.bytes_error(n));
        }
        self.grown = grown;
        self.size = size;
        Ok(())
    }

    /// The estimated size so far.
    #[cfg(test)]
    pub fn size(&self) -> usize {
        self.size
    }

    fn bytes_left(&self) -> usize {
        let by_size = self.limits.max_bytes.saturating_sub(self.size);
        let by_growth = self.limits.max_growth_bytes.saturating_sub(self.grown);
        by_size.min(by_growth)
    }

    fn bytes_error(&self, adding: usize) -> String {
        format!(
            "bytes: adding {}{adding} bytes to a manifest of {} would exceed the limit of {} bytes \
             ({} bytes of growth over the template)",
            if adding > self.bytes_left() { "over " } else { "" },
            self.size,
            self.limits.max_bytes,
            self.limits.max_growth_bytes
        )
    }
}

/// Levels a JSON pointer descends ("" is the root, "/a/b" two levels).
fn segments(pointer: &str) -> usize {
    pointer.bytes().filter(|b| *b == b'/').count()
}

/// The JSON text size (an upper estimate for numbers) and nesting depth of `v`, or which bound
/// it passed first. Stops walking as soon as `max_bytes` is passed, so the work is bounded by
/// the budget, not by the value.
fn measure(v: &Value, max_bytes: usize, max_depth: usize) -> Result<(usize, usize), Over> {
    fn walk(
        v: &Value,
        level: usize,
        max_depth: usize,
        bytes: &mut usize,
        max_bytes: usize,
    ) -> Result<usize, Over> {
        let own = match v {
            Value::Null | Value::Bool(_) => 5,
            // Longest f64/i64 text is 24 bytes; close enough from above.
            Value::Number(_) => 24,
            Value::String(s) => s.len() + 2,
            Value::Array(a) => 2 + a.len(),
            Value::Object(m) => 2 + m.keys().map(|k| k.len() + 4).sum::<usize>(),
        };
        *bytes = bytes.saturating_add(own);
        if *bytes > max_bytes {
            return Err(Over::Bytes);
        }
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => return Ok(0),
        };
        let mut deepest = 0;
        for child in children {
            if level + 1 > max_depth {
                return Err(Over::Depth);
            }
            deepest = deepest.max(1 + walk(child, level + 1, max_depth, bytes, max_bytes)?);
        }
        Ok(deepest)
    }
    let mut bytes = 0;
    let depth = walk(v, 0, max_depth, &mut bytes, max_bytes)?;
    Ok((bytes, depth))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn measures_size_and_depth() {
        let (bytes, depth) = measure(&json!({"a": [1, {"b": "xy"}]}), 1000, 10).unwrap();
        assert_eq!(depth, 3);
        assert!(bytes >= json!({"a": [1, {"b": "xy"}]}).to_string().len());
        assert!(matches!(
            measure(&json!({"a": {"b": {"c": 1}}}), 1000, 2),
            Err(Over::Depth)
        ));
        assert!(matches!(
            measure(&json!("x".repeat(100)), 50, 10),
            Err(Over::Bytes)
        ));
    }

    #[test]
    fn growth_is_refused_before_it_happens() {
        let doc = json!({"a": "x".repeat(1000)});
        let mut b = Budget::new(LIMITS, 1010, &doc).unwrap();
        let mut copies = 0;
        let mut current = doc;
        loop {
            if b.insert("/b", &current).is_err() {
                break;
            }
            current = json!({"a": current.clone(), "b": current});
            copies += 1;
            assert!(copies < 20, "doubling never stopped");
        }
        assert!(b.size() <= LIMITS.max_bytes);
    }

    #[test]
    fn ops_and_depth_counted() {
        let doc = json!({});
        let mut b = Budget::new(LIMITS, 2, &doc).unwrap();
        for _ in 0..LIMITS.max_patch_ops {
            b.op().unwrap();
        }
        assert!(b.op().unwrap_err().starts_with("patch operations"));
        let deep = "/a".repeat(LIMITS.max_depth);
        assert!(b.insert(&deep, &json!({"x": 1})).is_err());
        assert!(
            b.relocate("", &deep).is_ok(),
            "an empty document moves freely"
        );
    }
}
