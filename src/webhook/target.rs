//! Where a webhook may point. A webhook makes the server send requests to
//! an address a bot chose, so without these rules any bot could make the
//! server reach what only the server can reach: its loopback, the private
//! network it sits in, the cloud's metadata service at 169.254.169.254
//! (server-side request forgery). Two checks, one rule:
//! - [`check_url`] when `setWebhook` is called: the URL's form, and its
//!   host when that is a literal address;
//! - [`check_address`] at every connection, on the address the host
//!   resolved the name to (a name that resolves to loopback today may
//!   resolve elsewhere tomorrow, and the other way round).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The longest URL `setWebhook` takes, in characters.
pub const MAX_URL_CHARS: usize = 2048;

/// What the host allows beyond the default (`https` to public addresses).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TargetPolicy {
    /// `http` URLs as well as `https` (`webhook_allow_http`).
    pub allow_http: bool,
    /// Loopback, private, link-local, multicast and unspecified addresses
    /// (`webhook_allow_private_addresses`).
    pub allow_private_addresses: bool,
}

/// Why a URL was refused by [`check_url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlRefusal {
    /// Not a URL this service can deliver to: 400 `invalid_webhook_url`.
    Invalid(&'static str),
    /// A literal address the policy does not allow: 400
    /// `webhook_address_forbidden`.
    Forbidden(AddressClass),
}

/// The classes of address a webhook may not reach by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    Loopback,
    Private,
    LinkLocal,
    Multicast,
    Unspecified,
    /// Broadcast, documentation and other reserved ranges no public
    /// receiver can have.
    Reserved,
}

impl AddressClass {
    pub fn describe(self) -> &'static str {
        match self {
            AddressClass::Loopback => "a loopback address",
            AddressClass::Private => "a private address",
            AddressClass::LinkLocal => "a link-local address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Unspecified => "the unspecified address",
            AddressClass::Reserved => "a reserved address",
        }
    }

    /// The failure a delivery records (`last_error_message`) when the
    /// host name resolved to an address of this class: the same words
    /// from every host.
    pub fn delivery_refusal(self) -> String {
        format!("the host name resolves to {}, which this server does not deliver to", self.describe())
    }
}

/// A URL that passed [`check_url`], split as the host needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub https: bool,
    /// The host as written, without brackets for IPv6.
    pub host: String,
    pub port: u16,
    /// Path and query, at least `/`.
    pub path_and_query: String,
    /// The host's literal address, when it is one.
    pub literal: Option<IpAddr>,
}

/// Why an `http` URL is refused where `webhook_allow_http` is off, naming
/// the flag and the option that lift it.
pub const HTTPS_OR_ALLOW_HTTP: &str =
    "must use https (a server started with --webhook-allow-http, or webhook_allow_http in its Config, also takes http)";

/// What `webhook_address_forbidden` adds to its description: the flag and
/// the option that lift it.
pub const ALLOW_PRIVATE_HINT: &str = " (a server started with --webhook-allow-private-addresses, or \
     webhook_allow_private_addresses in its Config, delivers there)";

/// Checks a webhook URL's form and, for a literal address, the address.
pub fn check_url(url: &str, policy: TargetPolicy) -> Result<Target, UrlRefusal> {
    use UrlRefusal::Invalid;
    if url.chars().count() > MAX_URL_CHARS {
        return Err(Invalid("is longer than 2048 characters"));
    }
    if url.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(Invalid("contains spaces or control characters"));
    }
    let (scheme, rest) = url.split_once("://").ok_or(Invalid("is not an absolute URL"))?;
    let https = if scheme.eq_ignore_ascii_case("https") {
        true
    } else if scheme.eq_ignore_ascii_case("http") {
        if !policy.allow_http {
            // The refusal names what lifts it: the server's flag, the
            // library's option.
            return Err(Invalid(HTTPS_OR_ALLOW_HTTP));
        }
        false
    } else {
        return Err(Invalid("must use https"));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err(Invalid("must not carry a user or password"));
    }
    if tail.contains('#') {
        return Err(Invalid("must not carry a fragment"));
    }
    let (host, port) = split_host_port(authority)?;
    let port = match port {
        Some(p) => p,
        None if https => 443,
        None => 80,
    };
    let literal = parse_literal(host);
    if literal.is_none() && !is_dns_name(host) {
        return Err(Invalid("has no valid host"));
    }
    if let Some(ip) = literal {
        check_address(ip, policy).map_err(UrlRefusal::Forbidden)?;
    }
    let path_and_query = if tail.is_empty() {
        "/".to_string()
    } else if tail.starts_with('?') {
        format!("/{tail}")
    } else {
        tail.to_string()
    };
    Ok(Target { https, host: host.to_ascii_lowercase(), port, path_and_query, literal })
}

/// Whether a connection to `ip` is allowed: the rule for every address a
/// delivery connects to.
pub fn check_address(ip: IpAddr, policy: TargetPolicy) -> Result<(), AddressClass> {
    match classify(ip) {
        Some(class) if !policy.allow_private_addresses => Err(class),
        _ => Ok(()),
    }
}

/// The class of a non-public address; `None` for a public one.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6).or_else(|| embedded_v4(v6).into_iter().find_map(classify_v4)),
    }
}

/// The IPv4 addresses an IPv6 address carries to, by the forms that
/// translate or tunnel to IPv4: whoever routes such an address reaches
/// the IPv4 address inside (NAT64 to 64:ff9b::127.0.0.1 reaches the
/// server's own loopback), so each must be a public address too.
/// - IPv4-mapped `::ffff:0:0/96` and IPv4-compatible `::/96`: the last
///   32 bits;
/// - NAT64, well-known `64:ff9b::/96` and local-use `64:ff9b:1::/48`
///   (its /96 form): the last 32 bits;
/// - 6to4 `2002::/16`: bits 16 to 47;
/// - Teredo `2001::/32`: the server at bits 32 to 63, and the client's
///   public address, inverted, in the last 32 bits.
fn embedded_v4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    let last = v4(s[6], s[7]);
    let mapped_or_compatible = s[..5] == [0; 5] && (s[5] == 0 || s[5] == 0xffff);
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1);
    if mapped_or_compatible || nat64 {
        vec![last]
    } else if s[0] == 0x2002 {
        vec![v4(s[1], s[2])]
    } else if s[0] == 0x2001 && s[1] == 0 {
        vec![v4(s[2], s[3]), v4(!s[6], !s[7])]
    } else {
        Vec::new()
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, c, _] = ip.octets();
    Some(if ip.is_unspecified() || a == 0 {
        AddressClass::Unspecified
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        // 100.64.0.0/10, carrier-grade NAT: private to the provider.
        AddressClass::Private
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if ip.is_broadcast()
        || a >= 240
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
    {
        AddressClass::Reserved
    } else {
        return None;
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let s = ip.segments();
    Some(if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if s[0] & 0xfe00 == 0xfc00 {
        AddressClass::Private
    } else if s[0] & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if s[0] == 0x2001 && s[1] == 0x0db8
        || s[..5] == [0; 5] && s[5] != 0xffff && (s[5] != 0 || v4_public(s[6], s[7]))
    {
        // Documentation, and the deprecated IPv4-compatible and other
        // ::/80 forms that some stacks still route to IPv4 (one that
        // carries a non-public IPv4 address is classed by it, see
        // `embedded_v4`).
        AddressClass::Reserved
    } else {
        return None;
    })
}

/// Whether the IPv4 address of the two segments is a public one.
fn v4_public(hi: u16, lo: u16) -> bool {
    classify_v4(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))).is_none()
}

fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), UrlRefusal> {
    use UrlRefusal::Invalid;
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or(Invalid("has no valid host"))?;
        match after {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':').ok_or(Invalid("has no valid host"))?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(Invalid("has no valid host"));
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => return Err(Invalid("has an invalid port")),
        },
    };
    Ok((host, port))
}

/// A literal IPv4 or IPv6 address. The only IPv4 form taken is the dotted
/// quad; a host such as `0x7f.1` or `2130706433`, which some resolvers
/// read as 127.0.0.1, is not a valid name either (see [`is_dns_name`]).
fn parse_literal(host: &str) -> Option<IpAddr> {
    if host.contains(':') {
        // No zone ids (`fe80::1%eth0`): they name an interface of the
        // server's own.
        return host.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

/// A DNS name: labels of letters, digits and hyphens, not all-numeric at
/// the end (so that no resolver reads it as a number), at most 253
/// characters.
fn is_dns_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() || host.len() > 253 {
        return false;
    }
    let labels_ok = host.split('.').all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    let last = host.rsplit('.').next().unwrap_or("");
    let numeric_tld = last.bytes().all(|b| b.is_ascii_digit()) || last.to_ascii_lowercase().starts_with("0x");
    labels_ok && !numeric_tld
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: TargetPolicy = TargetPolicy { allow_http: false, allow_private_addresses: false };
    const OPEN: TargetPolicy = TargetPolicy { allow_http: true, allow_private_addresses: true };

    #[test]
    fn the_refusal_a_delivery_records() {
        assert_eq!(
            AddressClass::LinkLocal.delivery_refusal(),
            "the host name resolves to a link-local address, which this server does not deliver to"
        );
    }

    fn invalid(url: &str, policy: TargetPolicy) -> &'static str {
        match check_url(url, policy) {
            Err(UrlRefusal::Invalid(why)) => why,
            other => panic!("{url}: {other:?}"),
        }
    }

    fn forbidden(url: &str) -> AddressClass {
        match check_url(url, STRICT) {
            Err(UrlRefusal::Forbidden(c)) => c,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn a_public_https_url_is_split_for_the_host() {
        let t = check_url("https://Hooks.Example.com/bot/42?k=v", STRICT).unwrap();
        assert_eq!(
            t,
            Target {
                https: true,
                host: "hooks.example.com".into(),
                port: 443,
                path_and_query: "/bot/42?k=v".into(),
                literal: None
            }
        );
        let t = check_url("https://example.com", STRICT).unwrap();
        assert_eq!((t.port, t.path_and_query.as_str()), (443, "/"));
        let t = check_url("https://example.com:8443?x=1", STRICT).unwrap();
        assert_eq!((t.port, t.path_and_query.as_str()), (8443, "/?x=1"));
        let t = check_url("https://93.184.215.14/h", STRICT).unwrap();
        assert_eq!(t.literal, Some("93.184.215.14".parse().unwrap()));
    }

    #[test]
    fn the_form_is_checked_before_the_address() {
        assert_eq!(invalid("http://example.com/", STRICT), HTTPS_OR_ALLOW_HTTP);
        assert_eq!(invalid("ftp://example.com/", OPEN), "must use https");
        assert_eq!(invalid("example.com/hook", OPEN), "is not an absolute URL");
        assert_eq!(invalid("https://user:pw@example.com/", OPEN), "must not carry a user or password");
        assert_eq!(invalid("https://user@127.0.0.1/", STRICT), "must not carry a user or password");
        assert_eq!(invalid("https://example.com/a#b", OPEN), "must not carry a fragment");
        assert_eq!(invalid("https://exa mple.com/", OPEN), "contains spaces or control characters");
        assert_eq!(invalid("https:///path", OPEN), "has no valid host");
        assert_eq!(invalid("https://example.com:0/", OPEN), "has an invalid port");
        assert_eq!(invalid("https://example.com:99999/", OPEN), "has an invalid port");
        assert_eq!(invalid("https://example.com:+80/", OPEN), "has an invalid port");
        assert_eq!(invalid("https://[::1/", OPEN), "has no valid host");
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        assert_eq!(invalid(&long, OPEN), "is longer than 2048 characters");
        assert!(check_url(&long[..MAX_URL_CHARS], OPEN).is_ok());
    }

    #[test]
    fn numeric_hosts_that_resolvers_read_as_addresses_are_not_names() {
        for host in ["2130706433", "0x7f.1", "0x7f000001", "127.1", "017700000001"] {
            assert_eq!(invalid(&format!("https://{host}/"), STRICT), "has no valid host", "{host}");
        }
    }

    #[test]
    fn literal_addresses_outside_the_public_internet_are_forbidden_unless_allowed() {
        let table = [
            ("https://127.0.0.1/", AddressClass::Loopback),
            ("https://127.8.9.10:8080/", AddressClass::Loopback),
            ("https://[::1]/", AddressClass::Loopback),
            ("https://[::ffff:127.0.0.1]/", AddressClass::Loopback),
            ("https://10.1.2.3/", AddressClass::Private),
            ("https://172.16.0.1/", AddressClass::Private),
            ("https://192.168.1.1/", AddressClass::Private),
            ("https://100.64.0.1/", AddressClass::Private),
            ("https://[fd00::1]/", AddressClass::Private),
            ("https://169.254.169.254/latest/meta-data/", AddressClass::LinkLocal),
            ("https://[fe80::1]/", AddressClass::LinkLocal),
            ("https://[::ffff:169.254.169.254]/", AddressClass::LinkLocal),
            ("https://224.0.0.1/", AddressClass::Multicast),
            ("https://[ff02::1]/", AddressClass::Multicast),
            ("https://0.0.0.0/", AddressClass::Unspecified),
            ("https://[::]/", AddressClass::Unspecified),
            ("https://255.255.255.255/", AddressClass::Reserved),
            ("https://[::127.0.0.1]/", AddressClass::Loopback),
            ("https://[::8.8.8.8]/", AddressClass::Reserved),
            ("https://[::1:0:0]/", AddressClass::Reserved),
            ("https://[64:ff9b::127.0.0.1]/", AddressClass::Loopback),
            ("https://[64:ff9b::a9fe:a9fe]/", AddressClass::LinkLocal),
            ("https://[64:ff9b:1::10.0.0.1]/", AddressClass::Private),
            ("https://[2002:7f00:1::]/", AddressClass::Loopback),
            ("https://[2002:c0a8:101::1]/", AddressClass::Private),
            ("https://[2001:0:a9fe:a9fe::1]/", AddressClass::LinkLocal),
            // Teredo's client address is stored inverted: !7f00:0001.
            ("https://[2001:0:5db8:d70e::80ff:fffe]/", AddressClass::Loopback),
        ];
        for (url, class) in table {
            assert_eq!(forbidden(url), class, "{url}");
            assert!(check_url(url, OPEN).is_ok(), "{url} when allowed");
        }
    }

    #[test]
    fn ipv6_forms_that_carry_an_ipv4_address_are_classed_by_it() {
        let class = |a: &str| classify(a.parse().unwrap());
        // Each form, carrying loopback, the metadata service, a private
        // and a public address.
        type Form = (&'static str, fn(&str) -> String);
        let forms: [Form; 6] = [
            ("mapped", |v4| format!("::ffff:{v4}")),
            ("NAT64", |v4| format!("64:ff9b::{v4}")),
            ("NAT64 local-use", |v4| format!("64:ff9b:1::{v4}")),
            ("6to4", |v4| {
                let o: Ipv4Addr = v4.parse().unwrap();
                let [a, b, c, d] = o.octets();
                format!("2002:{:02x}{:02x}:{:02x}{:02x}::1", a, b, c, d)
            }),
            ("Teredo server", |v4| {
                let [a, b, c, d] = v4.parse::<Ipv4Addr>().unwrap().octets();
                format!("2001:0:{:02x}{:02x}:{:02x}{:02x}:0:0:3fff:f7f7", a, b, c, d)
            }),
            ("Teredo client", |v4| {
                let [a, b, c, d] = v4.parse::<Ipv4Addr>().unwrap().octets();
                format!("2001:0:5db8:d70e:0:0:{:02x}{:02x}:{:02x}{:02x}", !a, !b, !c, !d)
            }),
        ];
        for (form, make) in forms {
            assert_eq!(class(&make("127.0.0.1")), Some(AddressClass::Loopback), "{form}");
            assert_eq!(class(&make("169.254.169.254")), Some(AddressClass::LinkLocal), "{form}");
            assert_eq!(class(&make("10.1.2.3")), Some(AddressClass::Private), "{form}");
            assert_eq!(class(&make("0.0.0.0")), Some(AddressClass::Unspecified), "{form}");
            // 93.184.215.14 and 8.8.8.8 are public (the Teredo forms carry
            // a public server and client, so only one is varied at a time).
            assert_eq!(class(&make("93.184.215.14")), None, "{form}");
        }
        // The deprecated IPv4-compatible form is reserved even when it
        // carries a public address, and classed by a non-public one.
        assert_eq!(class("::93.184.215.14"), Some(AddressClass::Reserved));
        assert_eq!(class("::10.0.0.1"), Some(AddressClass::Private));
        assert_eq!(class("::"), Some(AddressClass::Unspecified));
        assert_eq!(class("::1"), Some(AddressClass::Loopback));
        // Outside the forms, the last 32 bits mean nothing.
        assert_eq!(class("2606:4700::7f00:1"), None);
        assert_eq!(class("64:ff9b:2::7f00:1"), None);
        assert_eq!(class("2001:1::7f00:1"), None);
        // The check a delivery makes on a resolved address is the same.
        assert_eq!(check_address("64:ff9b::7f00:1".parse().unwrap(), STRICT), Err(AddressClass::Loopback));
        assert_eq!(check_address("64:ff9b::7f00:1".parse().unwrap(), OPEN), Ok(()));
    }

    #[test]
    fn resolved_addresses_follow_the_same_rule() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(check_address(lo, STRICT), Err(AddressClass::Loopback));
        assert_eq!(check_address(lo, OPEN), Ok(()));
        assert_eq!(
            AddressClass::LinkLocal.delivery_refusal(),
            "the host name resolves to a link-local address, which this server does not deliver to"
        );
        assert_eq!(check_address("8.8.8.8".parse().unwrap(), STRICT), Ok(()));
        assert_eq!(check_address("2606:4700::1111".parse().unwrap(), STRICT), Ok(()));
    }
}
