//! A request body whose one long list (the conversation) is serialised an item at a time:
//! a resumed session of 100k items never exists as a whole `serde_json::Value` tree next
//! to its bytes. The wire modules describe the body; tests read it back as a `Value`.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

/// Makes the list's items, in order, each time the body is written.
type Items<'a> = Box<dyn Fn() -> Box<dyn Iterator<Item = Value> + 'a> + 'a>;

/// The body: every field of `head` in its order, with `list_key`'s placeholder replaced by
/// the items `items` makes.
pub(crate) struct RequestBody<'a> {
    head: Value,
    list_key: &'static str,
    items: Items<'a>,
}

impl<'a> RequestBody<'a> {
    /// `head` must be an object holding `list_key` (its value is ignored: a placeholder
    /// that keeps the key's position).
    pub(crate) fn new(head: Value, list_key: &'static str, items: Items<'a>) -> Self {
        Self { head, list_key, items }
    }

    /// The JSON text. Fails only if a value cannot be written as JSON (a map with
    /// non-string keys, which our wire code never builds).
    pub(crate) fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    /// The body as one tree (for tests and small requests). Fails as `to_bytes`.
    #[cfg(test)]
    pub(crate) fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self)
    }
}

impl Serialize for RequestBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = self.head.as_object();
        let mut map = serializer.serialize_map(fields.map(serde_json::Map::len))?;
        for (key, value) in fields.into_iter().flatten() {
            if key == self.list_key {
                map.serialize_entry(key, &List(&self.items))?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// The list, made and written item by item.
struct List<'b, 'a>(&'b Items<'a>);

impl Serialize for List<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq((self.0)())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn numbers() -> RequestBody<'static> {
        let head = json!({"model": "m", "messages": null, "stream": true});
        let items =
            || Box::new((1..=3).map(|n| json!({"n": n}))) as Box<dyn Iterator<Item = Value>>;
        RequestBody::new(head, "messages", Box::new(items))
    }

    #[test]
    fn the_list_is_written_in_its_placeholders_position() {
        let text = String::from_utf8(numbers().to_bytes().unwrap()).unwrap();
        assert_eq!(text, r#"{"model":"m","messages":[{"n":1},{"n":2},{"n":3}],"stream":true}"#);
    }

    #[test]
    fn every_write_makes_the_items_afresh() {
        let body = numbers();
        assert_eq!(body.to_bytes().unwrap(), body.to_bytes().unwrap());
        assert_eq!(body.to_value().unwrap()["messages"][2], json!({"n": 3}));
    }
}
