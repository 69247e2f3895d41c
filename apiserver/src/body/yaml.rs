//! YAML decoding with a bound on what the document expands to.
//!
//! A YAML alias repeats its anchor's whole subtree wherever it is written, so a few hundred
//! kilobytes of anchors and aliases ("billion laughs") describe billions of values; the YAML
//! library follows aliases as it goes and only limits how many it follows, not how much they
//! expand to. The document is therefore built here, node by node, against a budget, and the
//! decoding stops at the first node past it: the memory and time a body can cost are those of
//! the largest JSON body the API accepts, whatever aliases it uses.
//!
//! Must not: build any part of a document before charging it to the budget.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Deepest nesting accepted (the YAML library refuses past 128 with a less helpful message).
pub const MAX_DEPTH: usize = 100;

/// What a YAML document may expand to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Values (scalars, sequences and mappings, keys included).
    pub nodes: usize,
    /// Bytes of keys and string values, counted once per appearance.
    pub string_bytes: usize,
}

impl Budget {
    /// The most a JSON body of `limit_bytes` can hold: a value per two bytes (`1,`), and no
    /// more string bytes than the body has.
    pub fn for_body_limit(limit_bytes: usize) -> Self {
        Budget {
            nodes: (limit_bytes / 2).max(1),
            string_bytes: limit_bytes,
        }
    }
}

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum YamlError {
    /// Expanding aliases (or the document itself) exceeded the budget.
    TooLarge(String),
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Not YAML, or YAML that does not map to JSON.
    Invalid(String),
}

/// Parses `bytes` as one YAML document into JSON values, within `budget`.
pub fn parse(bytes: &[u8], budget: Budget) -> Result<Value, YamlError> {
    let meter = Meter {
        nodes: Cell::new(budget.nodes),
        bytes: Cell::new(budget.string_bytes),
        refused: Cell::new(None),
        budget,
    };
    let de = serde_yaml::Deserializer::from_slice(bytes);
    let result = Node {
        meter: &meter,
        depth: 0,
    }
    .deserialize(de);
    match (result, meter.refused.take()) {
        (_, Some(refusal)) => Err(refusal),
        (Ok(v), None) => Ok(v),
        // The library's own alias limit (a hundred aliases followed per event) can trip before
        // the budget on deeply nested aliases; it is the same refusal. Its error has no kind to
        // match, only this text.
        (Err(e), None) if e.to_string().contains("repetition limit exceeded") => Err(
            YamlError::TooLarge(format!("YAML aliases expand too far ({e})")),
        ),
        (Err(e), None) => Err(YamlError::Invalid(e.to_string())),
    }
}

/// The budget left while one document is built; `refused` keeps the reason the build stopped,
/// since the YAML library re-words the error it is handed.
struct Meter {
    nodes: Cell<usize>,
    bytes: Cell<usize>,
    refused: Cell<Option<YamlError>>,
    budget: Budget,
}

impl Meter {
    fn charge<E: serde::de::Error>(&self, string_bytes: usize) -> Result<(), E> {
        let nodes = self.nodes.get().checked_sub(1);
        let bytes = self.bytes.get().checked_sub(string_bytes);
        match (nodes, bytes) {
            (Some(n), Some(b)) => {
                self.nodes.set(n);
                self.bytes.set(b);
                Ok(())
            }
            _ => Err(self.refuse(YamlError::TooLarge(format!(
                "YAML document expands (aliases included) past {} values or {} bytes of strings",
                self.budget.nodes, self.budget.string_bytes
            )))),
        }
    }

    fn refuse<E: serde::de::Error>(&self, why: YamlError) -> E {
        let message = match &why {
            YamlError::TooLarge(m) | YamlError::Invalid(m) => m.clone(),
            YamlError::TooDeep => format!("nested deeper than {MAX_DEPTH} levels"),
        };
        self.refused.set(Some(why));
        E::custom(message)
    }
}

/// One value at `depth`, charged before it is built.
#[derive(Clone, Copy)]
struct Node<'m> {
    meter: &'m Meter,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Node<'_> {
    fn child<E: serde::de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return Err(self.meter.refuse(YamlError::TooDeep));
        }
        Ok(Node {
            meter: self.meter,
            depth: self.depth + 1,
        })
    }
}

/// A mapping key, as the JSON value it becomes: text.
struct Key<'m>(&'m Meter);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = String;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        let key = String::deserialize(d)?;
        self.0.charge::<D::Error>(key.len())?;
        Ok(key)
    }
}

use serde::Deserialize as _;

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-compatible YAML value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.meter.charge::<E>(0)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.meter.charge::<E>(0)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.meter.charge::<E>(0)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Value, E> {
        match (i64::try_from(v), u64::try_from(v)) {
            (Ok(n), _) => self.visit_i64(n),
            (_, Ok(n)) => self.visit_u64(n),
            _ => Err(E::custom("number out of range")),
        }
    }

    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Value, E> {
        match u64::try_from(v) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::custom("number out of range")),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.meter.charge::<E>(0)?;
        // As serde_json's own value does: a float JSON cannot write is null.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.meter.charge::<E>(v.len())?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.meter.charge::<E>(v.len())?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.meter.charge::<E>(0)?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.meter.charge::<A::Error>(0)?;
        let child = self.child::<A::Error>()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(child)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.meter.charge::<A::Error>(0)?;
        let child = self.child::<A::Error>()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key(self.meter))? {
            let value = map.next_value_seed(child)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const ROOMY: Budget = Budget {
        nodes: 1 << 20,
        string_bytes: 1 << 20,
    };

    #[test]
    fn plain_documents_read_as_serde_yaml_reads_them() {
        let doc = "a: 1\nb: [x, 2.5, true, null]\nc: {d: -3}\n'7': ~\n";
        let ours = parse(doc.as_bytes(), ROOMY).unwrap();
        let theirs: Value = serde_yaml::from_str(doc).unwrap();
        assert_eq!(ours, theirs);
        assert!(matches!(parse(b"a: [", ROOMY), Err(YamlError::Invalid(_))));
        assert!(matches!(
            parse(b"a: 1\n---\nb: 2\n", ROOMY),
            Err(YamlError::Invalid(_))
        ));
    }

    #[test]
    fn aliases_are_charged_every_time_they_expand() {
        let doc = "a: &x [1, 2, 3, 4]\nb: *x\nc: *x\n";
        // Root, 3 keys, 3 lists and their 12 numbers: 19 values.
        let exact = Budget {
            nodes: 19,
            string_bytes: 3,
        };
        assert!(parse(doc.as_bytes(), exact).is_ok());
        let short = Budget { nodes: 18, ..exact };
        assert!(matches!(
            parse(doc.as_bytes(), short),
            Err(YamlError::TooLarge(_))
        ));
        let doc = "a: &s hello\nb: *s\n";
        let bytes = Budget {
            nodes: 10,
            string_bytes: 11,
        };
        assert!(matches!(
            parse(doc.as_bytes(), bytes),
            Err(YamlError::TooLarge(_))
        ));
    }

    #[test]
    fn billion_laughs_is_refused_quickly() {
        let start = std::time::Instant::now();
        for doc in [flat_bomb(2000, 2000), nested_bomb(9)] {
            let got = parse(doc.as_bytes(), Budget::for_body_limit(2 << 20));
            assert!(matches!(got, Err(YamlError::TooLarge(_))), "{got:?}");
        }
        // Expanded in full these are 4 * 10^6 and 10^10 values; refused, they cost about a
        // second each in a debug build (the bound is generous for a loaded test machine).
        assert!(start.elapsed() < std::time::Duration::from_secs(60));
    }

    /// One anchored list of `width` strings, aliased `refs` times (the YAML library's own
    /// alias limit lets this through: it counts aliases followed, not what they expand to).
    pub(crate) fn flat_bomb(width: usize, refs: usize) -> String {
        let mut doc = format!("a: &a [{}]\nb: [", vec!["lol"; width].join(", "));
        doc.push_str(&vec!["*a"; refs].join(", "));
        doc.push_str("]\n");
        doc
    }

    /// Ten aliases of the level below on each of `levels` levels.
    pub(crate) fn nested_bomb(levels: usize) -> String {
        let mut doc = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for i in 1..=levels {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            doc.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        doc
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(parse(deep.as_bytes(), ROOMY), Err(YamlError::TooDeep));
        let ok = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(ok.as_bytes(), ROOMY).is_ok());
    }
    /// Values in a decoded document, keys included, as the budget counts them.
    fn count_values(v: &Value) -> usize {
        match v {
            Value::Array(items) => 1 + items.iter().map(count_values).sum::<usize>(),
            Value::Object(m) => 1 + m.values().map(|v| 1 + count_values(v)).sum::<usize>(),
            _ => 1,
        }
    }

    /// A YAML document of `keys` top-level entries, each anchored; later entries are flow lists
    /// mixing scalars, nested lists and aliases of earlier anchors, so the expansion can grow
    /// geometrically with the number of entries.
    fn arb_document() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let item = prop_oneof![
            Just("lol".to_string()),
            (0u32..1000).prop_map(|n| n.to_string()),
            Just("[x, [y, [z]]]".to_string()),
            Just("{k: v}".to_string()),
            (0usize..8).prop_map(|i| format!("*ALIAS{i}")),
        ];
        proptest::collection::vec(proptest::collection::vec(item, 0..12), 1..8).prop_map(
            |entries| {
                let mut doc = String::new();
                for (i, items) in entries.iter().enumerate() {
                    // An alias may only name an anchor defined above it.
                    let items: Vec<String> = items
                        .iter()
                        .map(|it| match it.strip_prefix("*ALIAS") {
                            Some(n) if i > 0 => {
                                format!("*a{}", n.parse::<usize>().unwrap_or(0) % i)
                            }
                            Some(_) => "lol".to_string(),
                            None => it.clone(),
                        })
                        .collect();
                    doc.push_str(&format!("k{i}: &a{i} [{}]\n", items.join(", ")));
                }
                doc
            },
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Whatever the aliases, a decoded document fits the budget, or decoding says it
        /// does not; within a roomy budget it is what the YAML library itself decodes.
        #[test]
        fn decoded_documents_fit_their_budget(doc in arb_document(), nodes in 1usize..400) {
            let budget = Budget { nodes, string_bytes: 4 * nodes };
            match parse(doc.as_bytes(), budget) {
                Ok(v) => proptest::prop_assert!(count_values(&v) <= budget.nodes),
                Err(YamlError::TooLarge(_)) => {}
                Err(e) => proptest::prop_assert!(false, "{doc}: {e:?}"),
            }
            // The library refuses some alias-heavy documents on its own; compare where both read.
            if let (Ok(ours), Ok(theirs)) =
                (parse(doc.as_bytes(), ROOMY), serde_yaml::from_str::<Value>(&doc))
            {
                proptest::prop_assert_eq!(ours, theirs);
            }
        }

        /// Arbitrary bytes are a value or an error, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse(&bytes, ROOMY);
        }
    }
}
