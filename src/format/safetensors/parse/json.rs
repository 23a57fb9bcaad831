//! The header's JSON read in one pass by serde visitors that accept what
//! the reference's derived parsing accepts: metadata as a string map,
//! entries in file order, a repeated tensor name keeping its last entry as
//! the reference's map does (with a warning), dtype names checked as they
//! are read, and serde_json's nesting limit applied inside ignored fields
//! too. Everything the reference tolerates but a user should know of
//! becomes a [`FormatWarning`].

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::super::error::{EntryText, FormatWarning};
use crate::dtype::Dtype;

/// A tensor entry as written, before the offset checks.
pub(super) struct RawEntry {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    pub data_offsets: [u64; 2],
}

/// The header as read, before [`super::parse`] validates the entries.
pub(super) struct RawHeader {
    pub metadata: Option<BTreeMap<String, String>>,
    pub entries: Vec<RawEntry>,
    pub warnings: Vec<FormatWarning>,
}

/// Reads the header's JSON text; `serde_json`'s error carries the line and
/// column that [`super::parse`] turns into a file offset.
pub(super) fn parse_json(text: &str) -> Result<RawHeader, serde_json::Error> {
    let mut warnings = Vec::new();
    let leading = text
        .bytes()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .count();
    if leading > 0 && leading < text.len() {
        warnings.push(FormatWarning::LeadingWhitespace { bytes: leading });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let raw = de.deserialize_map(TopVisitor {
        warnings: &mut warnings,
    })?;
    de.end()?;
    let (metadata, entries) = raw;
    Ok(RawHeader {
        metadata,
        entries,
        warnings,
    })
}

type TopValue = (Option<BTreeMap<String, String>>, Vec<RawEntry>);

struct TopVisitor<'w> {
    warnings: &'w mut Vec<FormatWarning>,
}

impl<'de> Visitor<'de> for TopVisitor<'_> {
    type Value = TopValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of tensor entries")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopValue, A::Error> {
        let mut metadata: Option<Option<BTreeMap<String, String>>> = None;
        let mut entries: Vec<RawEntry> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        // Per repeated name: how many entries, and the first one (ignored).
        let mut duplicates: BTreeMap<String, (usize, EntryText)> = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "__metadata__" {
                if metadata.is_some() {
                    return Err(de::Error::duplicate_field("__metadata__"));
                }
                metadata = Some(map.next_value_seed(MetadataSeed {
                    warnings: self.warnings,
                })?);
                continue;
            }
            let entry = map.next_value_seed(EntrySeed {
                name: &key,
                warnings: self.warnings,
            })?;
            if let Some(&at) = by_name.get(&key) {
                if let Some(slot) = entries.get_mut(at) {
                    let seen = duplicates.entry(key.clone()).or_insert_with(|| {
                        (
                            1,
                            EntryText {
                                dtype: slot.dtype,
                                shape: slot.shape.clone(),
                                data_offsets: slot.data_offsets,
                            },
                        )
                    });
                    seen.0 += 1;
                    slot.dtype = entry.0;
                    slot.shape = entry.1;
                    slot.data_offsets = entry.2;
                }
            } else {
                by_name.insert(key.clone(), entries.len());
                entries.push(RawEntry {
                    name: key,
                    dtype: entry.0,
                    shape: entry.1,
                    data_offsets: entry.2,
                });
            }
        }
        for (name, (count, first)) in duplicates {
            if let Some(slot) = by_name.get(&name).and_then(|&at| entries.get(at)) {
                let last = EntryText {
                    dtype: slot.dtype,
                    shape: slot.shape.clone(),
                    data_offsets: slot.data_offsets,
                };
                self.warnings.push(FormatWarning::DuplicateTensor {
                    name,
                    count,
                    first,
                    last,
                });
            }
        }
        Ok((metadata.flatten(), entries))
    }
}

struct MetadataSeed<'w> {
    warnings: &'w mut Vec<FormatWarning>,
}

impl<'de> DeserializeSeed<'de> for MetadataSeed<'_> {
    type Value = Option<BTreeMap<String, String>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for MetadataSeed<'_> {
    type Value = Option<BTreeMap<String, String>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("__metadata__ as an object of strings, or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(MetadataMapVisitor {
            warnings: self.warnings,
        })
        .map(Some)
    }
}

struct MetadataMapVisitor<'w> {
    warnings: &'w mut Vec<FormatWarning>,
}

impl<'de> Visitor<'de> for MetadataMapVisitor<'_> {
    type Value = BTreeMap<String, String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("__metadata__ as an object of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        let mut reported: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value: String = map.next_value()?;
            if out.contains_key(&key) && !reported.contains(&key) {
                reported.push(key.clone());
            }
            out.insert(key, value);
        }
        for key in reported {
            self.warnings
                .push(FormatWarning::DuplicateMetadataKey { key });
        }
        Ok(out)
    }
}

type EntryValue = (Dtype, Vec<u64>, [u64; 2]);

struct EntrySeed<'a, 'w> {
    name: &'a str,
    warnings: &'w mut Vec<FormatWarning>,
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_, '_> {
    type Value = EntryValue;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_, '_> {
    type Value = EntryValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct TensorInfo")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EntryValue, A::Error> {
        let mut dtype: Option<(Dtype, bool)> = None;
        let mut shape: Option<Vec<u64>> = None;
        let mut offsets: Option<(u64, u64)> = None;
        let mut unknown: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "dtype" => {
                    if dtype.is_some() {
                        return Err(de::Error::duplicate_field("dtype"));
                    }
                    dtype = Some(map.next_value_seed(DtypeSeed)?);
                }
                "shape" => {
                    if shape.is_some() {
                        return Err(de::Error::duplicate_field("shape"));
                    }
                    shape = Some(map.next_value()?);
                }
                "data_offsets" => {
                    if offsets.is_some() {
                        return Err(de::Error::duplicate_field("data_offsets"));
                    }
                    offsets = Some(map.next_value()?);
                }
                _ => {
                    map.next_value_seed(DepthCountingIgnore)?;
                    unknown.push(key);
                }
            }
        }
        let (dtype, as_object) = dtype.ok_or_else(|| de::Error::missing_field("dtype"))?;
        let shape = shape.ok_or_else(|| de::Error::missing_field("shape"))?;
        let (begin, end) = offsets.ok_or_else(|| de::Error::missing_field("data_offsets"))?;
        if as_object {
            self.warnings.push(FormatWarning::DtypeAsObject {
                name: self.name.to_owned(),
            });
        }
        if !unknown.is_empty() {
            self.warnings.push(FormatWarning::UnknownFields {
                name: self.name.to_owned(),
                fields: unknown,
            });
        }
        Ok((dtype, shape, [begin, end]))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EntryValue, A::Error> {
        let (dtype, as_object) = seq
            .next_element_seed(DtypeSeed)?
            .ok_or_else(|| de::Error::invalid_length(0, &"struct TensorInfo with 3 elements"))?;
        let shape: Vec<u64> = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &"struct TensorInfo with 3 elements"))?;
        let (begin, end): (u64, u64) = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(2, &"struct TensorInfo with 3 elements"))?;
        let mut extra = 0usize;
        while seq.next_element_seed(DepthCountingIgnore)?.is_some() {
            extra += 1;
        }
        if extra > 0 {
            return Err(de::Error::invalid_length(
                3 + extra,
                &"struct TensorInfo with 3 elements",
            ));
        }
        self.warnings.push(FormatWarning::TensorAsArray {
            name: self.name.to_owned(),
        });
        if as_object {
            self.warnings.push(FormatWarning::DtypeAsObject {
                name: self.name.to_owned(),
            });
        }
        Ok((dtype, shape, [begin, end]))
    }
}

/// Parses a dtype: a string, or (as serde's enum encoding allows) a one-key
/// object whose value is `null`. The flag says which form was used.
struct DtypeSeed;

impl<'de> DeserializeSeed<'de> for DtypeSeed {
    type Value = (Dtype, bool);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

fn dtype_from<E: de::Error>(name: &str) -> Result<Dtype, E> {
    Dtype::from_name(name).ok_or_else(|| de::Error::unknown_variant(name, DTYPE_NAMES))
}

const DTYPE_NAMES: &[&str] = &[
    "BOOL",
    "F4",
    "F6_E2M3",
    "F6_E3M2",
    "U8",
    "I8",
    "F8_E5M2",
    "F8_E4M3",
    "F8_E8M0",
    "F8_E4M3FNUZ",
    "F8_E5M2FNUZ",
    "I16",
    "U16",
    "F16",
    "BF16",
    "I32",
    "U32",
    "F32",
    "C64",
    "F64",
    "I64",
    "U64",
];

impl<'de> Visitor<'de> for DtypeSeed {
    type Value = (Dtype, bool);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a dtype string such as \"F32\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        dtype_from(v).map(|d| (d, false))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let single = "map with a single key";
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::invalid_value(de::Unexpected::Map, &single));
        };
        // The reference buffers the whole value before matching the variant,
        // so the value must be read (and be `null`) before a second key fails.
        let unit: Option<UnitOnly> = map.next_value()?;
        if map.next_key::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_value(de::Unexpected::Map, &single));
        }
        let _ = unit;
        dtype_from(&key).map(|d| (d, true))
    }
}

/// Accepts only JSON `null`, as a unit variant's value must be.
struct UnitOnly;

impl<'de> de::Deserialize<'de> for UnitOnly {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UnitVisitor)
    }
}

struct UnitVisitor;

impl Visitor<'_> for UnitVisitor {
    type Value = UnitOnly;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unit variant")
    }

    fn visit_unit<E: de::Error>(self) -> Result<UnitOnly, E> {
        Ok(UnitOnly)
    }

    fn visit_none<E: de::Error>(self) -> Result<UnitOnly, E> {
        Ok(UnitOnly)
    }
}

/// Skips any JSON value through `deserialize_any`, so that serde_json's
/// nesting limit applies inside ignored fields as it does in the reference
/// (which buffers every value); serde_json's own `IgnoredAny` has no limit.
struct DepthCountingIgnore;

impl<'de> DeserializeSeed<'de> for DepthCountingIgnore {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DepthCountingIgnore {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(DepthCountingIgnore)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(DepthCountingIgnore)?.is_some() {
            map.next_value_seed(DepthCountingIgnore)?;
        }
        Ok(())
    }
}
