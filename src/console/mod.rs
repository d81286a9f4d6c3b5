//! The admin console (docs/console.md): a static single-page app,
//! compiled into the library and served at `GET /admin/console`, wherever
//! the host serves `/admin/*`. The page holds no data; everything it shows
//! it reads through the host API with the secret the operator types in.
//!
//! Also here: what the console's host methods read that is not in the
//! database — per-bot activity of the last hour ([`activity`]) and this
//! node's live figures ([`HostView`]).

pub mod activity;

pub use activity::Activity;

/// One file of the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asset {
    Page,
    Script,
    Style,
    Icon,
}

const PAGE: &[u8] = include_bytes!("index.html");
const SCRIPT: &[u8] = include_bytes!("app.js");
const STYLE: &[u8] = include_bytes!("app.css");
const ICON: &[u8] = include_bytes!("icon.svg");

/// No inline script or style, nothing from elsewhere, not framed, and
/// requests only to this origin (the host API).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

impl Asset {
    /// True for `console` and `console/<anything>` (the name after `/admin/`):
    /// those paths are the console's, GET only, never a host method.
    pub fn is_console_path(name: &str) -> bool {
        name == "console" || name.starts_with("console/")
    }

    pub fn parse(name: &str) -> Option<Asset> {
        match name {
            "console" | "console/" | "console/index.html" => Some(Asset::Page),
            "console/app.js" => Some(Asset::Script),
            "console/app.css" => Some(Asset::Style),
            "console/icon.svg" => Some(Asset::Icon),
            _ => None,
        }
    }

    pub fn bytes(self) -> &'static [u8] {
        match self {
            Asset::Page => PAGE,
            Asset::Script => SCRIPT,
            Asset::Style => STYLE,
            Asset::Icon => ICON,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Asset::Page => "text/html; charset=utf-8",
            Asset::Script => "text/javascript; charset=utf-8",
            Asset::Style => "text/css; charset=utf-8",
            Asset::Icon => "image/svg+xml",
        }
    }

    /// The page is never stored (it is tiny and must match the library it
    /// came with); script and style are revalidated on every load by their
    /// ETag, so an upgraded library is seen at once.
    fn cache_control(self) -> &'static str {
        match self {
            Asset::Page => "no-store",
            Asset::Script | Asset::Style | Asset::Icon => "no-cache",
        }
    }

    /// A strong validator: the content's SHA-256, shortened. Hashed once
    /// per asset: a client that asks for the script again and again costs
    /// a copy of it, not a hash of it, each time.
    fn etag(self) -> &'static str {
        static TAGS: [std::sync::OnceLock<String>; 4] = [const { std::sync::OnceLock::new() }; 4];
        TAGS[self as usize].get_or_init(|| {
            let h = crate::auth::sha256(self.bytes());
            let mut tag = String::with_capacity(2 + 24);
            tag.push('"');
            crate::hex::push_lower(&mut tag, &h[..12]);
            tag.push('"');
            tag
        })
    }

    /// The whole HTTP response; 304 when `if_none_match` names the current
    /// content.
    pub fn response(self, if_none_match: Option<&str>) -> Vec<u8> {
        let etag = self.etag();
        let fresh = if_none_match.is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
        let body: &[u8] = if fresh { b"" } else { self.bytes() };
        let status = if fresh { "304 Not Modified" } else { "200 OK" };
        let mut out = Vec::with_capacity(body.len() + 512);
        out.extend_from_slice(format!("HTTP/1.1 {status}\r\n").as_bytes());
        if !fresh {
            out.extend_from_slice(format!("Content-Type: {}\r\n", self.content_type()).as_bytes());
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        for (k, v) in [
            ("Content-Security-Policy", CSP),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("X-Frame-Options", "DENY"),
            ("Cross-Origin-Opener-Policy", "same-origin"),
            ("Cache-Control", self.cache_control()),
            ("ETag", etag),
        ] {
            out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        out
    }
}

/// What a host method may read besides the database: set by the service
/// for each request it runs.
#[derive(Default, Clone, Copy)]
pub struct HostView<'a> {
    /// Who sent the request, when the host said (`Incoming::from_peer`).
    pub peer: Option<&'a str>,
    /// Bot requests of the last hour, on this node.
    pub activity: Option<&'a Activity>,
    /// Open gateway connections of a bot on this node.
    pub sessions: Option<&'a (dyn Fn(&str) -> u32 + Sync)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_carry_the_security_headers_and_revalidate_by_etag() {
        let r = String::from_utf8(Asset::Script.response(None)).unwrap();
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(r.contains("\r\nContent-Security-Policy: default-src 'none'; script-src 'self';"));
        assert!(r.contains("frame-ancestors 'none'"));
        assert!(r.contains("\r\nX-Content-Type-Options: nosniff\r\n"));
        assert!(r.contains("\r\nReferrer-Policy: no-referrer\r\n"));
        assert!(r.contains("\r\nCache-Control: no-cache\r\n"));
        let etag = Asset::Script.etag();
        let again = String::from_utf8(Asset::Script.response(Some(etag))).unwrap();
        assert!(again.starts_with("HTTP/1.1 304 Not Modified\r\n"));
        assert!(again.ends_with("\r\n\r\n"));
        assert!(again.contains("Content-Length: 0\r\n"));
    }

    #[test]
    fn an_etag_is_the_quoted_lowercase_hex_of_the_first_12_bytes_of_the_sha256() {
        for asset in [Asset::Page, Asset::Script, Asset::Style, Asset::Icon] {
            let h = crate::auth::sha256(asset.bytes());
            let digits: String = h[..12].iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(asset.etag(), format!("\"{digits}\""));
            assert_eq!(asset.etag().len(), 26);
        }
    }

    #[test]
    fn the_page_has_no_inline_script() {
        let page = std::str::from_utf8(PAGE).unwrap();
        for (i, _) in page.match_indices("<script") {
            let tag = &page[i..i + page[i..].find('>').unwrap()];
            assert!(tag.contains("src="), "inline script: {tag}");
        }
        assert!(!page.contains("style=\""), "inline style attribute");
        assert!(!page.contains("<style"), "inline style element");
    }
}
