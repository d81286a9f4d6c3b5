//! The boundary: no panic crosses into C.

use super::last_error;
use crate::status::botspace_status;

#[test]
fn panic_is_caught() {
    let r: botspace_status = ffi_boundary!({
        if std::hint::black_box(true) {
            panic!("boom");
        }
        botspace_status::Ok
    });
    assert_eq!(r, botspace_status::Panic);
    assert!(last_error().contains("boom"));
}
