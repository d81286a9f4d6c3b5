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
//! - [`crate::WebhookPump`] (beside the service, which it drives): which
//!   delivery goes out when, for every host: memory's part apart from the
//!   store's, and the server-wide cap on outgoing connections (a server's
//!   store thread waits in `botspace_runtime::Pump`);
//! - [`answer`]: the receiver's answer read from the connection's bytes,
//!   for a host that writes the request to a socket itself.

pub mod answer;
pub mod deliveries;
pub mod schedule;
pub mod signature;
pub mod target;

pub use answer::{AnswerReader, Step};
pub use deliveries::WebhookRequest;
pub use schedule::{
    retry_after_s, Attempt, Failure, LogEvent, Outcome, Schedule, Status, MAX_ANSWER_BYTES, MAX_CONNECTIONS,
};
pub use target::{check_address, check_url, AddressClass, Target, TargetPolicy, UrlRefusal};
