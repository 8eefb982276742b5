//! The single pass's field types: each kept field decoded in the plain
//! shape a typed reading takes, or, in any other shape, exactly as pruned
//! decoding ([`super::prune`]) keeps it.
//!
//! The typed readings ([`super::typed`]) decode each object once, straight
//! from its list page or watch event, and no copy of its text is kept.
//! When a typed reading declines an object (an odd shape, or a value the
//! lenient reading would log), the lenient reading must still see the very
//! document pruned decoding would have given it. So a kept field holds
//! either its plain decoding or, in any other shape, the pruned `Value`;
//! and every type here can give back its part of the pruned document
//! ([`Fields::into_map`], [`Leaf::into_value`]). The typed readings' tests
//! compare that rebuilt document with pruned decoding for every object
//! they read.
//!
//! Duplicate keys are taken as pruned decoding takes them (the last one
//! wins), never as an error: an error here would fail a whole list page.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::prune::{Keep, Key, PrunedVisitor};

/// A field kept whole: a string, boolean or integer as sent (a string
/// borrowed from the input where it has no escapes), anything else (null,
/// a float, an object, an array) as a `Value`.
pub(super) enum Leaf<'de> {
    Str(Cow<'de, str>),
    Bool(bool),
    Int(i64),
    Odd(Value),
}

impl Leaf<'_> {
    /// The field as pruned decoding keeps it.
    pub(super) fn into_value(self) -> Value {
        match self {
            Leaf::Str(s) => Value::String(s.into_owned()),
            Leaf::Bool(b) => Value::Bool(b),
            Leaf::Int(n) => Value::from(n),
            Leaf::Odd(v) => v,
        }
    }
}

impl<'de> Deserialize<'de> for Leaf<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LeafVisitor)
    }
}

struct LeafVisitor;

impl<'de> Visitor<'de> for LeafVisitor {
    type Value = Leaf<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Str(Cow::Owned(s.to_string())))
    }

    fn visit_string<E>(self, s: String) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Str(Cow::Owned(s)))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Int(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Leaf<'de>, E> {
        Ok(i64::try_from(n).map_or(Leaf::Odd(Value::from(n)), Leaf::Int))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Odd(Number::from_f64(n).map_or(Value::Null, Value::Number)))
    }

    fn visit_unit<E>(self) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Odd(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Odd(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Leaf<'de>, D::Error> {
        Leaf::deserialize(d)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Leaf<'de>, A::Error> {
        PrunedVisitor(&Keep::All).visit_map(map).map(Leaf::Odd)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Leaf<'de>, A::Error> {
        PrunedVisitor(&Keep::All).visit_seq(seq).map(Leaf::Odd)
    }
}

/// The kept fields of an object of a known shape.
pub(super) trait Fields<'de>: Default {
    /// How pruned decoding keeps an object of this shape (and what it
    /// keeps of a value of any other shape found in its place).
    const KEEP: &'static Keep;

    /// Takes the value of `key` from `map`: kept when the shape keeps the
    /// key (replacing an earlier one), skipped otherwise.
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;

    /// The kept fields, as pruned decoding keeps them.
    fn into_map(self, out: &mut Map<String, Value>);
}

/// An object of shape `T`, or a value of any other shape as pruned
/// decoding keeps it in that place.
pub(super) enum Obj<T> {
    Plain(T),
    Odd(Value),
}

impl<'de, T: Fields<'de>> Obj<T> {
    /// The value as pruned decoding keeps it.
    pub(super) fn into_value(self) -> Value {
        match self {
            Obj::Plain(t) => {
                let mut out = Map::new();
                t.into_map(&mut out);
                Value::Object(out)
            }
            Obj::Odd(v) => v,
        }
    }
}

impl<'de, T: Fields<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ObjVisitor(PhantomData))
    }
}

struct ObjVisitor<T>(PhantomData<fn() -> T>);

/// A visitor's methods for the scalar shapes, which pruned decoding keeps
/// whole wherever they stand.
macro_rules! odd_shapes {
    ($wrap:path) => {
        fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
            Ok($wrap(Value::Bool(b)))
        }
        fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(n)))
        }
        fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(n)))
        }
        fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
            Ok($wrap(Number::from_f64(n).map_or(Value::Null, Value::Number)))
        }
        fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(s.to_string())))
        }
        fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(s)))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null))
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null))
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    };
}

impl<'de, T: Fields<'de>> Visitor<'de> for ObjVisitor<T> {
    type Value = Obj<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Obj<T>, A::Error> {
        let mut t = T::default();
        while let Some(key) = map.next_key_seed(Key)? {
            t.field(&key, &mut map)?;
        }
        Ok(Obj::Plain(t))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Obj<T>, A::Error> {
        PrunedVisitor(T::KEEP).visit_seq(seq).map(Obj::Odd)
    }

    odd_shapes!(Obj::Odd);
}

/// An array of objects of shape `T` (each element pruned by `T::KEEP`), or
/// a value of any other shape, kept whole as pruned decoding keeps it.
pub(super) enum Arr<T> {
    Plain(Vec<Obj<T>>),
    Odd(Value),
}

impl<'de, T: Fields<'de>> Arr<T> {
    /// The value as pruned decoding keeps it.
    pub(super) fn into_value(self) -> Value {
        match self {
            Arr::Plain(items) => Value::Array(items.into_iter().map(Obj::into_value).collect()),
            Arr::Odd(v) => v,
        }
    }
}

impl<'de, T: Fields<'de>> Deserialize<'de> for Arr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ArrVisitor(PhantomData))
    }
}

struct ArrVisitor<T>(PhantomData<fn() -> T>);

impl<'de, T: Fields<'de>> Visitor<'de> for ArrVisitor<T> {
    type Value = Arr<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Arr<T>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<Obj<T>>()? {
            items.push(item);
        }
        Ok(Arr::Plain(items))
    }

    // An object where an array belongs is kept whole, as pruned decoding
    // keeps it.
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Arr<T>, A::Error> {
        PrunedVisitor(&Keep::All).visit_map(map).map(Arr::Odd)
    }

    odd_shapes!(Arr::Odd);
}

/// A kept field's type: it gives back its part of the pruned document.
pub(super) trait Part {
    fn into_value(self) -> Value;
}

impl Part for Leaf<'_> {
    fn into_value(self) -> Value {
        Leaf::into_value(self)
    }
}

impl<'de, T: Fields<'de>> Part for Obj<T> {
    fn into_value(self) -> Value {
        Obj::into_value(self)
    }
}

impl<'de, T: Fields<'de>> Part for Arr<T> {
    fn into_value(self) -> Value {
        Arr::into_value(self)
    }
}

/// What an object keeps of the keys its shape does not name.
pub(super) trait Unnamed: Default {
    fn take<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
    fn put(self, out: &mut Map<String, Value>);
}

/// Nothing: the pruned document drops them.
#[derive(Default)]
pub(super) struct Skipped;

impl Unnamed for Skipped {
    fn take<'de, A: MapAccess<'de>>(&mut self, _: &str, map: &mut A) -> Result<(), A::Error> {
        map.next_value::<IgnoredAny>().map(drop)
    }

    fn put(self, _: &mut Map<String, Value>) {}
}

/// Every one, whole: the object is kept whole.
#[derive(Default)]
pub(super) struct Rest(Vec<(String, Value)>);

impl Unnamed for Rest {
    fn take<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let v = map.next_value::<Value>()?;
        self.0.push((key.to_string(), v));
        Ok(())
    }

    // In the order they came, so a later duplicate wins.
    fn put(self, out: &mut Map<String, Value>) {
        for (k, v) in self.0 {
            out.insert(k, v);
        }
    }
}

/// Declares an object shape: its kept keys, each an optional [`Part`]
/// (absent until the key is seen; a duplicate replaces it), and what it
/// keeps of the others ([`Unnamed`]).
macro_rules! shape {
    ($(#[$m:meta])* struct $name:ident<'de>: $keep:expr, others: $others:ty {
        $($key:literal => $field:ident: $ty:ty,)*
    }) => {
        $(#[$m])*
        #[derive(Default)]
        pub(super) struct $name<'de> {
            $($field: Option<$ty>,)*
            others: $others,
            _input: std::marker::PhantomData<&'de str>,
        }

        impl<'de> $crate::read::shape::Fields<'de> for $name<'de> {
            const KEEP: &'static $crate::read::prune::Keep = &$keep;

            fn field<A: serde::de::MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
                match key {
                    $($key => self.$field = Some(map.next_value()?),)*
                    _ => $crate::read::shape::Unnamed::take(&mut self.others, key, map)?,
                }
                Ok(())
            }

            fn into_map(self, out: &mut serde_json::Map<String, serde_json::Value>) {
                $(if let Some(v) = self.$field {
                    out.insert($key.to_string(), $crate::read::shape::Part::into_value(v));
                })*
                $crate::read::shape::Unnamed::put(self.others, out);
            }
        }
    };
}
pub(super) use shape;
