use thiserror::Error;
use warrant_core::Coded;

/// What went wrong reaching or reading a catalog. Never holds a credential.
#[derive(Debug, Error)]
pub enum CatalogError {
    #[error("[catalog.{catalog}] is misconfigured: {message}")]
    Config { catalog: String, message: String },
    #[error(
        "catalog `{catalog}` at {url} cannot be reached: {reason}; check that it runs and that [catalog.{catalog}] url is right"
    )]
    Unreachable {
        catalog: String,
        url: String,
        reason: String,
    },
    #[error(
        "the token endpoint {url} of catalog `{catalog}` refused the client credentials: {reason}"
    )]
    TokenRefused {
        catalog: String,
        url: String,
        reason: String,
    },
    #[error("catalog `{catalog}` refused the credentials ({status}){detail}")]
    Unauthorized {
        catalog: String,
        status: u16,
        detail: String,
    },
    #[error("catalog `{catalog}` does not let this principal read {what}: {message}")]
    Forbidden {
        catalog: String,
        what: String,
        message: String,
    },
    #[error("catalog `{catalog}` has no {what}: {message}")]
    NotFound {
        catalog: String,
        what: String,
        message: String,
    },
    #[error("catalog `{catalog}` answered {what} with a malformed response: {message}")]
    Malformed {
        catalog: String,
        what: String,
        message: String,
    },
    #[error("catalog `{catalog}` answered {what} with HTTP {status}: {message}")]
    Http {
        catalog: String,
        what: String,
        status: u16,
        message: String,
    },
    #[error("{0}")]
    BadName(String),
    #[error("no catalog `{name}` is configured; configured: {known}")]
    UnknownCatalog { name: String, known: String },
    #[error("[catalog.{catalog}] {setting}: {message}")]
    Credential {
        catalog: String,
        setting: String,
        message: String,
    },
}

impl Coded for CatalogError {
    fn code(&self) -> &'static str {
        match self {
            Self::Config { .. } => "W-CATALOG-001",
            Self::Unreachable { .. } => "W-CATALOG-002",
            Self::TokenRefused { .. } => "W-CATALOG-003",
            Self::Unauthorized { .. } => "W-CATALOG-004",
            Self::Forbidden { .. } => "W-CATALOG-005",
            Self::NotFound { .. } => "W-CATALOG-006",
            Self::Malformed { .. } => "W-CATALOG-007",
            Self::Http { .. } => "W-CATALOG-008",
            Self::BadName(_) => "W-CATALOG-009",
            Self::UnknownCatalog { .. } => "W-CATALOG-010",
            Self::Credential { .. } => "W-CATALOG-011",
        }
    }
}
