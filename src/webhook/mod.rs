//! Webhooks: a bot's events delivered as signed HTTP requests to a URL the
//! bot set. The library decides everything a delivery is — which event is
//! due, to where, with which headers and body, what an answer means, when
//! to try again — and a host only makes the request and reports what came
//! of it:
//! - [`target`]: where a webhook may point (the URL's form, and the
//!   addresses a delivery may connect to);
//! - [`signature`]: the Standard Webhooks headers and the `whsec_` secret;
//! - [`schedule`]: one bot's deliveries as a state machine with time as an
//!   input (per-chat order, retries, the cursor);
//! - [`Pump`]: when the store's part of the deliveries runs, apart from a
//!   host's event loop (what a loop takes, when it waits, when a store
//!   turn is wanted); it drives the service's calls, so it lives with them
//!   (`service/webhook_pump.rs`).

pub mod deliveries;
pub mod schedule;
pub mod signature;
pub mod target;

pub use crate::service::Pump;
pub use deliveries::WebhookRequest;
pub use schedule::{retry_after_s, Attempt, Failure, LogEvent, Outcome, Schedule, Status, MAX_CONNECTIONS};
pub use target::{check_address, check_url, AddressClass, Target, TargetPolicy, UrlRefusal};
