//! For a host whose HTTP stack (hyper, axum) parses requests: the gateway
//! upgrade of a parsed request, and what the core refuses of a head or a
//! body before the request is whole. Requests themselves come in through
//! [`Service::handle`] ([`crate::Incoming::http`]).

use super::Service;
use crate::entry::{into_http_response, Input};
use crate::gateway::GatewayAccept;

impl Service {
    /// [`Service::accept_gateway`] of a parsed request. The response is the
    /// core's bytes (`101` or an error): [`crate::into_http_response`] reads
    /// them for a host that writes its own heads.
    /// `botspace-hyper` (the Rust server) calls it.
    pub fn accept_gateway_http<B: AsRef<[u8]>>(&self, request: &http::Request<B>, now_ms: u64) -> GatewayAccept {
        self.accept_gateway_input(Input::of(request), now_ms)
    }

    /// [`Service::accept_gateway_session`] of a parsed request: a
    /// message-level session, or the refusal's bytes.
    /// The edge worker (wasm) calls it.
    pub fn accept_gateway_session_http<B: AsRef<[u8]>>(
        &self,
        request: &http::Request<B>,
        now_ms: u64,
    ) -> Result<crate::gateway::GatewaySession, Vec<u8>> {
        self.accept_gateway_session_input(Input::of(request), now_ms)
    }
}

/// Why a host could not read a request's body whole
/// ([`Service::refuse_http_body`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyRefusal {
    /// The body passed [`Service::http_body_limit`] while it was read
    /// (a chunked body, whose length no header declared).
    TooLarge,
    /// The HTTP stack could not decode the body (a chunked coding it
    /// refuses) or it broke off.
    Malformed,
}

impl Service {
    /// What the core refuses from a parsed head alone (a body over the
    /// limit by its `Content-Length`, a header twice, too large a head...),
    /// as the framer would: a host asks before it reads the body, so it
    /// never reads one the core would refuse. `None`: read the body (at
    /// most [`Service::http_body_limit`] bytes) and call
    /// [`Service::handle`]. The refusal carries `Connection: close`:
    /// the body it refused may be on its way, unread, so the connection
    /// cannot carry another request (the host closes it once sent).
    /// `botspace-hyper` (the Rust server) calls it.
    pub fn refuse_http_head(&self, head: &http::request::Parts) -> Option<http::Response<Vec<u8>>> {
        let max = self.config.max_body_bytes;
        let refused = crate::http::check_parts(head.method.as_str(), &head.uri, &head.headers, max).err()?;
        Some(into_http_response(crate::connection::closing(refused)))
    }

    /// The most body bytes a host reads of one request: `max_body_bytes`,
    /// the limit the framer and [`Service::handle`] hold every body
    /// to, so a host that stops reading there refuses nothing the core
    /// would take.
    /// `botspace-hyper` (the Rust server) calls it.
    pub fn http_body_limit(&self) -> usize {
        self.config.max_body_bytes
    }

    /// The answer to a request whose body a host could not read whole
    /// ([`BodyRefusal`]): 413 `payload_too_large` past
    /// [`Service::http_body_limit`], 400 `invalid_request` "malformed
    /// chunked body" otherwise; the library's JSON either way, never an
    /// HTTP stack's own bare answer. It carries `Connection: close`: the
    /// rest of the body is unread, so the connection ends once it is sent.
    /// `botspace-hyper` (the Rust server) calls it.
    pub fn refuse_http_body(&self, why: BodyRefusal) -> http::Response<Vec<u8>> {
        let refused = match why {
            BodyRefusal::TooLarge => crate::ApiError::payload_too_large(self.http_body_limit()),
            BodyRefusal::Malformed => crate::ApiError::invalid_request("malformed chunked body"),
        };
        into_http_response(crate::connection::closing(refused))
    }
}
