//! What one `GET /admin/metrics` costs on a SQLite file of many bots
//! (docs/operations.md, "Cost"): `cargo run --release --example
//! metrics_scrape -- [BOTS] [BACKLOGGED_PERCENT]` (default 100000 bots, 10 %
//! with a backlog of 5 events). The rows are written straight into the
//! file (createBot would take minutes); the service then opens it and is
//! scraped 22 times (a pass over 100 000 bots takes 20).

use botspace::{Config, Service};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bots: u64 = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let percent: u64 = args.next().map_or(Ok(10), |a| a.parse())?;
    let dir = std::env::temp_dir().join(format!("botspace-metrics-scrape-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("botspace.db").to_string_lossy().into_owned();
    let secret = "metrics-scrape-admin-secret";
    let config = Config::default().with(|c| {
        c.database = db.clone();
        c.admin_secret = secret.into();
    });
    drop(Service::open(config.clone())?);
    {
        let c = rusqlite::Connection::open(&db)?;
        c.execute_batch("BEGIN")?;
        let mut bot = c.prepare(
            "INSERT INTO bots (id, token_hash, display_name, handle, last_seq, acked_seq, created_at) \
             VALUES (?1, ?2, 'Bot', ?1, ?3, ?4, 0)",
        )?;
        let mut event = c.prepare(
            "INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data) VALUES (?1, ?2, ?3, 'message_created', '{}')",
        )?;
        for i in 0..bots {
            let id = format!("bot_{i:08}");
            let hash = i.to_be_bytes().repeat(4);
            let backlog = (i % 100 < percent) as i64 * 5;
            bot.execute(rusqlite::params![id, hash, 10 + backlog, 10])?;
            for seq in 11..=10 + backlog {
                event.execute(rusqlite::params![id, seq, 1_700_000_000_000i64 + i as i64])?;
            }
        }
        drop((bot, event));
        c.execute_batch("COMMIT")?;
    }
    let svc = Service::open(config)?;
    let req = format!("GET /admin/metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Admin {secret}\r\n\r\n");
    for round in 0..22 {
        let t = Instant::now();
        let resp = svc.handle_request(req.as_bytes());
        let took = t.elapsed();
        let text = String::from_utf8_lossy(&resp);
        let read = text.lines().find(|l| l.starts_with("botspace_backlog_scrape_duration_seconds ")).unwrap_or("");
        let total = text.lines().find(|l| l.starts_with("botspace_unacked_events ")).unwrap_or("");
        println!("scrape {round}: {:.2} ms in all; {read}; {total}", took.as_secs_f64() * 1e3);
    }
    drop(svc);
    std::fs::remove_dir_all(dir)?;
    Ok(())
}
