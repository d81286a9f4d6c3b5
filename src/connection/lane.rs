//! Which way a request goes in a host, from its method and path: the host
//! acts on the [`Lane`] and never compares paths itself.

/// Which paths a listener serves. A server with one listener serves all;
/// with a separate host-API address, the public one serves everything but
/// `/admin/*` and the admin one only `/admin/*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub enum Listener {
    /// Every path: bot methods, the gateway and the host API.
    All,
    /// Everything but the host API (`/admin/*`).
    Public,
    /// Only the host API (`/admin/*`).
    Admin,
}

/// What a host does with a complete request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub enum Lane {
    /// A bot method that writes or reads under the commit: worth answering
    /// together with other connections' requests (`Service::handle`, one
    /// transaction and one fsync).
    Batch,
    /// Answered as well alone as in a batch (getMe, health, readiness,
    /// metrics, the console, unknown paths): a host may batch it or not.
    Alone,
    /// The host API: answered alone, naming the peer
    /// (`Incoming::from_peer`: failed logins are throttled per client).
    Admin,
    /// `getUpdates`: answered alone (`Service::handle`), as it may park
    /// until its bot's next event.
    Poll,
    /// `/bot/gateway`: `accept_gateway` answers it (the upgrade, or the
    /// refusal of a request that is not one).
    Gateway,
    /// A path this listener does not serve: answer
    /// [`super::not_here`].
    NotHere,
}

const ADMIN_PREFIX: &str = "/admin/";
const BOT_PREFIX: &str = "/bot/";
const GATEWAY_PATH: &str = "/bot/gateway";
const POLL_PATH: &str = "/bot/getUpdates";
const GET_ME_PATH: &str = "/bot/getMe";

/// What is botspace's in a host's URL space, for a host that mounts it
/// beside routes of its own (an axum or tower router): every path under
/// the two prefixes (ending in `/`), and the operator's two probes (the
/// metrics are under `/admin/`). A mount that routes these to botspace
/// answers everything the library serves.
pub const MOUNT_PATHS: [&str; 4] = [BOT_PREFIX, ADMIN_PREFIX, "/healthz", "/readyz"];

/// The route of a request for `path` (without its query) arriving on
/// `listener`. The listener's rule comes first: a path it does not serve
/// is [`Lane::NotHere`] whatever it names.
pub fn route(listener: Listener, path: &str) -> Lane {
    let admin = path.starts_with(ADMIN_PREFIX);
    match (listener, admin) {
        (Listener::Public, true) | (Listener::Admin, false) => Lane::NotHere,
        (_, true) => Lane::Admin,
        _ if path == POLL_PATH => Lane::Poll,
        _ if path == GATEWAY_PATH => Lane::Gateway,
        _ if path.starts_with(BOT_PREFIX) && path != GET_ME_PATH => Lane::Batch,
        _ => Lane::Alone,
    }
}

/// Whether a request for `path` (without its query) is answered from the
/// core's caches: it takes no commit and waits on no disk or network
/// (getMe, [`Lane::Alone`]). A host may run it on the thread at hand
/// when nothing else is in the core (the hyper host's tokio worker)
/// rather than hand it to a core thread.
pub fn answers_from_cache(path: &str) -> bool {
    path == GET_ME_PATH
}

/// How a request queued with other connections' requests is answered
/// (a batch queue such as the core threads' `CoreWorkers`, or a host's
/// own that calls `Service::answer_take`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// With the other writes of its take, in one `Service::handle` call
    /// (one transaction, one fsync).
    Batch,
    /// On its own (`Service::handle` of one): getMe, which reads a cached identity
    /// and takes no transaction, and anything that is not a bot method.
    Alone,
}

impl Kind {
    /// How a request of `route` is answered once queued: only
    /// [`Lane::Batch`] joins a group. The other routes a host queues
    /// ([`Lane::Alone`]) go one by one; the host API, getUpdates and the
    /// gateway are never queued (the host answers them apart, see
    /// [`Lane`]), and are `Alone` should one be.
    pub fn of(route: Lane) -> Kind {
        match route {
            Lane::Batch => Kind::Batch,
            Lane::Alone | Lane::Admin | Lane::Poll | Lane::Gateway | Lane::NotHere => Kind::Alone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_routes_the_two_prefixes_and_the_probes_to_botspace() {
        assert_eq!(MOUNT_PATHS, ["/bot/", "/admin/", "/healthz", "/readyz"]);
        for p in MOUNT_PATHS {
            assert_ne!(route(Listener::All, p), Lane::NotHere, "{p}");
        }
        assert_eq!(route(Listener::All, "/admin/metrics"), Lane::Admin, "the metrics are under /admin/");
    }

    #[test]
    fn one_listener_routes_every_path() {
        let l = Listener::All;
        assert_eq!(route(l, "/bot/sendMessage"), Lane::Batch);
        assert_eq!(route(l, "/bot/getMe"), Lane::Alone);
        assert_eq!(route(l, "/bot/getUpdates"), Lane::Poll);
        assert_eq!(route(l, "/bot/gateway"), Lane::Gateway);
        assert_eq!(route(l, "/admin/createUser"), Lane::Admin);
        assert_eq!(route(l, "/healthz"), Lane::Alone);
        assert_eq!(route(l, "/nowhere"), Lane::Alone);
        // Only whole names: a longer path is another method.
        assert_eq!(route(l, "/bot/getUpdatesX"), Lane::Batch);
        assert_eq!(route(l, "/bot/gateway/"), Lane::Batch);
    }

    #[test]
    fn only_get_me_is_answered_from_the_caches() {
        assert!(answers_from_cache("/bot/getMe"));
        assert_eq!(route(Listener::All, "/bot/getMe"), Lane::Alone);
        for p in ["/bot/getMeX", "/bot/getme", "/bot/sendMessage", "/bot/getUpdates", "/healthz", "/admin/getMe"] {
            assert!(!answers_from_cache(p), "{p}");
        }
    }

    #[test]
    fn only_a_batch_route_joins_a_group_once_queued() {
        assert_eq!(Kind::of(route(Listener::All, "/bot/sendMessage")), Kind::Batch);
        assert_eq!(Kind::of(route(Listener::All, "/bot/getMe")), Kind::Alone);
        assert_eq!(Kind::of(route(Listener::All, "/healthz")), Kind::Alone);
        for r in [Lane::Alone, Lane::Admin, Lane::Poll, Lane::Gateway, Lane::NotHere] {
            assert_eq!(Kind::of(r), Kind::Alone, "{r:?}");
        }
    }

    #[test]
    fn split_listeners_each_refuse_the_others_paths() {
        assert_eq!(route(Listener::Public, "/admin/createUser"), Lane::NotHere);
        assert_eq!(route(Listener::Public, "/bot/sendMessage"), Lane::Batch);
        assert_eq!(route(Listener::Public, "/bot/gateway"), Lane::Gateway);
        assert_eq!(route(Listener::Admin, "/admin/createUser"), Lane::Admin);
        for p in ["/bot/sendMessage", "/bot/gateway", "/bot/getUpdates", "/healthz", "/admin"] {
            assert_eq!(route(Listener::Admin, p), Lane::NotHere, "{p}");
        }
    }
}
