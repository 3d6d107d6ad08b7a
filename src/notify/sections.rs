//! A destination written once (`[notify.slack]`) or several times (`[[notify.slack]]`,
//! each with a `name`): one Slack channel for the platform, or one per team for routes.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// One section or a list of them.
#[derive(Debug, Clone, PartialEq)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// Every section, in the file's order.
    pub fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::One(t) => std::slice::from_ref(t),
            OneOrMany::Many(v) => v,
        }
    }

    /// Whether the file wrote a list (`[[…]]`).
    pub fn is_list(&self) -> bool {
        matches!(self, OneOrMany::Many(_))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table (one section) or an array of tables (several, each with a name)")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(OneOrMany::One)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Vec::<T>::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(OneOrMany::Many)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

impl<T: Serialize> Serialize for OneOrMany<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OneOrMany::One(t) => t.serialize(s),
            OneOrMany::Many(v) => v.serialize(s),
        }
    }
}

impl<T: schemars::JsonSchema> schemars::JsonSchema for OneOrMany<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("OneOrMany_{}", T::schema_name()).into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let one = g.subschema_for::<T>();
        schemars::json_schema!({ "anyOf": [one, { "type": "array", "items": one }] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct S {
        name: Option<String>,
        channel: String,
    }

    #[derive(Debug, Deserialize)]
    struct File {
        slack: Option<OneOrMany<S>>,
    }

    #[test]
    fn a_section_reads_as_one_table_or_a_list_of_tables_and_keeps_its_errors() {
        let f: File = toml::from_str("[slack]\nchannel = \"C1\"\n").unwrap();
        assert_eq!(f.slack, Some(OneOrMany::One(S { name: None, channel: "C1".into() })));
        let f: File =
            toml::from_str("[[slack]]\nname = \"a\"\nchannel = \"C1\"\n[[slack]]\nname = \"b\"\nchannel = \"C2\"\n")
                .unwrap();
        let many = f.slack.unwrap();
        assert!(many.is_list());
        assert_eq!(many.as_slice().iter().map(|s| s.channel.as_str()).collect::<Vec<_>>(), ["C1", "C2"]);
        // The section's own errors come through, with their line.
        let e = toml::from_str::<File>("[[slack]]\nchanel = \"C1\"\n").unwrap_err().to_string();
        assert!(e.contains("unknown field `chanel`") && e.contains("line 2"), "{e}");
        let e = toml::from_str::<File>("slack = 3\n").unwrap_err().to_string();
        assert!(e.contains("a table (one section) or an array of tables"), "{e}");
    }
}
