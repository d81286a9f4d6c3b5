//! The webhook deliveries' C values.

use crate::webhook::botspace_webhook_failure;

/// Each `botspace_webhook_failure` value is the index of the same kind
/// in the core's `Failure::ALL`, which the C call reads.
#[test]
fn webhook_failure_values_are_the_core_order() {
    use botspace::webhook::Failure;
    use botspace_webhook_failure as C;
    let pairs = [
        (C::Resolve, Failure::Resolve),
        (C::NoAddress, Failure::NoAddress),
        (C::Connect, Failure::Connect),
        (C::Tls, Failure::Tls),
        (C::TlsName, Failure::TlsName),
        (C::Connection, Failure::Connection),
        (C::BeforeSending, Failure::BeforeSending),
        (C::Build, Failure::Build),
        (C::Request, Failure::Request),
        (C::HiddenRedirect, Failure::HiddenRedirect),
        (C::AddressCheck, Failure::AddressCheck),
    ];
    assert_eq!(pairs.len(), Failure::ALL.len());
    for (c, core) in pairs {
        assert_eq!(Failure::ALL[c as usize], core);
    }
}
