//! The admission handle refuses NULL handles and outputs.

use crate::admission::{
    botspace_admission, botspace_admission_admit, botspace_admission_free, botspace_admission_new,
    botspace_admission_oldest, botspace_admission_touch, botspace_admit, botspace_admit_kind,
    botspace_service_run_store_notifications,
};
use crate::status::botspace_status;

#[test]
fn null_handles_and_outputs_are_refused() {
    let mut a: *mut botspace_admission = std::ptr::null_mut();
    assert_eq!(unsafe { botspace_admission_new(&mut a) }, botspace_status::Ok);
    let (mut id, mut found) = (7u64, true);
    assert_eq!(unsafe { botspace_admission_oldest(a, &mut id, &mut found) }, botspace_status::Ok);
    assert_eq!((id, found), (0, false));
    assert_eq!(unsafe { botspace_admission_touch(std::ptr::null_mut(), 1, 0) }, botspace_status::NullArgument);
    assert_eq!(
        unsafe { botspace_admission_oldest(a, std::ptr::null_mut(), &mut found) },
        botspace_status::NullArgument
    );
    let mut admit = botspace_admit { kind: botspace_admit_kind::Serve, evict_id: 9 };
    assert_eq!(
        unsafe { botspace_admission_admit(a, std::ptr::null(), 0, 1, &mut admit) },
        botspace_status::NullArgument
    );
    assert_eq!(
        unsafe { botspace_service_run_store_notifications(std::ptr::null(), None, std::ptr::null_mut()) },
        botspace_status::NullArgument
    );
    unsafe { botspace_admission_free(&mut a) };
    assert!(a.is_null());
    unsafe { botspace_admission_free(&mut a) };
}
