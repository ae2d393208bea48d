//! A document as a `serde_json::Value`, except that an object of a kind Portico does not read
//! is left undecoded: once its `apiVersion` and `kind` are known, the rest of it is skipped
//! (`IgnoredAny`) instead of being built in memory. A large ConfigMap costs parsing time, not
//! memory. List items are skimmed the same way.

use crate::object::Kind;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// A skimmed document.
pub(crate) struct Skim(pub Value);

impl<'de> Deserialize<'de> for Skim {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkimVisitor).map(Skim)
    }
}

struct SkimVisitor;

impl<'de> Visitor<'de> for SkimVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML or JSON document")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(SkimVisitor)
    }

    /// A bare array of objects: each item skimmed.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Skim(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if ignored(&out) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = if key == "items" {
                // A list's items may be objects of any kind: skim them too.
                map.next_value::<Skim>()?.0
            } else {
                map.next_value::<Value>()?
            };
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Whether `object` already names a kind Portico does not read (and is not a list of objects).
fn ignored(object: &Map<String, Value>) -> bool {
    let field = |k| object.get(k).and_then(Value::as_str);
    match (field("apiVersion"), field("kind")) {
        (Some(api_version), Some(kind)) => {
            !kind.ends_with("List") && Kind::recognise(api_version, kind).is_none()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_kinds_keep_only_their_identity_and_read_kinds_are_whole() {
        let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: big}\ndata: {a: b}\n";
        let Skim(v) = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment"})
        );
        let yaml =
            "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n";
        let Skim(v) = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(v["spec"]["ports"][0]["port"], 80);
        let yaml = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: apps/v1, kind: Deployment, data: {a: b}}\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n";
        let Skim(v) = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(
            v["items"][0],
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment"})
        );
        assert_eq!(v["items"][1]["metadata"]["name"], "s");
        // The kind written last: the object is decoded whole, as before.
        let yaml = "data: {a: b}\napiVersion: apps/v1\nkind: Deployment\n";
        let Skim(v) = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(v["data"]["a"], "b");
    }
}
