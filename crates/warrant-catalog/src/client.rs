//! One catalog's REST client: reads only (`GET /v1/config`, `/namespaces`, `/tables`, one
//! table). The bearer token comes from OAuth2 client credentials (fetched when first needed,
//! kept until shortly before it expires, fetched again once when the catalog answers 401 or
//! 419) or is a configured one; credentials are resolved from their references only here, when
//! an authorized call runs, and never leave this module.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_core::config::CatalogConfig;

use crate::CatalogError;
use crate::names::{encode, namespace_segment};

const DEFAULT_TIMEOUT_MS: u64 = 30_000;
const DEFAULT_SCOPE: &str = "PRINCIPAL_ROLE:ALL";
const DEFAULT_REALM_HEADER: &str = "Polaris-Realm";
/// The largest answer read, in bytes: a table's metadata can be large, never this large.
const MAX_BODY: u64 = 16 * 1024 * 1024;
/// The most pages one listing follows.
const MAX_PAGES: usize = 20;
/// The most entries one listing returns.
pub const MAX_ENTRIES: usize = 1000;
/// A token is fetched again this long before it expires.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// Resolves a secret reference (`env:NAME`, `file:PATH`, `secret:NAME`) to its value.
pub trait Credentials: Send + Sync + std::fmt::Debug {
    fn resolve(&self, reference: &str) -> Result<String, String>;
}

#[derive(Debug)]
struct Token {
    value: String,
    /// `None` for a configured token, or one issued without `expires_in`.
    expires: Option<Instant>,
}

/// What a namespace holds: its child namespaces and its tables, each as its levels.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Listing {
    pub namespaces: Vec<Vec<String>>,
    pub tables: Vec<Vec<String>>,
    /// More entries exist than one listing returns.
    pub truncated: bool,
}

/// A read-only client of one configured catalog.
#[derive(Debug)]
pub struct CatalogClient {
    name: String,
    config: CatalogConfig,
    agent: ureq::Agent,
    credentials: Arc<dyn Credentials>,
    token: Mutex<Option<Token>>,
    /// The path prefix, once the catalog's configuration was read.
    prefix: Mutex<Option<String>>,
}

/// A GET's answer.
struct Answer {
    status: u16,
    body: String,
}

impl CatalogClient {
    /// Checks the configuration (no request is made).
    pub fn new(
        name: &str,
        config: &CatalogConfig,
        credentials: Arc<dyn Credentials>,
    ) -> Result<Self, CatalogError> {
        let bad = |message: String| CatalogError::Config {
            catalog: name.to_owned(),
            message,
        };
        crate::names::check_segment(name).map_err(|why| bad(format!("the name {why}")))?;
        check_url(&config.url).map_err(|m| bad(format!("url: {m}")))?;
        if let Some(t) = &config.token_url {
            check_url(t).map_err(|m| bad(format!("token_url: {m}")))?;
        }
        for (setting, value) in [
            ("client_id", &config.client_id),
            ("client_secret", &config.client_secret),
            ("token", &config.token),
        ] {
            if let Some(v) = value
                && !["env:", "file:", "cred:", "secret:"]
                    .iter()
                    .any(|p| v.starts_with(p))
            {
                return Err(bad(format!(
                    "{setting} must be a secret reference (`env:NAME`, `file:PATH`, `cred:NAME` or `secret:NAME`), never the value itself"
                )));
            }
        }
        match (&config.client_id, &config.client_secret, &config.token) {
            (Some(_), Some(_), None) | (None, None, _) => {}
            (Some(_), None, _) | (None, Some(_), _) => {
                return Err(bad(
                    "set both client_id and client_secret, or neither".into()
                ));
            }
            (Some(_), Some(_), Some(_)) => {
                return Err(bad(
                    "set either client credentials or a token, not both".into()
                ));
            }
        }
        let timeout = Duration::from_millis(config.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .new_agent();
        Ok(Self {
            name: name.to_owned(),
            config: config.clone(),
            agent,
            credentials,
            token: Mutex::new(None),
            prefix: Mutex::new(None),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn url(&self) -> &str {
        &self.config.url
    }

    /// The child namespaces of `namespace` (the top level when empty) and, below the top level,
    /// its tables.
    pub fn list(&self, namespace: &[String]) -> Result<Listing, CatalogError> {
        let base = self.base()?;
        let mut listing = Listing::default();
        let parent =
            (!namespace.is_empty()).then(|| format!("&parent={}", namespace_segment(namespace)));
        let path = format!("{base}/namespaces?pageToken={}", parent.unwrap_or_default());
        let what = format!("the namespaces under {}", self.shown(namespace));
        for page in self.pages(&path, &what, "namespaces")? {
            let levels: Vec<String> = serde_json::from_value(page).map_err(|e| {
                self.malformed(&what, format!("a namespace is not a list of names ({e})"))
            })?;
            // Only direct children: some servers list every descendant at the top level.
            if levels.len() == namespace.len() + 1 && levels.starts_with(namespace) {
                listing.namespaces.push(levels);
            }
        }
        if !namespace.is_empty() {
            let path = format!(
                "{base}/namespaces/{}/tables?pageToken=",
                namespace_segment(namespace)
            );
            let what = format!("the tables of {}", self.shown(namespace));
            for page in self.pages(&path, &what, "identifiers")? {
                #[derive(Deserialize)]
                struct Ident {
                    namespace: Vec<String>,
                    name: String,
                }
                let id: Ident = serde_json::from_value(page).map_err(|e| {
                    self.malformed(&what, format!("a table identifier is malformed ({e})"))
                })?;
                let mut levels = id.namespace;
                levels.push(id.name);
                listing.tables.push(levels);
            }
        }
        let total = listing.namespaces.len() + listing.tables.len();
        if total > MAX_ENTRIES {
            listing.truncated = true;
            listing.namespaces.truncate(MAX_ENTRIES);
            listing
                .tables
                .truncate(MAX_ENTRIES.saturating_sub(listing.namespaces.len()));
        }
        Ok(listing)
    }

    /// The raw `LoadTableResult` of one table (read by [`crate::describe`]).
    pub fn load_table(&self, namespace: &[String], table: &str) -> Result<Value, CatalogError> {
        let base = self.base()?;
        let path = format!(
            "{base}/namespaces/{}/tables/{}?snapshots=refs",
            namespace_segment(namespace),
            encode(table)
        );
        let mut levels = namespace.to_vec();
        levels.push(table.to_owned());
        let what = format!("table {}", self.shown(&levels));
        let body = self.get(&path, &what)?;
        serde_json::from_str(&body)
            .map_err(|e| self.malformed(&what, format!("the answer is not JSON ({e})")))
    }

    /// A dotted path of this catalog's, for messages.
    fn shown(&self, levels: &[String]) -> String {
        let mut all = vec![self.name.clone()];
        all.extend(levels.iter().cloned());
        crate::render_path(&all)
    }

    fn malformed(&self, what: &str, message: String) -> CatalogError {
        CatalogError::Malformed {
            catalog: self.name.clone(),
            what: what.to_owned(),
            message,
        }
    }

    /// Every entry of `key` over the pages of a listing, at most [`MAX_PAGES`] pages.
    fn pages(&self, first: &str, what: &str, key: &str) -> Result<Vec<Value>, CatalogError> {
        let mut out = Vec::new();
        let mut path = first.to_owned();
        for _ in 0..MAX_PAGES {
            let body = self.get(&path, what)?;
            let page: Value = serde_json::from_str(&body)
                .map_err(|e| self.malformed(what, format!("the answer is not JSON ({e})")))?;
            let Some(entries) = page.get(key).and_then(Value::as_array) else {
                return Err(self.malformed(what, format!("it has no `{key}` list")));
            };
            out.extend(entries.iter().cloned());
            match page.get("next-page-token").and_then(Value::as_str) {
                Some(token) if !token.is_empty() && out.len() <= MAX_ENTRIES => {
                    let (head, _) = path.split_once("pageToken=").unwrap_or((&path, ""));
                    let rest = path
                        .split_once("pageToken=")
                        .and_then(|(_, r)| r.split_once('&').map(|(_, r)| format!("&{r}")))
                        .unwrap_or_default();
                    path = format!("{head}pageToken={}{rest}", encode(token));
                }
                Some(_) | None => return Ok(out),
            }
        }
        Ok(out)
    }

    /// `/v1/<prefix>`, the prefix read from the catalog's configuration once.
    fn base(&self) -> Result<String, CatalogError> {
        let mut cached = self.prefix.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = cached.as_ref() {
            return Ok(p.clone());
        }
        let query = self
            .config
            .warehouse
            .as_ref()
            .map(|w| format!("?warehouse={}", encode(w)))
            .unwrap_or_default();
        let body = self.get(&format!("/v1/config{query}"), "its configuration")?;
        let config: Value = serde_json::from_str(&body).map_err(|e| {
            self.malformed("its configuration", format!("the answer is not JSON ({e})"))
        })?;
        let from = |part: &str| {
            config
                .get(part)
                .and_then(|p| p.get("prefix"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let prefix = from("overrides")
            .or_else(|| self.config.prefix.clone())
            .or_else(|| from("defaults"));
        let base = match prefix.filter(|p| !p.is_empty()) {
            Some(p) => format!(
                "/v1/{}",
                p.split('/').map(encode).collect::<Vec<_>>().join("/")
            ),
            None => "/v1".to_owned(),
        };
        *cached = Some(base.clone());
        Ok(base)
    }

    /// GETs `path` (after the REST base): the body of a 200, the token fetched again once on
    /// 401/419, every other status a typed error.
    fn get(&self, path: &str, what: &str) -> Result<String, CatalogError> {
        let mut refreshed = false;
        loop {
            let token = self.bearer()?;
            let answer = self.send(path, token.as_deref())?;
            match answer.status {
                200..=299 => return Ok(answer.body),
                401 | 419 if self.oauth() && !refreshed => {
                    refreshed = true;
                    self.forget_token();
                }
                401 | 419 => {
                    return Err(CatalogError::Unauthorized {
                        catalog: self.name.clone(),
                        status: answer.status,
                        detail: if refreshed {
                            format!(
                                " even with a token fetched again just now{}; check that the principal's grants cover this catalog",
                                error_message(&answer.body)
                                    .map(|m| format!(" ({m})"))
                                    .unwrap_or_default()
                            )
                        } else if self.config.token.is_some() {
                            "; the configured token is invalid or expired: replace it".to_owned()
                        } else {
                            "; it needs credentials: set client_id and client_secret (or token)"
                                .to_owned()
                        },
                    });
                }
                403 => {
                    return Err(CatalogError::Forbidden {
                        catalog: self.name.clone(),
                        what: what.to_owned(),
                        message: self.message(&answer),
                    });
                }
                404 => {
                    return Err(CatalogError::NotFound {
                        catalog: self.name.clone(),
                        what: what.to_owned(),
                        message: self.message(&answer),
                    });
                }
                status => {
                    return Err(CatalogError::Http {
                        catalog: self.name.clone(),
                        what: what.to_owned(),
                        status,
                        message: self.message(&answer),
                    });
                }
            }
        }
    }

    fn message(&self, answer: &Answer) -> String {
        error_message(&answer.body).unwrap_or_else(|| format!("HTTP {}", answer.status))
    }

    fn send(&self, path: &str, token: Option<&str>) -> Result<Answer, CatalogError> {
        let url = format!("{}{path}", self.config.url.trim_end_matches('/'));
        let mut request = self.agent.get(&url).header("Accept", "application/json");
        if let Some(t) = token {
            request = request.header("Authorization", format!("Bearer {t}"));
        }
        if let Some(realm) = &self.config.realm {
            request = request.header(self.realm_header(), realm.as_str());
        }
        let response = request.call();
        self.read(response, &self.config.url)
    }

    fn realm_header(&self) -> &str {
        self.config
            .realm_header
            .as_deref()
            .unwrap_or(DEFAULT_REALM_HEADER)
    }

    fn read(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        url: &str,
    ) -> Result<Answer, CatalogError> {
        let unreachable = |e: ureq::Error| CatalogError::Unreachable {
            catalog: self.name.clone(),
            url: url.to_owned(),
            reason: e.to_string(),
        };
        let mut response = response.map_err(unreachable)?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(unreachable)?;
        Ok(Answer { status, body })
    }

    fn oauth(&self) -> bool {
        self.config.client_id.is_some()
    }

    fn forget_token(&self) {
        *self.token.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The bearer token to send, if any: the configured one, or one from the token endpoint.
    fn bearer(&self) -> Result<Option<String>, CatalogError> {
        let mut cached = self.token.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = cached.as_ref()
            && t.expires.is_none_or(|e| Instant::now() + EXPIRY_MARGIN < e)
        {
            return Ok(Some(t.value.clone()));
        }
        let token = match (
            &self.config.client_id,
            &self.config.client_secret,
            &self.config.token,
        ) {
            (Some(id), Some(secret), _) => self.fetch_token(id, secret)?,
            (_, _, Some(reference)) => Token {
                value: self.resolve("token", reference)?,
                expires: None,
            },
            (Some(_) | None, Some(_) | None, None) => return Ok(None),
        };
        let value = token.value.clone();
        *cached = Some(token);
        Ok(Some(value))
    }

    fn resolve(&self, setting: &str, reference: &str) -> Result<String, CatalogError> {
        self.credentials
            .resolve(reference)
            .map_err(|message| CatalogError::Credential {
                catalog: self.name.clone(),
                setting: setting.to_owned(),
                message,
            })
    }

    /// OAuth2 client credentials (RFC 6749 §4.4), as Polaris and the Iceberg REST spec take
    /// them: a form POST to the token endpoint.
    fn fetch_token(&self, id_ref: &str, secret_ref: &str) -> Result<Token, CatalogError> {
        let id = self.resolve("client_id", id_ref)?;
        let secret = self.resolve("client_secret", secret_ref)?;
        let url = self.config.token_url.clone().unwrap_or_else(|| {
            format!("{}/v1/oauth/tokens", self.config.url.trim_end_matches('/'))
        });
        let scope = self.config.scope.as_deref().unwrap_or(DEFAULT_SCOPE);
        let mut request = self.agent.post(&url).header("Accept", "application/json");
        if let Some(realm) = &self.config.realm {
            request = request.header(self.realm_header(), realm.as_str());
        }
        let response = request.send_form([
            ("grant_type", "client_credentials"),
            ("client_id", id.as_str()),
            ("client_secret", secret.as_str()),
            ("scope", scope),
        ]);
        let answer = self.read(response, &url)?;
        let refused = |reason: String| CatalogError::TokenRefused {
            catalog: self.name.clone(),
            url: url.clone(),
            reason,
        };
        if !(200..300).contains(&answer.status) {
            let reason = serde_json::from_str::<Value>(&answer.body)
                .ok()
                .and_then(|v| {
                    let error = v.get("error")?.as_str()?.to_owned();
                    let description = v
                        .get("error_description")
                        .and_then(Value::as_str)
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default();
                    Some(format!("{error}{description}"))
                })
                .unwrap_or_else(|| format!("HTTP {}", answer.status));
            return Err(refused(format!("{reason} (HTTP {})", answer.status)));
        }
        #[derive(Deserialize)]
        struct Issued {
            access_token: String,
            #[serde(default)]
            expires_in: Option<u64>,
        }
        let issued: Issued = serde_json::from_str(&answer.body)
            .map_err(|e| refused(format!("the answer is no token ({e})")))?;
        if issued.access_token.is_empty() {
            return Err(refused("the answer's access_token is empty".into()));
        }
        Ok(Token {
            value: issued.access_token,
            expires: issued
                .expires_in
                .map(|s| Instant::now() + Duration::from_secs(s)),
        })
    }
}

/// The `error.message` of an Iceberg REST error body (or an OAuth2 `error_description`).
fn error_message(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    let e = v.get("error")?;
    let text = e
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| v.get("error_description").and_then(Value::as_str))
        .or_else(|| e.as_str())?;
    // A server's message is the server's words: bounded, one line.
    let line: String = text.chars().filter(|c| !c.is_control()).take(500).collect();
    Some(line)
}

/// A catalog URL is http(s); plain HTTP only to this machine (the token would cross the
/// network in the clear).
fn check_url(url: &str) -> Result<(), String> {
    let rest = if let Some(r) = url.strip_prefix("https://") {
        return if r.is_empty() {
            Err("names no host".into())
        } else {
            Ok(())
        };
    } else if let Some(r) = url.strip_prefix("http://") {
        r
    } else {
        return Err(format!("`{url}` must be http:// or https://"));
    };
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = host.rsplit_once(':').map_or(host, |(h, p)| {
        if p.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    if matches!(host, "localhost" | "127.0.0.1" | "[::1]") || host.starts_with("127.") {
        Ok(())
    } else {
        Err(format!(
            "`{url}` is plain HTTP to another machine: the credentials and the catalog's answers would cross the network in the clear; use https://"
        ))
    }
}
