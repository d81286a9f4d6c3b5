//! The store's values as PostgreSQL's parameters (integers narrow to the
//! column's type, flags to booleans). How PostgreSQL's columns read as the
//! types the store reads is `store/value.rs`'s (`pg_get`).

use crate::store::value::Val;
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

/// A parameter the connection keeps after the call that gave it returned
/// (a write deferred to the next round trip, see `PgConn::defer`).
#[derive(Debug)]
pub enum OwnedVal {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
}

impl OwnedVal {
    pub fn of(v: &Val<'_>) -> OwnedVal {
        match *v {
            Val::Null => OwnedVal::Null,
            Val::Int(i) => OwnedVal::Int(i),
            Val::Text(t) => OwnedVal::Text(t.to_string()),
            Val::Blob(b) => OwnedVal::Blob(b.to_vec()),
        }
    }

    fn as_val(&self) -> Val<'_> {
        match self {
            OwnedVal::Null => Val::Null,
            OwnedVal::Int(i) => Val::Int(*i),
            OwnedVal::Text(t) => Val::Text(t),
            OwnedVal::Blob(b) => Val::Blob(b),
        }
    }
}

impl ToSql for OwnedVal {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        self.as_val().to_sql(ty, out)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}
