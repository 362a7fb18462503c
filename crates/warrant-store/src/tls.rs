//! TLS to the shared store, with libpq's meaning of `sslmode`, `sslrootcert`, `sslcert` and
//! `sslkey` (the driver itself knows only `disable`, `prefer` and `require`, and no files).
//!
//! | `sslmode` | encrypted | certificate chain checked | host name checked |
//! |---|---|---|---|
//! | `disable` | no | — | — |
//! | `prefer` (the default) | when the server offers it | no | no |
//! | `require` | always | only when `sslrootcert` is given (as libpq) | no |
//! | `verify-ca` | always | yes | no |
//! | `verify-full` | always | yes | yes |
//!
//! The roots are `sslrootcert` (a PEM file, or `system` for the platform's store), else
//! `~/.postgresql/root.crt` when it exists (libpq's default), else the platform's store. A client
//! certificate is `sslcert` with its key `sslkey`; as libpq, a key file others can read is
//! refused. rustls on the ring provider, as every other TLS connection Warrant makes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, String> {
        Ok(match value {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            // `allow` tries plain text first: a man in the middle only has to refuse TLS.
            other => {
                return Err(format!(
                    "sslmode `{other}` is not supported (disable, prefer, require, verify-ca or verify-full)"
                ));
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// What the driver is told: it only distinguishes plain, optional and required TLS.
    pub(crate) fn driver(self) -> postgres::config::SslMode {
        match self {
            Self::Disable => postgres::config::SslMode::Disable,
            Self::Prefer => postgres::config::SslMode::Prefer,
            Self::Require | Self::VerifyCa | Self::VerifyFull => postgres::config::SslMode::Require,
        }
    }
}

/// The TLS parameters of a store location, taken out of it before the driver reads the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsParams {
    pub mode: SslMode,
    pub root_cert: Option<String>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

impl Default for TlsParams {
    fn default() -> Self {
        Self {
            mode: SslMode::Prefer,
            root_cert: None,
            client_cert: None,
            client_key: None,
        }
    }
}

const KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Splits a `postgres://` URL (or a `key=value` connection string) into what the driver reads
/// and the TLS parameters Warrant applies itself.
pub fn split(location: &str) -> Result<(String, TlsParams), String> {
    let mut params = TlsParams::default();
    let mut take = |key: &str, value: &str| -> Result<(), String> {
        let value = percent_decode(value)?;
        match key {
            "sslmode" => params.mode = SslMode::parse(&value)?,
            "sslrootcert" => params.root_cert = Some(value),
            "sslcert" => params.client_cert = Some(PathBuf::from(value)),
            "sslkey" => params.client_key = Some(PathBuf::from(value)),
            _ => unreachable!("only the keys of KEYS are taken"),
        }
        Ok(())
    };
    let rest = if crate::is_postgres_url(location) {
        match location.split_once('?') {
            None => location.to_owned(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    if KEYS.contains(&key) {
                        take(key, value)?;
                    } else {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() {
                    base.to_owned()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let mut kept = Vec::new();
        for token in location.split_whitespace() {
            match token.split_once('=') {
                Some((key, value)) if KEYS.contains(&key) => take(key, value)?,
                _ => kept.push(token),
            }
        }
        kept.join(" ")
    };
    if params.client_cert.is_some() != params.client_key.is_some() {
        return Err("a client certificate needs both sslcert and sslkey".to_owned());
    }
    Ok((rest, params))
}

fn percent_decode(value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = value
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("malformed percent-escape in `{value}`"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{value}` is not UTF-8 once decoded"))
}

/// The connector for `params`, or `None` for `sslmode=disable`.
pub fn connector(params: &TlsParams) -> Result<Option<MakeRustlsConnect>, String> {
    if params.mode == SslMode::Disable {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Arc<dyn ServerCertVerifier> = match (params.mode, &params.root_cert) {
        // Encryption without authentication, as libpq: the handshake's signatures are still
        // checked against the certificate the server showed.
        (SslMode::Prefer, _) | (SslMode::Require, None) => Arc::new(Unverified { algorithms }),
        (SslMode::Require | SslMode::VerifyCa, root) => Arc::new(ChainOnly {
            inner: webpki(roots(root.as_deref())?, &provider)?,
        }),
        (SslMode::VerifyFull, root) => webpki(roots(root.as_deref())?, &provider)?,
        (SslMode::Disable, _) => return Ok(None),
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match (&params.client_cert, &params.client_key) {
        (Some(cert), Some(key)) => {
            let chain = read_certs(cert)?;
            let key = read_key(key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("client certificate {}: {e}", cert.display()))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn webpki(
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, String> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("TLS roots: {e}"))
}

fn roots(root_cert: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let file = match root_cert {
        Some("system") => None,
        Some(path) => Some(PathBuf::from(path)),
        None => std::env::var_os("HOME")
            .map(|home| Path::new(&home).join(".postgresql/root.crt"))
            .filter(|p| p.is_file()),
    };
    match file {
        Some(path) => {
            for cert in read_certs(&path)? {
                store
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(native.certs);
            if store.is_empty() {
                return Err(
                    "no sslrootcert given and the platform's certificate store is empty".to_owned(),
                );
            }
        }
    }
    Ok(store)
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the client key {}: {e}", path.display()))?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "the client key {} can be read by others (mode {:o}); make it 0600",
            path.display(),
            meta.mode() & 0o777
        ));
    }
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| format!("cannot read the client key {}: {e}", path.display()))
}

/// `sslmode=prefer`/`require` without roots: any certificate, the handshake still signed by it.
#[derive(Debug)]
struct Unverified {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the name in the certificate is not read.
#[derive(Debug)]
struct ChainOnly {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tls_keys_are_taken_out_of_a_url_and_the_rest_is_kept() {
        let (rest, p) = split(
            "postgres://u@db/w?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u@db/w?application_name=x");
        assert_eq!(p.mode, SslMode::VerifyFull);
        assert_eq!(p.root_cert.as_deref(), Some("/etc/ca.pem"));
        let (rest, p) = split("host=db user=u sslmode=require dbname=w").unwrap();
        assert_eq!(rest, "host=db user=u dbname=w");
        assert_eq!(p.mode, SslMode::Require);
        let (rest, p) = split("postgres://u@db/w").unwrap();
        assert_eq!(rest, "postgres://u@db/w");
        assert_eq!(p, TlsParams::default());
    }

    #[test]
    fn unsupported_modes_and_half_client_certificates_are_refused() {
        assert!(
            split("postgres://db/w?sslmode=allow")
                .unwrap_err()
                .contains("allow")
        );
        assert!(
            split("postgres://db/w?sslcert=/c.pem")
                .unwrap_err()
                .contains("sslkey")
        );
        assert!(
            split("postgres://db/w?sslmode=%zz")
                .unwrap_err()
                .contains("percent")
        );
    }
}
