//! The gateway's close reasons in C.

use crate::gateway::static_reason;
use botspace::CloseCode;

/// Every reason the core ends a session with reaches C as its own
/// wire name (there is no catch-all).
#[test]
fn every_close_reason_of_the_core_keeps_its_name_in_c() {
    assert!(CloseCode::ALL.contains(&CloseCode::StorageUnavailable));
    for reason in CloseCode::ALL {
        let got = unsafe { std::ffi::CStr::from_ptr(static_reason(*reason)) }.to_str().unwrap();
        assert_eq!(got, reason.as_str());
    }
}
