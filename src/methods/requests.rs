//! Typed request bodies. Each method declares its body as a
//! `#[derive(Deserialize)]` struct whose fields are listed in the order
//! `docs/errors.md` checks them; [`parse`] reads the struct out of the
//! parsed body and turns serde's errors into the envelopes of the
//! interface: `missing_field` and `invalid_field` with the field named
//! (and `text_empty`, `text_too_long`, `unsupported_parse_mode` for the
//! text fields).
//!
//! serde alone would not keep those envelopes: a derived struct checks
//! fields in the order the JSON lists them and says nothing of which field
//! an error is about. So the body is read through [`Fields`], a
//! deserializer that hands the struct its declared fields one by one, in
//! declaration order, absent ones included (the first refusal is the
//! first field in check order that is wrong), and names the field in
//! every error. Fields the struct does not declare are ignored, and a key
//! given twice counts once (the last), as JSON objects are parsed.
//!
//! How each JSON shape reads:
//! - `&str`: absent or `null` → `missing_field`; not a string →
//!   `invalid_field` "must be a string".
//! - `bool`: the same, "must be a boolean".
//! - `Option<T>`: absent or `null` → `None`; else `T`'s rule.
//! - [`Patch<T>`]: absent → keep, `null` → clear, else `T`.
//! - the leaf types below ([`Text`], [`ParseMode`], [`MessageId`],
//!   [`Uint`], [`Name`], …) each carry one rule; a refusal's text is the
//!   visitor's `expecting`, as in "field limit must be an integer from 0
//!   to 100".

use crate::error::{ApiError, ApiResult};
use crate::rules::{limits, names};
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

pub use super::params::Body;

/// Reads the typed body `T` out of a parsed body.
pub fn parse<'a, T: Deserialize<'a>>(body: &'a Body) -> ApiResult<T> {
    T::deserialize(Fields(body)).map_err(FieldError::into_api)
}

/// A refusal while reading a field: the envelope itself, or the `why` of
/// an `invalid_field` whose field is named on the way out of
/// [`FieldDe`].
#[derive(Debug)]
pub struct FieldError(Refusal);

#[derive(Debug)]
enum Refusal {
    Api(Box<ApiError>),
    Why(String),
}

impl FieldError {
    fn api(e: ApiError) -> Self {
        FieldError(Refusal::Api(Box::new(e)))
    }

    /// Names `field` in a refusal that does not name one yet.
    fn at(self, field: &str) -> Self {
        match self.0 {
            Refusal::Why(why) => FieldError::api(ApiError::invalid_field(field, &why)),
            api => FieldError(api),
        }
    }

    fn into_api(self) -> ApiError {
        match self.0 {
            Refusal::Api(e) => *e,
            // Only a struct-level error has no field: never raised by the
            // types of this module.
            Refusal::Why(why) => ApiError::invalid_request(&why),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Refusal::Api(e) => f.write_str(&e.description),
            Refusal::Why(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for FieldError {}

impl de::Error for FieldError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        FieldError(Refusal::Why(msg.to_string()))
    }

    /// The visitor's `expecting` is the refusal's text.
    fn invalid_type(_: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        FieldError(Refusal::Why(exp.to_string()))
    }

    fn invalid_value(_: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        FieldError(Refusal::Why(exp.to_string()))
    }

    fn missing_field(field: &'static str) -> Self {
        FieldError::api(ApiError::missing_field(field))
    }
}

/// The body as a deserializer of structs: each declared field in turn.
pub struct Fields<'a>(&'a Body);

impl<'de> Deserializer<'de> for Fields<'de> {
    type Error = FieldError;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        visitor.visit_map(Declared { body: self.0, fields: fields.iter(), index: 0, next: None })
    }

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        // A struct with no fields: every body object is one.
        self.deserialize_struct("", &[], visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

struct Declared<'a> {
    body: &'a Body,
    fields: std::slice::Iter<'static, &'static str>,
    /// The position of the next field in `fields`.
    index: u64,
    next: Option<&'static str>,
}

impl<'de> MapAccess<'de> for Declared<'de> {
    type Error = FieldError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, FieldError> {
        let Some(name) = self.fields.next() else { return Ok(None) };
        self.next = Some(name);
        // The key goes to the struct as its position, not its name: a
        // derived struct then picks the field with one jump, and the
        // compiled code carries no chain of name comparisons per struct.
        let index = self.index;
        self.index += 1;
        seed.deserialize(IntoDeserializer::<FieldError>::into_deserializer(index)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, FieldError> {
        let name = self.next.take().unwrap_or("");
        seed.deserialize(FieldDe { name, value: self.body.get(name) }).map_err(|e| e.at(name))
    }
}

/// One field's value (`None`: absent), read by the rules of this module.
pub struct FieldDe<'a> {
    name: &'static str,
    value: Option<&'a Value>,
}

/// Newtype names through which a leaf type asks [`FieldDe`] for a rule
/// with its own error code.
const TEXT: &str = "$botspace::Text";
const PARSE_MODE: &str = "$botspace::ParseMode";

impl<'de> FieldDe<'de> {
    fn missing(&self) -> FieldError {
        FieldError::api(ApiError::missing_field(self.name))
    }

    fn invalid(&self, why: &str) -> FieldError {
        FieldError::api(ApiError::invalid_field(self.name, why))
    }

    /// The string, or the errors of a required string field.
    fn string(&self) -> Result<&'de str, FieldError> {
        match self.value {
            None | Some(Value::Null) => Err(self.missing()),
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(self.invalid("must be a string")),
        }
    }
}

impl<'de> Deserializer<'de> for FieldDe<'de> {
    type Error = FieldError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        let name = self.name;
        let out = match self.value {
            None | Some(Value::Null) => return Err(self.missing()),
            Some(Value::Bool(b)) => visitor.visit_bool(*b),
            Some(Value::Number(n)) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Some(Value::String(s)) => visitor.visit_borrowed_str(s),
            Some(Value::Array(a)) => visitor.visit_seq(Elements { name, items: a.iter() }),
            Some(Value::Object(_)) => Err(de::Error::invalid_type(de::Unexpected::Map, &visitor)),
        };
        out.map_err(|e| e.at(name))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        let s = self.string()?;
        visitor.visit_borrowed_str::<FieldError>(s).map_err(|e| e.at(self.name))
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        match self.value {
            None | Some(Value::Null) => Err(self.missing()),
            Some(Value::Bool(b)) => visitor.visit_bool::<FieldError>(*b).map_err(|e| e.at(self.name)),
            Some(_) => Err(self.invalid("must be a boolean")),
        }
    }

    /// Absent is `visit_none`, `null` is `visit_unit`: both are `None` to
    /// an `Option`, and [`Patch`] tells them apart.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        let name = self.name;
        match self.value {
            None => visitor.visit_none(),
            Some(Value::Null) => visitor.visit_unit(),
            Some(_) => visitor.visit_some(self),
        }
        .map_err(|e| e.at(name))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        match name {
            TEXT => {
                let s = self.string()?;
                limits::text(s).map_err(FieldError::api)?;
                visitor.visit_borrowed_str(s)
            }
            PARSE_MODE => match self.value {
                None | Some(Value::Null) => visitor.visit_unit(),
                Some(Value::String(s)) => {
                    limits::parse_mode(s).map_err(FieldError::api)?;
                    visitor.visit_unit()
                }
                Some(_) => Err(FieldError::api(ApiError::unsupported_parse_mode())),
            },
            _ => visitor.visit_newtype_struct(self),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char
        bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct enum identifier
    }
}

/// The elements of an array field, each read under the field's name.
struct Elements<'a> {
    name: &'static str,
    items: std::slice::Iter<'a, Value>,
}

impl<'de> SeqAccess<'de> for Elements<'de> {
    type Error = FieldError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, FieldError> {
        match self.items.next() {
            None => Ok(None),
            Some(v) => seed.deserialize(FieldDe { name: self.name, value: Some(v) }).map(Some),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// A field the update methods change only when given: absent keeps the
/// stored value, `null` clears it, a value sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Patch<T> {
    #[default]
    Keep,
    Clear,
    Set(T),
}

impl<T> Patch<T> {
    /// `None` to keep, `Some(None)` to clear, `Some(Some(v))` to set.
    pub fn change(self) -> Option<Option<T>> {
        match self {
            Patch::Keep => None,
            Patch::Clear => Some(None),
            Patch::Set(v) => Some(Some(v)),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Patch<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a value or null")
            }
            fn visit_none<E: de::Error>(self) -> Result<Patch<T>, E> {
                Ok(Patch::Keep)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Patch<T>, E> {
                Ok(Patch::Clear)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Patch<T>, D::Error> {
                T::deserialize(d).map(Patch::Set)
            }
        }
        d.deserialize_option(V(std::marker::PhantomData))
    }
}

/// `text`: a string of 1 to [`limits::MAX_TEXT_CHARS`] characters
/// (`text_empty`, `text_too_long`).
#[derive(Debug, Clone, Copy)]
pub struct Text<'a>(pub &'a str);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = &'de str;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("must be a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<&'de str, E> {
                Ok(s)
            }
        }
        d.deserialize_newtype_struct(TEXT, V).map(Text)
    }
}

/// `parse_mode`: absent, `null` or `plain` (`unsupported_parse_mode`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ParseMode;

impl<'de> Deserialize<'de> for ParseMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ParseMode;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("must be plain")
            }
            fn visit_unit<E: de::Error>(self) -> Result<ParseMode, E> {
                Ok(ParseMode)
            }
        }
        d.deserialize_newtype_struct(PARSE_MODE, V)
    }
}

/// A message id: a decimal string ("1", "2", …); a JSON integer is
/// accepted too, as Telegram clients send one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageId(pub i64);

const MESSAGE_ID_WHY: &str = "must be a message id: a decimal string such as \"1\"";

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = MessageId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(MESSAGE_ID_WHY)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<MessageId, E> {
                limits::message_id_str(s).map(MessageId).ok_or_else(|| E::custom(MESSAGE_ID_WHY))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<MessageId, E> {
                match i64::try_from(v) {
                    Ok(v) if v >= 1 => Ok(MessageId(v)),
                    _ => Err(E::custom(MESSAGE_ID_WHY)),
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<MessageId, E> {
                if v >= 1 {
                    Ok(MessageId(v))
                } else {
                    Err(E::custom(MESSAGE_ID_WHY))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A message id, or `0` / `"0"` for "from the start" (`None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageIdOrZero(pub Option<i64>);

impl<'de> Deserialize<'de> for MessageIdOrZero {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = MessageIdOrZero;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(MESSAGE_ID_WHY)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<MessageIdOrZero, E> {
                if s == "0" {
                    return Ok(MessageIdOrZero(None));
                }
                limits::message_id_str(s).map(|v| MessageIdOrZero(Some(v))).ok_or_else(|| E::custom(MESSAGE_ID_WHY))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<MessageIdOrZero, E> {
                match i64::try_from(v) {
                    Ok(0) => Ok(MessageIdOrZero(None)),
                    Ok(v) => Ok(MessageIdOrZero(Some(v))),
                    _ => Err(E::custom(MESSAGE_ID_WHY)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A non-negative integer no larger than `MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uint<const MAX: u64>(pub u64);

struct UintVisitor(u64);

impl Visitor<'_> for UintVisitor {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "must be an integer from 0 to {}", self.0)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        if v <= self.0 {
            Ok(v)
        } else {
            Err(E::invalid_value(de::Unexpected::Unsigned(v), &self))
        }
    }
}

impl<'de, const MAX: u64> Deserialize<'de> for Uint<MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UintVisitor(MAX)).map(Uint)
    }
}

/// A short human-readable name of 1 to `MAX` characters, without the
/// characters [`names::display`] refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Name<'a, const MAX: usize>(pub &'a str);

impl<'de: 'a, 'a, const MAX: usize> Deserialize<'de> for Name<'a, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const MAX: usize>;
        impl<'de, const MAX: usize> Visitor<'de> for V<MAX> {
            type Value = &'de str;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("must be a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<&'de str, E> {
                names::display(s, MAX).map(|()| s).map_err(E::custom)
            }
        }
        d.deserialize_str(V::<MAX>).map(Name)
    }
}

/// A user's or bot's handle: [`names::handle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle<'a>(pub &'a str);

impl<'de: 'a, 'a> Deserialize<'de> for Handle<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = &'de str;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("must be a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<&'de str, E> {
                names::handle(s).map(|()| s).map_err(E::custom)
            }
        }
        d.deserialize_str(V).map(Handle)
    }
}

/// An integer within the bounds of `R`, every refusal saying `R::WHY`
/// (for fields whose rule is one sentence, such as getUpdates' `offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded<R>(pub u64, pub std::marker::PhantomData<R>);

/// The bounds and the refusal's text of a [`Bounded`] field.
pub trait Bounds {
    const MIN: u64;
    const MAX: u64;
    const WHY: &'static str;
}

impl<'de, R: Bounds> Deserialize<'de> for Bounded<R> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<R>(std::marker::PhantomData<R>);
        impl<R: Bounds> Visitor<'_> for V<R> {
            type Value = u64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(R::WHY)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
                if (R::MIN..=R::MAX).contains(&v) {
                    Ok(v)
                } else {
                    Err(E::custom(R::WHY))
                }
            }
        }
        d.deserialize_any(V::<R>(std::marker::PhantomData)).map(|v| Bounded(v, std::marker::PhantomData))
    }
}

/// A string naming one of a fixed list, `C::WHY` otherwise (a value that
/// is not a string "must be a string", as every string field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice<C>(pub C);

/// The values of a [`Choice`] field.
pub trait Choices: Sized + Copy {
    const WHY: &'static str;
    fn parse(s: &str) -> Option<Self>;
}

impl<'de, C: Choices> Deserialize<'de> for Choice<C> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<C>(std::marker::PhantomData<C>);
        impl<C: Choices> Visitor<'_> for V<C> {
            type Value = C;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("must be a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<C, E> {
                C::parse(s).ok_or_else(|| E::custom(C::WHY))
            }
        }
        d.deserialize_str(V::<C>(std::marker::PhantomData)).map(Choice)
    }
}

/// An array of strings, every refusal (not an array, an element not a
/// string) saying `W::WHY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strings<'a, W>(pub Vec<&'a str>, pub std::marker::PhantomData<W>);

/// The refusal's text of a field read by one rule.
pub trait Why {
    const WHY: &'static str;
}

impl<'de: 'a, 'a, W: Why> Deserialize<'de> for Strings<'a, W> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<W>(std::marker::PhantomData<W>);
        impl<'de, W: Why> Visitor<'de> for V<W> {
            type Value = Vec<&'de str>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(W::WHY)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<&'de str>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                loop {
                    match seq.next_element::<&'de str>() {
                        Ok(Some(s)) => out.push(s),
                        Ok(None) => return Ok(out),
                        Err(_) => return Err(de::Error::custom(W::WHY)),
                    }
                }
            }
        }
        d.deserialize_any(V::<W>(std::marker::PhantomData)).map(|v| Strings(v, std::marker::PhantomData))
    }
}

/// A string of bytes within `W`'s bounds, every refusal saying `W::WHY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes<'a, W>(pub &'a str, pub std::marker::PhantomData<W>);

/// The length bounds (bytes) and the refusal's text of a [`Bytes`] field.
pub trait ByteBounds {
    const MIN: usize;
    const MAX: usize;
    const WHY: &'static str;
}

impl<'de: 'a, 'a, W: ByteBounds> Deserialize<'de> for Bytes<'a, W> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<W>(std::marker::PhantomData<W>);
        impl<'de, W: ByteBounds> Visitor<'de> for V<W> {
            type Value = &'de str;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(W::WHY)
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<&'de str, E> {
                if (W::MIN..=W::MAX).contains(&s.len()) {
                    Ok(s)
                } else {
                    Err(E::custom(W::WHY))
                }
            }
        }
        d.deserialize_any(V::<W>(std::marker::PhantomData)).map(|v| Bytes(v, std::marker::PhantomData))
    }
}

/// A number (integer or not) within `W`'s bounds, every refusal saying
/// `W::WHY`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Number<W>(pub f64, pub std::marker::PhantomData<W>);

/// The bounds and the refusal's text of a [`Number`] field.
pub trait NumberBounds {
    const MIN: f64;
    const MAX: f64;
    const WHY: &'static str;
}

impl<'de, W: NumberBounds> Deserialize<'de> for Number<W> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<W>(std::marker::PhantomData<W>);
        impl<W: NumberBounds> Visitor<'_> for V<W> {
            type Value = f64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(W::WHY)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
                if (W::MIN..=W::MAX).contains(&v) {
                    Ok(v)
                } else {
                    Err(E::custom(W::WHY))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
                self.visit_f64(v as f64)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
                self.visit_f64(v as f64)
            }
        }
        d.deserialize_any(V::<W>(std::marker::PhantomData)).map(|v| Number(v, std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(s: &str) -> Body {
        serde_json::from_str(s).unwrap()
    }

    fn err<'a, T: Deserialize<'a> + fmt::Debug>(b: &'a Body) -> (String, String, String) {
        let e = parse::<T>(b).unwrap_err();
        let field = e.parameters.as_ref().and_then(|p| p.get("field")).and_then(|v| v.as_str()).unwrap_or("");
        (e.code.as_str().to_string(), field.to_string(), e.description)
    }

    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Send<'a> {
        chat_id: &'a str,
        text: Text<'a>,
        parse_mode: ParseMode,
        reply_to_message_id: Option<MessageId>,
    }

    #[test]
    fn fields_are_checked_in_declared_order_not_json_order() {
        let b = body(r#"{"reply_to_message_id":"x","parse_mode":"html","text":"","chat_id":5}"#);
        assert_eq!(err::<Send>(&b).0, "invalid_field");
        assert_eq!(err::<Send>(&b).1, "chat_id");
        let b = body(r#"{"reply_to_message_id":"x","parse_mode":"html","text":""}"#);
        assert_eq!(err::<Send>(&b), ("missing_field".into(), "chat_id".into(), "field chat_id is required".into()));
        let b = body(r#"{"reply_to_message_id":"x","parse_mode":"html","text":"","chat_id":"c"}"#);
        assert_eq!(err::<Send>(&b).0, "text_empty");
        let b = body(r#"{"reply_to_message_id":"x","parse_mode":"html","text":"a","chat_id":"c"}"#);
        assert_eq!(err::<Send>(&b).0, "unsupported_parse_mode");
        let b = body(r#"{"reply_to_message_id":"0","parse_mode":null,"text":"a","chat_id":"c"}"#);
        assert_eq!(
            err::<Send>(&b),
            (
                "invalid_field".into(),
                "reply_to_message_id".into(),
                "field reply_to_message_id must be a message id: a decimal string such as \"1\"".into()
            )
        );
        let b = body(r#"{"reply_to_message_id":7,"parse_mode":"plain","text":"a","chat_id":"c","x":[1]}"#);
        let s = parse::<Send>(&b).unwrap();
        assert_eq!((s.chat_id, s.text.0, s.reply_to_message_id), ("c", "a", Some(MessageId(7))));
    }

    #[test]
    fn null_is_absent_and_types_are_exact() {
        let b = body(r#"{"chat_id":null,"text":"a"}"#);
        assert_eq!(err::<Send>(&b).0, "missing_field");
        let b = body(r#"{"chat_id":"c","text":5}"#);
        assert_eq!(err::<Send>(&b), ("invalid_field".into(), "text".into(), "field text must be a string".into()));
        let b = body(r#"{"chat_id":"c","text":"a","parse_mode":1}"#);
        assert_eq!(err::<Send>(&b).0, "unsupported_parse_mode");
        for id in [r#""1.0""#, "1.0", "-1", "0", r#""""#, "true", "[1]", "{}", r#""1234567890123456789""#] {
            let s = format!(r#"{{"chat_id":"c","text":"a","reply_to_message_id":{id}}}"#);
            let b = body(&s);
            assert_eq!(err::<Send>(&b).1, "reply_to_message_id", "{id}");
        }
    }

    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Update<'a> {
        #[serde(borrow)]
        handle: Option<Name<'a, 4>>,
        avatar_key: Patch<&'a str>,
        limit: Option<Uint<10>>,
        flag: Option<bool>,
        ids: Option<Vec<&'a str>>,
    }

    #[test]
    fn leaves_say_their_rule() {
        let b = body(r#"{"handle":"abcde"}"#);
        assert_eq!(err::<Update>(&b).2, "field handle must be 1 to 4 characters");
        let b = body(r#"{"handle":3}"#);
        assert_eq!(err::<Update>(&b).2, "field handle must be a string");
        for l in ["11", "-1", "1.5", r#""1""#] {
            let s = format!(r#"{{"limit":{l}}}"#);
            let b = body(&s);
            assert_eq!(err::<Update>(&b).2, "field limit must be an integer from 0 to 10", "{l}");
        }
        let b = body(r#"{"flag":"yes"}"#);
        assert_eq!(err::<Update>(&b).2, "field flag must be a boolean");
        let b = body(r#"{"ids":["a",1]}"#);
        assert_eq!(err::<Update>(&b).2, "field ids must be a string");
        let b = body(r#"{}"#);
        assert_eq!(parse::<Update>(&b).unwrap().avatar_key, Patch::Keep);
        let b = body(r#"{"avatar_key":null,"limit":10,"ids":["a","b"]}"#);
        let u = parse::<Update>(&b).unwrap();
        assert_eq!((u.avatar_key, u.limit, u.ids), (Patch::Clear, Some(Uint(10)), Some(vec!["a", "b"])));
        let b = body(r#"{"avatar_key":"k"}"#);
        assert_eq!(parse::<Update>(&b).unwrap().avatar_key, Patch::Set("k"));
    }
}

/// Bodies that name one thing, read before the method's other fields
/// when the thing is looked up first.
#[derive(Deserialize)]
pub struct ChatIdBody<'a> {
    pub chat_id: &'a str,
}

#[derive(Deserialize)]
pub struct BotIdBody<'a> {
    pub bot_id: &'a str,
}
