//! The rules of the bot interface, one module per family. Each rule is a
//! plain function of what the store read (a chat row, a bot, a stored
//! result, a bucket's arrival time) and of the request: no SQL, no I/O, no
//! clock of its own. The methods (`src/methods/`) read the store and call
//! these in the check order of `docs/errors.md`; `docs/architecture.md`,
//! "Where each rule lives", names the home and the test of each.

pub mod auth;
pub mod commands;
pub mod gateway;
pub mod idempotency;
pub mod keyboard;
pub mod limits;
pub mod names;
pub mod permissions;
pub mod ratelimit;
pub mod read_ahead;
pub mod tier;
