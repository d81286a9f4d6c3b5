//! What a wait for other nodes' notifications heard, and how a payload
//! reads: the listener (`postgres/listener.rs`) fills it and
//! `notify.rs` hands it on, so it sits below both.

/// What a wait for notifications heard.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Heard {
    /// Notifications from other connections (this node's own are skipped).
    pub count: usize,
    /// Everything may have changed: an empty payload, or a (re)connection
    /// (what was sent while nobody listened is lost).
    pub all: bool,
    /// The bots named, sorted, without duplicates.
    pub bots: Vec<String>,
    /// For each notification that carried its sender's clock (`t` and
    /// microseconds, last in the list): microseconds from then to now.
    pub lags_us: Vec<u64>,
}

impl Heard {
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn take(&mut self, payload: &str, now_us: u64) {
        self.count += 1;
        if payload.is_empty() {
            self.all = true;
            return;
        }
        for item in payload.split(',').filter(|b| !b.is_empty()) {
            // Bot ids start with `bot_`: `t` and digits is the clock.
            match item.strip_prefix('t').filter(|d| d.bytes().all(|b| b.is_ascii_digit())).map(str::parse::<u64>) {
                Some(Ok(sent_us)) => self.lags_us.push(now_us.saturating_sub(sent_us)),
                _ => self.bots.push(item.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// A payload's bots, and its sender's clock as a lag; an older
    /// sender's payload (no clock) and "re-read everything" as before.
    #[test]
    fn notification_payloads_give_bots_and_the_lag() {
        let mut h = super::Heard::default();
        h.take("bot_a,bot_t1,t1000", 1_250);
        h.take("bot_b", 2_000);
        h.take("bot_c,t5000", 4_000);
        assert_eq!((h.count, h.all), (3, false));
        assert_eq!(h.bots, ["bot_a", "bot_t1", "bot_b", "bot_c"]);
        assert_eq!(h.lags_us, [250, 0]);
        h.take("", 0);
        assert!(h.all);
    }
}
