//! Typed request bodies. Each method declares its body with [`body!`] as a
//! struct whose fields are listed in the order `docs/errors.md` checks
//! them; [`parse`] reads the fields out of the parsed body in that order,
//! absent ones included (the first refusal is the first field in check
//! order that is wrong), and every refusal names its field: the envelopes
//! `missing_field` and `invalid_field` (and `text_empty`,
//! `text_too_long`, `unsupported_parse_mode` for the text fields). Fields
//! the struct does not declare are ignored, and a key given twice counts
//! once (the last), as JSON objects are parsed.
//!
//! A field is read by its type's [`FromField`] rule, one plain function
//! per type shared by every body (no code generated per body beyond the
//! calls: the host API has dozens of bodies, and the WASM module carries
//! each one):
//! - `&str`: absent or `null` → `missing_field`; not a string →
//!   `invalid_field` "must be a string".
//! - `bool`: the same, "must be a boolean".
//! - `Option<T>`: absent or `null` → `None`; else `T`'s rule.
//! - [`Patch<T>`]: absent → keep, `null` → clear, else `T`.
//! - the leaf types below ([`Text`], [`ParseMode`], [`MessageId`],
//!   [`Uint`], [`Name`], …) each carry one rule and its refusal's text, as
//!   in "field limit must be an integer from 0 to 100".

use crate::error::{ApiError, ApiResult};
use crate::rules::{limits, names};
use serde_json::Value;

pub use super::params::Body;

/// Reads the typed body `T` out of a parsed body.
pub fn parse<'a, T: ReadBody<'a>>(body: &'a Body) -> ApiResult<T> {
    T::read(body)
}

/// A body declared with [`body!`]: its fields read in declaration order.
pub trait ReadBody<'a>: Sized {
    fn read(body: &'a Body) -> ApiResult<Self>;
}

/// Declares a typed body: the struct, and its [`ReadBody`] that reads each
/// field by its name (or the `as "key"` given) in declaration order.
macro_rules! body {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? {
            $($(#[$fattr:meta])* $fvis:vis $field:ident $(as $key:literal)? : $ty:ty),* $(,)?
        }
    ) => {
        $(#[$attr])*
        $vis struct $name $(<$lt>)? {
            $($(#[$fattr])* $fvis $field: $ty),*
        }

        impl<'a> $crate::methods::requests::ReadBody<'a> for $name $(<$lt>)? {
            fn read(b: &'a $crate::methods::params::Body) -> $crate::error::ApiResult<Self> {
                Ok($name {
                    $($field: $crate::methods::requests::field(b, body!(@key $field $($key)?))?),*
                })
            }
        }
    };
    (@key $field:ident $key:literal) => { $key };
    (@key $field:ident) => { stringify!($field) };
}
pub(crate) use body;

/// Reads the field `name` of the body by `T`'s rule.
pub fn field<'a, T: FromField<'a>>(body: &'a Body, name: &'static str) -> ApiResult<T> {
    T::from_field(Field { name, value: body.get(name) })
}

/// One field of a body: its name, and its value (`None`: absent).
#[derive(Clone, Copy)]
pub struct Field<'a> {
    pub name: &'static str,
    pub value: Option<&'a Value>,
}

impl<'a> Field<'a> {
    pub fn missing(self) -> ApiError {
        ApiError::missing_field(self.name)
    }

    pub fn invalid(self, why: &str) -> ApiError {
        ApiError::invalid_field(self.name, why)
    }

    /// The value, or `missing_field` when it is absent or `null`.
    pub fn present(self) -> ApiResult<&'a Value> {
        match self.value {
            None | Some(Value::Null) => Err(self.missing()),
            Some(v) => Ok(v),
        }
    }

    /// The string, or the refusals of a required string field.
    pub fn string(self) -> ApiResult<&'a str> {
        match self.present()? {
            Value::String(s) => Ok(s),
            _ => Err(self.invalid("must be a string")),
        }
    }

    /// The elements of an array, each read as a string; `why` refuses a
    /// value that is no array or an element that is no string.
    pub fn strings(self, why: &str) -> ApiResult<Vec<&'a str>> {
        match self.present()? {
            Value::Array(a) => a.iter().map(|v| v.as_str().ok_or_else(|| self.invalid(why))).collect(),
            _ => Err(self.invalid(why)),
        }
    }

    /// A non-negative integer, as JSON numbers of any form are read
    /// (`None` for a negative one, a fraction or a value that is no number).
    fn unsigned(self) -> ApiResult<Option<u64>> {
        Ok(self.present()?.as_number().and_then(|n| n.as_u64()))
    }
}

/// How a field of one type is read.
pub trait FromField<'a>: Sized {
    fn from_field(f: Field<'a>) -> ApiResult<Self>;
}

impl<'a> FromField<'a> for &'a str {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        f.string()
    }
}

impl<'a> FromField<'a> for bool {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        match f.present()? {
            Value::Bool(b) => Ok(*b),
            _ => Err(f.invalid("must be a boolean")),
        }
    }
}

impl<'a, T: FromField<'a>> FromField<'a> for Option<T> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        match f.value {
            None | Some(Value::Null) => Ok(None),
            Some(_) => T::from_field(f).map(Some),
        }
    }
}

/// An array of strings, each element by the string rule.
impl<'a> FromField<'a> for Vec<&'a str> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        match f.present()? {
            Value::Array(a) => a.iter().map(|v| Field { name: f.name, value: Some(v) }.string()).collect(),
            _ => Err(f.invalid("must be an array")),
        }
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

impl<'a, T: FromField<'a>> FromField<'a> for Patch<T> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        match f.value {
            None => Ok(Patch::Keep),
            Some(Value::Null) => Ok(Patch::Clear),
            Some(_) => T::from_field(f).map(Patch::Set),
        }
    }
}

/// `text`: a string of 1 to [`limits::MAX_TEXT_CHARS`] characters
/// (`text_empty`, `text_too_long`).
#[derive(Debug, Clone, Copy)]
pub struct Text<'a>(pub &'a str);

impl<'a> FromField<'a> for Text<'a> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        let s = f.string()?;
        limits::text(s)?;
        Ok(Text(s))
    }
}

/// `parse_mode`: absent, `null` or `plain` (`unsupported_parse_mode`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ParseMode;

impl<'a> FromField<'a> for ParseMode {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        match f.value {
            None | Some(Value::Null) => Ok(ParseMode),
            Some(Value::String(s)) => limits::parse_mode(s).map(|()| ParseMode),
            Some(_) => Err(ApiError::unsupported_parse_mode()),
        }
    }
}

/// A message id: a decimal string ("1", "2", …); a JSON integer is
/// accepted too, as Telegram clients send one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageId(pub i64);

const MESSAGE_ID_WHY: &str = "must be a message id: a decimal string such as \"1\"";

impl<'a> FromField<'a> for MessageId {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        let id = match f.present()? {
            Value::String(s) => limits::message_id_str(s),
            Value::Number(n) => n.as_i64().filter(|v| *v >= 1),
            _ => None,
        };
        id.map(MessageId).ok_or_else(|| f.invalid(MESSAGE_ID_WHY))
    }
}

/// A message id, or `0` / `"0"` for "from the start" (`None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageIdOrZero(pub Option<i64>);

impl<'a> FromField<'a> for MessageIdOrZero {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        let id = match f.present()? {
            Value::String(s) if s == "0" => Some(None),
            Value::String(s) => limits::message_id_str(s).map(Some),
            Value::Number(n) => n.as_u64().and_then(|v| i64::try_from(v).ok()).map(|v| (v != 0).then_some(v)),
            _ => None,
        };
        id.map(MessageIdOrZero).ok_or_else(|| f.invalid(MESSAGE_ID_WHY))
    }
}

/// A non-negative integer no larger than `MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uint<const MAX: u64>(pub u64);

impl<'a, const MAX: u64> FromField<'a> for Uint<MAX> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        uint(f, MAX).map(Uint)
    }
}

/// [`Uint`]'s rule, once for every `MAX`.
fn uint(f: Field<'_>, max: u64) -> ApiResult<u64> {
    match f.unsigned()? {
        Some(v) if v <= max => Ok(v),
        _ => Err(f.invalid(&format!("must be an integer from 0 to {max}"))),
    }
}

/// A short human-readable name of 1 to `MAX` characters, without the
/// characters [`names::display`] refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Name<'a, const MAX: usize>(pub &'a str);

impl<'a, const MAX: usize> FromField<'a> for Name<'a, MAX> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        name(f, MAX).map(Name)
    }
}

/// [`Name`]'s rule, once for every `MAX`.
fn name(f: Field<'_>, max: usize) -> ApiResult<&str> {
    let s = f.string()?;
    names::display(s, max).map_err(|why| f.invalid(&why))?;
    Ok(s)
}

/// A user's or bot's handle: [`names::handle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle<'a>(pub &'a str);

impl<'a> FromField<'a> for Handle<'a> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        let s = f.string()?;
        names::handle(s).map_err(|why| f.invalid(&why))?;
        Ok(Handle(s))
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

impl<'a, R: Bounds> FromField<'a> for Bounded<R> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        match f.unsigned()? {
            Some(v) if (R::MIN..=R::MAX).contains(&v) => Ok(Bounded(v, std::marker::PhantomData)),
            _ => Err(f.invalid(R::WHY)),
        }
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

impl<'a, C: Choices> FromField<'a> for Choice<C> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        C::parse(f.string()?).map(Choice).ok_or_else(|| f.invalid(C::WHY))
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

impl<'a, W: Why> FromField<'a> for Strings<'a, W> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        f.strings(W::WHY).map(|v| Strings(v, std::marker::PhantomData))
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

impl<'a, W: ByteBounds> FromField<'a> for Bytes<'a, W> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        match f.present()? {
            Value::String(s) if (W::MIN..=W::MAX).contains(&s.len()) => Ok(Bytes(s, std::marker::PhantomData)),
            _ => Err(f.invalid(W::WHY)),
        }
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

impl<'a, W: NumberBounds> FromField<'a> for Number<W> {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        let v = match f.present()? {
            // Read as the integer it is when it is one (a u64 or i64
            // converts exactly as far as f64 can hold it).
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => u as f64,
                (None, Some(i)) => i as f64,
                _ => n.as_f64().unwrap_or(f64::NAN),
            },
            _ => f64::NAN,
        };
        if (W::MIN..=W::MAX).contains(&v) {
            Ok(Number(v, std::marker::PhantomData))
        } else {
            Err(f.invalid(W::WHY))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(s: &str) -> Body {
        serde_json::from_str(s).unwrap()
    }

    fn err<'a, T: ReadBody<'a> + std::fmt::Debug>(b: &'a Body) -> (String, String, String) {
        let e = parse::<T>(b).unwrap_err();
        let field = e.parameters.as_ref().and_then(|p| p.get("field")).and_then(|v| v.as_str()).unwrap_or("");
        (e.code.as_str().to_string(), field.to_string(), e.description)
    }

    body! {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Send<'a> {
            chat_id: &'a str,
            text: Text<'a>,
            parse_mode: ParseMode,
            reply_to_message_id: Option<MessageId>,
        }
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

    body! {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Update<'a> {
            handle: Option<Name<'a, 4>>,
            avatar_key: Patch<&'a str>,
            limit: Option<Uint<10>>,
            flag: Option<bool>,
            ids: Option<Vec<&'a str>>,
        }
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

body! {
    /// A body that names a chat, read before the method's other fields
    /// when the chat is looked up first.
    pub struct ChatIdBody<'a> {
        pub chat_id: &'a str,
    }
}

body! {
    /// A body that names a bot, read as [`ChatIdBody`].
    pub struct BotIdBody<'a> {
        pub bot_id: &'a str,
    }
}
