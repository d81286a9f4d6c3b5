//! TLS for the PostgreSQL client: rustls, verifying the server's
//! certificate in every TLS mode, against `sslrootcert` when the URL names
//! one, else the platform's roots.

use super::MakeTls;
use crate::store::error::{StoreError, StoreResult};

pub(super) fn tls(root_cert: Option<&str>) -> StoreResult<MakeTls> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    match root_cert {
        // `sslrootcert=/path/ca.pem`: only these roots.
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|_| StoreError::Unsupported("sslrootcert: the file cannot be read"))?;
            for cert in certs {
                let cert = cert.map_err(|_| StoreError::Unsupported("sslrootcert: not a PEM certificate file"))?;
                roots.add(cert).map_err(|_| StoreError::Unsupported("sslrootcert: a certificate is not valid"))?;
            }
        }
        // The platform's roots (SSL_CERT_FILE / SSL_CERT_DIR are honoured).
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| StoreError::Unsupported("TLS: no protocol version in common"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
