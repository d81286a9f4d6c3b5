//! Who the client is behind a reverse proxy: the host gives the address of
//! its immediate peer, and only when that peer is a configured trusted proxy
//! (`trusted_proxies`) are the request's forwarding headers believed.
//!
//! The rule (the common "rightmost untrusted" one): walk the forwarded
//! addresses from the right — the one the nearest proxy appended — past
//! every trusted proxy; the first address that is not a trusted proxy is the
//! client. Everything left of it was written by that client and is ignored,
//! so a client cannot choose its own key by sending the header itself.
//!
//! - The list is `X-Forwarded-For` or `Forwarded` (its `for=` parameters),
//!   every line of the header in order. A request that carries both is
//!   keyed by the peer: a proxy appends to one of them, and the other would
//!   be the client's own words.
//! - A hop that is not an address (`unknown`, an obfuscated `_name`, an
//!   empty item) stops the walk: the client is the trusted hop that passed
//!   it on.
//! - When every hop is trusted, the client is the leftmost one reached; at
//!   most [`MAX_HOPS`] hops are walked.

use crate::throttle::{parse_ip, Client};
use std::net::IpAddr;

/// Forwarded hops walked at most (a chain of trusted proxies is short; a
/// header of thousands of them is an attack on the walk).
pub(crate) const MAX_HOPS: usize = 32;

/// An address block: `10.0.0.0/8`, `fd00::/8`, or one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cidr {
    net: IpAddr,
    len: u8,
}

impl Cidr {
    /// Parses `ADDR/LEN` or a bare address; why not, for the configuration
    /// error.
    pub(crate) fn parse(s: &str) -> Result<Cidr, String> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| format!("{s:?} is not an IP address or CIDR block"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max && !l.starts_with('+') => n,
                _ => return Err(format!("{s:?}: the prefix length must be 0 to {max}")),
            },
        };
        let cidr = Cidr { net, len };
        if cidr.mask(net) != net {
            return Err(format!("{s:?} has bits set past /{len}; the block is {}/{len}", cidr.mask(net)));
        }
        // An IPv4-mapped block is the IPv4 block it maps (addresses are
        // compared in their IPv4 form).
        if let (IpAddr::V6(v6), true) = (net, len >= 96) {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return Ok(Cidr { net: IpAddr::V4(v4), len: len - 96 });
            }
        }
        Ok(cidr)
    }

    /// `ip` with the bits past this block's length cleared.
    fn mask(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(v4) => {
                let m = if self.len == 0 { 0 } else { u32::MAX << (32 - self.len as u32) };
                IpAddr::V4((u32::from(v4) & m).into())
            }
            IpAddr::V6(v6) => {
                let m = if self.len == 0 { 0 } else { u128::MAX << (128 - self.len as u32) };
                IpAddr::V6((u128::from(v6) & m).into())
            }
        }
    }

    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.net.is_ipv4() && self.mask(ip) == self.net
    }
}

/// The client of a request that `peer` handed over, given its forwarding
/// headers (every value of each, in order) and the trusted proxies.
pub(crate) fn client<'a>(
    peer: &str,
    x_forwarded_for: impl Iterator<Item = &'a [u8]>,
    forwarded: impl Iterator<Item = &'a [u8]>,
    trusted: &[Cidr],
) -> Client {
    let Some(peer_ip) = parse_ip(peer) else { return Client::from_peer(peer) };
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    if !is_trusted(peer_ip) {
        return Client::Ip(peer_ip);
    }
    let xff: Vec<&[u8]> = x_forwarded_for.collect();
    let fwd: Vec<&[u8]> = forwarded.collect();
    let hops: Vec<Option<IpAddr>> = match (xff.is_empty(), fwd.is_empty()) {
        (false, true) => list(&xff).map(parse_ip).collect(),
        (true, false) => list(&fwd).map(forwarded_for).collect(),
        // Neither, or both (one of them is the client's own).
        _ => return Client::Ip(peer_ip),
    };
    let mut client = peer_ip;
    for hop in hops.into_iter().rev().take(MAX_HOPS) {
        match hop {
            Some(ip) if !is_trusted(ip) => return Client::Ip(ip),
            Some(ip) => client = ip,
            None => break,
        }
    }
    Client::Ip(client)
}

/// The comma-separated items of every line of a header; a line that is not
/// UTF-8 is one unparseable item.
fn list<'a>(lines: &'a [&'a [u8]]) -> impl DoubleEndedIterator<Item = &'a str> {
    lines.iter().flat_map(|l| match std::str::from_utf8(l) {
        Ok(s) => s.split(',').collect::<Vec<_>>(),
        Err(_) => vec![""],
    })
}

/// The address of a `Forwarded` element's `for=` parameter (RFC 7239:
/// `for=192.0.2.60;proto=http`, `for="[2001:db8::17]:4711"`).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let value = element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then_some(value.trim())
    })?;
    let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
    parse_ip(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Client {
        Client::Ip(s.parse().unwrap())
    }

    fn cidrs(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|s| Cidr::parse(s).unwrap()).collect()
    }

    fn xff(peer: &str, lines: &[&str], trusted: &[&str]) -> Client {
        client(peer, lines.iter().map(|l| l.as_bytes()), std::iter::empty(), &cidrs(trusted))
    }

    fn fwd(peer: &str, lines: &[&str], trusted: &[&str]) -> Client {
        client(peer, std::iter::empty(), lines.iter().map(|l| l.as_bytes()), &cidrs(trusted))
    }

    #[test]
    fn cidr_blocks_parse_and_contain() {
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(c.contains("10.255.1.2".parse().unwrap()));
        assert!(c.contains("::ffff:10.1.2.3".parse().unwrap()), "IPv4-mapped is IPv4");
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(!c.contains("::a00:1".parse().unwrap()));
        let one = Cidr::parse("192.0.2.7").unwrap();
        assert!(one.contains("192.0.2.7".parse().unwrap()) && !one.contains("192.0.2.8".parse().unwrap()));
        let v6 = Cidr::parse("fd00::/8").unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()) && !v6.contains("fe80::1".parse().unwrap()));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains("203.0.113.9".parse().unwrap()));
        assert!(Cidr::parse("::ffff:10.0.0.0/104").unwrap().contains("10.9.9.9".parse().unwrap()));
        assert_eq!(
            Cidr::parse("10.0.0.1/8").unwrap_err(),
            "\"10.0.0.1/8\" has bits set past /8; the block is 10.0.0.0/8"
        );
        assert_eq!(Cidr::parse("10.0.0.0/33").unwrap_err(), "\"10.0.0.0/33\": the prefix length must be 0 to 32");
        assert_eq!(Cidr::parse("fd00::/129").unwrap_err(), "\"fd00::/129\": the prefix length must be 0 to 128");
        assert_eq!(Cidr::parse("10.0.0.0/+8").unwrap_err(), "\"10.0.0.0/+8\": the prefix length must be 0 to 32");
        assert_eq!(Cidr::parse("proxy.internal").unwrap_err(), "\"proxy.internal\" is not an IP address or CIDR block");
        assert!(Cidr::parse("").is_err() && Cidr::parse("/8").is_err() && Cidr::parse("10.0.0.0/").is_err());
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_its_headers_say() {
        assert_eq!(xff("203.0.113.7", &["198.51.100.1"], &[]), ip("203.0.113.7"));
        assert_eq!(xff("203.0.113.7", &["198.51.100.1"], &["10.0.0.0/8"]), ip("203.0.113.7"));
        assert_eq!(fwd("203.0.113.7", &["for=198.51.100.1"], &["10.0.0.0/8"]), ip("203.0.113.7"));
        // A host key that is not an address: no proxy can be trusted.
        assert_eq!(xff("conn-7", &["198.51.100.1"], &["0.0.0.0/0"]), Client::Key("conn-7".into()));
    }

    #[test]
    fn behind_a_trusted_proxy_the_rightmost_untrusted_hop_is_the_client() {
        let t = ["10.0.0.0/8"];
        assert_eq!(xff("10.0.0.5", &["198.51.100.1"], &t), ip("198.51.100.1"));
        // What the client wrote itself is left of its own address.
        assert_eq!(xff("10.0.0.5", &["1.2.3.4, 198.51.100.1"], &t), ip("198.51.100.1"));
        // Through two proxies, over two header lines.
        assert_eq!(xff("10.0.0.5", &["1.2.3.4, 198.51.100.1", " 10.0.0.9 "], &t), ip("198.51.100.1"));
        // Ports and brackets as some proxies write them; mapped IPv4.
        assert_eq!(xff("10.0.0.5", &["198.51.100.1:4711"], &t), ip("198.51.100.1"));
        assert_eq!(xff("10.0.0.5", &["[2001:db8::1]:4711"], &t), ip("2001:db8::1"));
        assert_eq!(xff("::ffff:10.0.0.5", &["::ffff:198.51.100.1"], &t), ip("198.51.100.1"));
        // No header: the proxy itself.
        assert_eq!(xff("10.0.0.5", &[], &t), ip("10.0.0.5"));
        // Every hop trusted: the leftmost.
        assert_eq!(xff("10.0.0.5", &["10.1.1.1, 10.2.2.2"], &t), ip("10.1.1.1"));
    }

    #[test]
    fn a_hop_that_is_not_an_address_stops_at_the_proxy_that_passed_it_on() {
        let t = ["10.0.0.0/8"];
        assert_eq!(xff("10.0.0.5", &["unknown"], &t), ip("10.0.0.5"));
        assert_eq!(xff("10.0.0.5", &["198.51.100.1, garbage, 10.0.0.9"], &t), ip("10.0.0.9"));
        assert_eq!(xff("10.0.0.5", &["198.51.100.1,"], &t), ip("10.0.0.5"), "an empty item");
        assert_eq!(xff("10.0.0.5", &[""], &t), ip("10.0.0.5"));
        let not_utf8 = [&b"\xff"[..]];
        assert_eq!(client("10.0.0.5", not_utf8.into_iter(), std::iter::empty(), &cidrs(&t)), ip("10.0.0.5"));
    }

    #[test]
    fn the_forwarded_header_is_read_the_same_way() {
        let t = ["10.0.0.0/8", "fd00::/8"];
        assert_eq!(fwd("10.0.0.5", &["for=198.51.100.1;proto=https;by=10.0.0.5"], &t), ip("198.51.100.1"));
        assert_eq!(fwd("10.0.0.5", &["for=1.2.3.4, FOR=\"[2001:db8::17]:4711\""], &t), ip("2001:db8::17"));
        assert_eq!(fwd("fd00::1", &["for=198.51.100.1", "for=fd00::2"], &t), ip("198.51.100.1"));
        assert_eq!(fwd("10.0.0.5", &["for=_hidden"], &t), ip("10.0.0.5"));
        assert_eq!(fwd("10.0.0.5", &["proto=https"], &t), ip("10.0.0.5"), "no for=");
    }

    #[test]
    fn both_headers_at_once_key_the_request_by_the_proxy() {
        let c = client(
            "10.0.0.5",
            [&b"198.51.100.1"[..]].into_iter(),
            [&b"for=192.0.2.1"[..]].into_iter(),
            &cidrs(&["10.0.0.0/8"]),
        );
        assert_eq!(c, ip("10.0.0.5"));
    }

    #[test]
    fn at_most_max_hops_are_walked() {
        let trusted_chain = vec!["10.0.0.1"; MAX_HOPS + 5].join(",");
        let line = format!("198.51.100.1,{trusted_chain}");
        assert_eq!(xff("10.0.0.5", &[&line], &["10.0.0.0/8"]), ip("10.0.0.1"));
        let line = format!("198.51.100.1,{}", vec!["10.0.0.1"; MAX_HOPS - 1].join(","));
        assert_eq!(xff("10.0.0.5", &[&line], &["10.0.0.0/8"]), ip("198.51.100.1"));
    }
}
