//! The typed entry points: for a host whose HTTP stack (hyper, axum)
//! has parsed the request already. Each is its bytes twin (same rules,
//! same checks, same answers), given the parsed request instead of its
//! bytes: the core reads it where it is, with no second parse, and
//! answers with an [`http::Response`].

use super::{Answer, PollId, Service};
use crate::entry::{into_http_response, Input};
use crate::gateway::GatewayAccept;

impl Service {
    /// [`Service::handle_request`] of a parsed request, whose body was read
    /// whole (a chunked body decoded).
    pub fn handle_http<B: AsRef<[u8]>>(&self, request: &http::Request<B>) -> http::Response<Vec<u8>> {
        into_http_response(self.handle_input(Input::of(request)))
    }

    /// [`Service::handle_request_from`] of a parsed request.
    pub fn handle_http_from<B: AsRef<[u8]>>(&self, request: &http::Request<B>, peer: &str) -> http::Response<Vec<u8>> {
        into_http_response(self.handle_input_from(Input::of(request), peer))
    }

    /// [`Service::handle_batch`] of parsed requests.
    pub fn handle_http_batch<B: AsRef<[u8]>>(&self, requests: &[&http::Request<B>]) -> Vec<http::Response<Vec<u8>>> {
        let inputs: Vec<Input<'_>> = requests.iter().map(|r| Input::of(*r)).collect();
        self.handle_inputs(&inputs).into_iter().map(into_http_response).collect()
    }

    /// [`Service::handle_http_batch`] of requests that arrived concurrently
    /// (a host's own grouping, not an order the host chose): on a shared
    /// store they run in one lock order, bot then chat, as the core's group
    /// commit runs its groups, so two nodes' groups do not deadlock.
    pub fn handle_http_group<B: AsRef<[u8]>>(&self, requests: &[&http::Request<B>]) -> Vec<http::Response<Vec<u8>>> {
        let inputs: Vec<Input<'_>> = requests.iter().map(|r| Input::of(*r)).collect();
        self.handle_inputs_as(&inputs, true).into_iter().map(into_http_response).collect()
    }

    /// [`Service::accept_gateway`] of a parsed request. The response is the
    /// core's bytes (`101` or an error): [`crate::into_http_response`] reads
    /// them for a host that writes its own heads.
    pub fn accept_gateway_http<B: AsRef<[u8]>>(&self, request: &http::Request<B>, now_ms: u64) -> GatewayAccept {
        self.accept_gateway_input(Input::of(request), now_ms)
    }

    /// [`Service::accept_gateway_session`] of a parsed request: a
    /// message-level session, or the refusal's bytes.
    pub fn accept_gateway_session_http<B: AsRef<[u8]>>(
        &self,
        request: &http::Request<B>,
        now_ms: u64,
    ) -> Result<crate::gateway::GatewaySession, Vec<u8>> {
        self.accept_gateway_session_input(Input::of(request), now_ms)
    }

    /// [`Service::answer_request`] of a parsed request; an answer given
    /// now is an `http::Response`, as [`Service::handle_http`] gives it.
    pub fn answer_http<B: AsRef<[u8]>>(
        &self,
        request: &http::Request<B>,
        peer: &str,
        now_ms: u64,
    ) -> Answer<http::Response<Vec<u8>>> {
        match self.answer_input(Input::of(request), peer, now_ms) {
            Answer::Now(out) => Answer::Now(into_http_response(out)),
            Answer::Parked(id) => Answer::Parked(id),
        }
    }

    /// [`Service::poll_parked`] for polls parked by [`Service::answer_http`]:
    /// the same answers, each an `http::Response`.
    pub fn poll_parked_http(&self, now_ms: u64) -> Vec<(PollId, http::Response<Vec<u8>>)> {
        self.poll_parked(now_ms).into_iter().map(|(id, out)| (id, into_http_response(out))).collect()
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
    /// [`Service::handle_http`]. The refusal carries `Connection: close`:
    /// the body it refused may be on its way, unread, so the connection
    /// cannot carry another request (the host closes it once sent).
    pub fn refuse_http_head(&self, head: &http::request::Parts) -> Option<http::Response<Vec<u8>>> {
        let max = self.config.max_body_bytes;
        let refused = crate::http::check_parts(head.method.as_str(), &head.uri, &head.headers, max).err()?;
        Some(into_http_response(crate::policy::closing(refused)))
    }

    /// The most body bytes a host reads of one request: `max_body_bytes`,
    /// the limit the framer and [`Service::handle_http`] hold every body
    /// to, so a host that stops reading there refuses nothing the core
    /// would take.
    pub fn http_body_limit(&self) -> usize {
        self.config.max_body_bytes
    }

    /// The answer to a request whose body a host could not read whole
    /// ([`BodyRefusal`]): 413 `payload_too_large` past
    /// [`Service::http_body_limit`], 400 `invalid_request` "malformed
    /// chunked body" otherwise; the library's JSON either way, never an
    /// HTTP stack's own bare answer. It carries `Connection: close`: the
    /// rest of the body is unread, so the connection ends once it is sent.
    pub fn refuse_http_body(&self, why: BodyRefusal) -> http::Response<Vec<u8>> {
        let refused = match why {
            BodyRefusal::TooLarge => crate::ApiError::payload_too_large(self.http_body_limit()),
            BodyRefusal::Malformed => crate::ApiError::invalid_request("malformed chunked body"),
        };
        into_http_response(crate::policy::closing(refused))
    }
}
