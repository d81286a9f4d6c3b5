//! The store's values as PostgreSQL's parameters, and PostgreSQL's
//! columns as the types the store reads (integers widen, flags are 0/1).

use crate::store::{StorageError, StoreResult, Val};
use bytes::BytesMut;
use postgres::types::{IsNull, ToSql, Type};

impl ToSql for Val<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Val::Null => Ok(IsNull::Yes),
            Val::Int(i) => match *ty {
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                _ => i.to_sql(ty, out),
            },
            Val::Text(t) => t.to_sql(ty, out),
            Val::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// A column as the type the code reads; integers widen, flags are 0/1.
pub fn get<T: PgCol>(r: &postgres::Row, i: usize) -> StoreResult<T> {
    T::pg(r, i).ok_or(StorageError::Type(i))
}

pub trait PgCol: Sized {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self>;
}

fn int(r: &postgres::Row, i: usize) -> Option<Option<i64>> {
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

impl PgCol for Option<i64> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        int(r, i)
    }
}
impl PgCol for i64 {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        int(r, i).flatten()
    }
}
impl PgCol for Option<bool> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        int(r, i).map(|v| v.map(|n| n != 0))
    }
}
impl PgCol for bool {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        int(r, i).flatten().map(|n| n != 0)
    }
}
impl PgCol for Option<u32> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        match int(r, i)? {
            None => Some(None),
            Some(n) => u32::try_from(n).ok().map(Some),
        }
    }
}
impl PgCol for u32 {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        <Option<u32>>::pg(r, i).flatten()
    }
}
impl PgCol for Option<String> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
impl PgCol for String {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
impl PgCol for Option<Vec<u8>> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
impl PgCol for Vec<u8> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
