//! Values in and out of a statement, for both stores: parameters
//! ([`Val`], [`ToVal`], [`Params`], `params!`) and result rows ([`Row`],
//! [`FromCol`], and how a PostgreSQL column reads as those types). The
//! backends and the tables' modules use them; they sit below both.

use super::error::{StoreError, StoreResult};

/// How a deferred write (`Stmt::defer`) may end.
#[derive(Debug, Clone, Copy)]
pub struct Deferral {
    /// The rows it must change, else the transaction fails with
    /// `StoreError::Inconsistent(what)`: checked in a round trip of
    /// its own before anything can commit.
    pub expect: Option<usize>,
    /// It may wait for rows another transaction holds (else it touches only
    /// rows this transaction locked already, or new rows nobody else can
    /// hold): it goes out before a COMMIT is sent without the lock (see
    /// `Conn::send_waiting_writes`).
    // Only a database server defers; SQLite runs every write at once.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub waits: bool,
    /// It counts in `Conn::total_changes` (SQLite counts every change
    /// itself): a write that creates a row meaning "nothing yet" does not,
    /// so a request refused after it still counts as having written
    /// nothing.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub counted: bool,
    pub what: &'static str,
}

impl Deferral {
    /// A write on rows the transaction holds.
    pub const fn on_held_rows(what: &'static str) -> Deferral {
        Deferral { expect: None, waits: false, counted: true, what }
    }

    /// A write that may wait for another transaction.
    pub const fn waits(what: &'static str) -> Deferral {
        Deferral { expect: None, waits: true, counted: true, what }
    }

    /// A write that may wait, and must change `n` rows.
    pub const fn changing(n: usize, what: &'static str) -> Deferral {
        Deferral { expect: Some(n), waits: true, counted: true, what }
    }

    /// This write, not counted in `Conn::total_changes`.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub const fn uncounted(self) -> Deferral {
        Deferral { counted: false, ..self }
    }
}

/// A parameter value, borrowed from the caller.
#[derive(Debug, Clone, Copy)]
pub enum Val<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// Anything that binds as a parameter.
pub trait ToVal {
    fn to_val(&self) -> Val<'_>;
}

impl ToVal for Val<'_> {
    fn to_val(&self) -> Val<'_> {
        *self
    }
}
impl ToVal for i64 {
    fn to_val(&self) -> Val<'_> {
        Val::Int(*self)
    }
}
impl ToVal for u32 {
    fn to_val(&self) -> Val<'_> {
        Val::Int(i64::from(*self))
    }
}
impl ToVal for bool {
    fn to_val(&self) -> Val<'_> {
        Val::Int(i64::from(*self))
    }
}
impl ToVal for str {
    fn to_val(&self) -> Val<'_> {
        Val::Text(self)
    }
}
impl ToVal for String {
    fn to_val(&self) -> Val<'_> {
        Val::Text(self)
    }
}
impl ToVal for [u8] {
    fn to_val(&self) -> Val<'_> {
        Val::Blob(self)
    }
}
impl ToVal for Vec<u8> {
    fn to_val(&self) -> Val<'_> {
        Val::Blob(self)
    }
}
impl<const N: usize> ToVal for [u8; N] {
    fn to_val(&self) -> Val<'_> {
        Val::Blob(self)
    }
}
impl<T: ToVal + ?Sized> ToVal for &T {
    fn to_val(&self) -> Val<'_> {
        (**self).to_val()
    }
}
impl<T: ToVal> ToVal for Option<T> {
    fn to_val(&self) -> Val<'_> {
        self.as_ref().map_or(Val::Null, ToVal::to_val)
    }
}

/// A statement's parameters: `()`, an array of values, or `params![...]`.
pub trait Params {
    fn bind<R>(&self, f: impl FnOnce(&[Val<'_>]) -> R) -> R;
}

impl Params for () {
    fn bind<R>(&self, f: impl FnOnce(&[Val<'_>]) -> R) -> R {
        f(&[])
    }
}

impl Params for &[Val<'_>] {
    fn bind<R>(&self, f: impl FnOnce(&[Val<'_>]) -> R) -> R {
        f(self)
    }
}

impl<T: ToVal, const N: usize> Params for [T; N] {
    fn bind<R>(&self, f: impl FnOnce(&[Val<'_>]) -> R) -> R {
        let vals: [Val<'_>; N] = std::array::from_fn(|i| self[i].to_val());
        f(&vals)
    }
}

/// Positional parameters of mixed types: `params![id, n, blob]`.
#[macro_export]
#[doc(hidden)]
macro_rules! params {
    ($($x:expr),* $(,)?) => {
        [$($crate::store::ToVal::to_val(&$x)),*]
    };
}

/// A column value the code reads.
pub trait FromCol: Sized {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> StoreResult<Self>;
    #[cfg(feature = "postgres")]
    fn from_pg(r: &::postgres::Row, i: usize) -> StoreResult<Self>;
}

macro_rules! from_col_via {
    ($($t:ty),*) => {$(
        impl FromCol for $t {
            fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> StoreResult<Self> {
                Ok(r.get(i)?)
            }
            #[cfg(feature = "postgres")]
            fn from_pg(r: &::postgres::Row, i: usize) -> StoreResult<Self> {
                pg_get(r, i)
            }
        }
    )*};
}
from_col_via!(i64, bool, u32, String, Vec<u8>, Option<i64>, Option<bool>, Option<u32>, Option<String>, Option<Vec<u8>>);

/// One result row.
pub enum Row<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    #[cfg(feature = "postgres")]
    Pg(&'a ::postgres::Row),
}

impl Row<'_> {
    /// Column `i` (from 0).
    pub fn get<T: FromCol>(&self, i: usize) -> StoreResult<T> {
        match self {
            Row::Sqlite(r) => T::from_sqlite(r, i),
            #[cfg(feature = "postgres")]
            Row::Pg(r) => T::from_pg(r, i),
        }
    }

    /// Column `i` as text, borrowed from the row (no copy).
    pub fn get_str(&self, i: usize) -> StoreResult<&str> {
        match self {
            Row::Sqlite(r) => r.get_ref(i)?.as_str().map_err(|_| StoreError::Type(i)),
            #[cfg(feature = "postgres")]
            Row::Pg(r) => r.try_get::<_, &str>(i).map_err(|_| StoreError::Type(i)),
        }
    }
}

impl rusqlite::ToSql for Val<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match *self {
            Val::Null => ValueRef::Null,
            Val::Int(i) => ValueRef::Integer(i),
            Val::Text(t) => ValueRef::Text(t.as_bytes()),
            Val::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

#[cfg(feature = "postgres")]
/// A column as the type the code reads; integers widen, flags are 0/1.
pub fn pg_get<T: PgCol>(r: &::postgres::Row, i: usize) -> StoreResult<T> {
    T::pg(r, i).ok_or(StoreError::Type(i))
}

#[cfg(feature = "postgres")]
pub trait PgCol: Sized {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self>;
}

#[cfg(feature = "postgres")]
fn int(r: &::postgres::Row, i: usize) -> Option<Option<i64>> {
    if let Ok(v) = r.try_get::<_, Option<i64>>(i) {
        return Some(v);
    }
    if let Ok(v) = r.try_get::<_, Option<i32>>(i) {
        return Some(v.map(i64::from));
    }
    if let Ok(v) = r.try_get::<_, Option<bool>>(i) {
        return Some(v.map(i64::from));
    }
    None
}

#[cfg(feature = "postgres")]
impl PgCol for Option<i64> {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        int(r, i)
    }
}
#[cfg(feature = "postgres")]
impl PgCol for i64 {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        int(r, i).flatten()
    }
}
#[cfg(feature = "postgres")]
impl PgCol for Option<bool> {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        int(r, i).map(|v| v.map(|n| n != 0))
    }
}
#[cfg(feature = "postgres")]
impl PgCol for bool {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        int(r, i).flatten().map(|n| n != 0)
    }
}
#[cfg(feature = "postgres")]
impl PgCol for Option<u32> {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        match int(r, i)? {
            None => Some(None),
            Some(n) => u32::try_from(n).ok().map(Some),
        }
    }
}
#[cfg(feature = "postgres")]
impl PgCol for u32 {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        <Option<u32>>::pg(r, i).flatten()
    }
}
#[cfg(feature = "postgres")]
impl PgCol for Option<String> {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
#[cfg(feature = "postgres")]
impl PgCol for String {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
#[cfg(feature = "postgres")]
impl PgCol for Option<Vec<u8>> {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
#[cfg(feature = "postgres")]
impl PgCol for Vec<u8> {
    fn pg(r: &::postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
