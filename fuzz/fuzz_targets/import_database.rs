#![no_main]
//! Arbitrary bytes (and mutated exported images, from the corpus) into
//! import_database: no panic; after an Err the service answers getMe
//! exactly as before.
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[path = "common.rs"]
mod common;

struct State {
    w: common::World,
    image: Vec<u8>,
    me: Vec<u8>,
}

static STATE: OnceLock<State> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let s = STATE.get_or_init(|| {
        let w = common::world();
        let me = common::get_me(&w);
        assert!(me.starts_with(b"HTTP/1.1 200 "));
        let image = w.svc.export_database().expect("export");
        State { w, image, me }
    });
    match s.w.svc.import_database(data) {
        Err(_) => assert_eq!(common::get_me(&s.w), s.me, "getMe changed after a refused import"),
        Ok(()) => {
            // An accepted image replaced the state: answers must still be sane.
            let status = common::check_response(&common::get_me(&s.w));
            assert!(status < 500, "getMe gave {status} after an accepted import");
            s.w.svc.import_database(&s.image).expect("restore the seeded image");
        }
    }
});
