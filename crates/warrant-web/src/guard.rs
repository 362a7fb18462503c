//! The door every request passes before a handler sees it: the `Host` (DNS rebinding) and
//! `Origin` checks, the launch token exchanged for a session cookie, the token again on every
//! `/api/` request when the bind is not loopback, the CSRF header on every state-changing
//! request, a limit on requests at once, and the headers every response carries (a strict CSP,
//! `frame-ancestors 'none'`, `nosniff`, `no-referrer`). No CORS header is ever sent.
//!
//! The launch token is never kept: only its SHA-256 is, and a session is a fresh random id
//! known to the browser alone (its SHA-256 here), dying with the process. Each defense has a
//! debug-only negative control (`WARRANT_TEST_DISABLE=web-host|web-origin|web-cookie|web-csrf|
//! web-csp|web-token`) so the tests can show the attack succeeding without it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::api::Web;

pub const COOKIE: &str = "warrant_session";
pub const CSRF_HEADER: &str = "x-warrant-csrf";

/// The page's policy: scripts and styles only from this origin (no inline script, no `eval`),
/// nothing framed, no form posts anywhere, no plugin, no base rewriting.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// One signed-in browser.
#[derive(Clone, Debug)]
pub struct Session {
    /// The value the page sends in [`CSRF_HEADER`]; readable only by a page of this origin
    /// (`GET /api/session`), so another site can neither read nor forge it.
    pub csrf: String,
}

/// The launch's secrets and the allowed names this server answers to.
#[derive(Debug)]
pub struct Door {
    token: [u8; 32],
    sessions: Mutex<HashMap<[u8; 32], Session>>,
    hosts: Vec<String>,
    any_ip_host: Option<u16>,
    remote: bool,
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    hex::encode(bytes)
}

/// `127.0.0.1:8080`, `[::1]:8080`: the authority of `addr` in a URL.
pub fn authority(addr: SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V4(ip) => format!("{ip}:{}", addr.port()),
        IpAddr::V6(ip) => format!("[{ip}]:{}", addr.port()),
    }
}

pub fn disabled(what: &str) -> bool {
    warrant_host::controls::disabled(what)
}

impl Door {
    /// A door for a server bound at `local`, and the launch token (to show once, then drop).
    pub fn new(local: SocketAddr, remote: bool) -> (Self, String) {
        let token = random_hex();
        let port = local.port();
        let mut hosts = vec![authority(local)];
        if local.ip().is_loopback() {
            hosts = vec![
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
            ];
        }
        let door = Door {
            token: digest(&token),
            sessions: Mutex::new(HashMap::new()),
            hosts,
            // Bound to every address: any IP literal names it (never a DNS name, which is what
            // a rebinding attack would use).
            any_ip_host: local.ip().is_unspecified().then_some(port),
            remote,
        };
        (door, token)
    }

    fn host_allowed(&self, host: &str) -> bool {
        if self.hosts.iter().any(|h| h == host) {
            return true;
        }
        match self.any_ip_host {
            Some(port) => host
                .parse::<SocketAddr>()
                .is_ok_and(|addr| addr.port() == port),
            None => false,
        }
    }

    fn token_matches(&self, presented: &str) -> bool {
        // Compared as digests: the comparison's time says nothing about the token.
        digest(presented) == self.token
    }

    fn session(&self, id: &str) -> Option<Session> {
        let sessions = self.sessions.lock().ok()?;
        sessions.get(&digest(id)).cloned()
    }

    fn open_session(&self) -> Option<String> {
        let id = random_hex();
        let mut sessions = self.sessions.lock().ok()?;
        sessions.insert(digest(&id), Session { csrf: random_hex() });
        Some(id)
    }
}

/// A refusal at the door, as JSON for `/api/` and as a short page otherwise.
pub fn refusal(status: StatusCode, code: &str, message: &str, api: bool) -> Response {
    if api {
        let body = serde_json::json!({"code": code, "message": message, "class": "refused"});
        (status, axum::Json(body)).into_response()
    } else {
        let text = format!("{code}: {message}\n");
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            text,
        )
            .into_response()
    }
}

fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| v)
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// The middleware: checks, then the handler, then the headers.
pub async fn guard(State(web): State<Arc<Web>>, mut req: Request, next: Next) -> Response {
    let mut response = check(&web, &mut req).await;
    if response.is_none() {
        response = Some(next.run(req).await);
    }
    let mut response =
        response.unwrap_or_else(|| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    secure_headers(response.headers_mut());
    response
}

async fn check(web: &Web, req: &mut Request) -> Option<Response> {
    let door = &web.door;
    let api = req.uri().path().starts_with("/api/");
    let headers = req.headers();
    // DNS rebinding: a page of another name resolved to this address sends that name.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !disabled("web-host") && !door.host_allowed(host) {
        return Some(refusal(
            StatusCode::FORBIDDEN,
            "W-WEBUI-010",
            &format!(
                "this server does not answer to the host name `{host}`; open the address `warrant web` printed"
            ),
            api,
        ));
    }
    // A page of another origin: refused whatever it asks (CORS is off, so it could not read
    // an answer anyway; this stops it from causing one).
    if !disabled("web-origin") {
        let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
        let cross_site = headers
            .get("sec-fetch-site")
            .and_then(|h| h.to_str().ok())
            .is_some_and(|s| s == "cross-site");
        let foreign = origin.is_some_and(|o| {
            o.strip_prefix("http://")
                .is_none_or(|authority| authority != host || !door.host_allowed(authority))
        });
        if foreign || cross_site {
            return Some(refusal(
                StatusCode::FORBIDDEN,
                "W-WEBUI-011",
                &format!(
                    "a request from another origin ({}) is refused",
                    origin.unwrap_or("a cross-site page")
                ),
                api,
            ));
        }
    }
    if req.method() == Method::OPTIONS {
        return Some(refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            "W-WEBUI-012",
            "cross-origin requests are not answered (no CORS)",
            api,
        ));
    }
    // The launch token, exchanged once for a cookie, then stripped from the address bar.
    if req.uri().path() == "/"
        && let Some(token) = query_token(req.uri().query())
    {
        if !door.token_matches(token) {
            return Some(refusal(
                StatusCode::UNAUTHORIZED,
                "W-WEBUI-014",
                "this token is not the one of this launch; open the address `warrant web` printed last",
                false,
            ));
        }
        let Some(id) = door.open_session() else {
            return Some(StatusCode::INTERNAL_SERVER_ERROR.into_response());
        };
        let location = if door.remote {
            // The page keeps the token for its own tab (sessionStorage) to send on every call.
            format!("/#token={token}")
        } else {
            "/".to_owned()
        };
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::SEE_OTHER;
        let headers = response.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&location) {
            headers.insert(header::LOCATION, v);
        }
        if let Ok(v) =
            HeaderValue::from_str(&format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict"))
        {
            headers.insert(header::SET_COOKIE, v);
        }
        return Some(response);
    }
    let session = if disabled("web-cookie") {
        Some(Session {
            csrf: String::new(),
        })
    } else {
        cookie_value(headers, COOKIE).and_then(|id| door.session(id))
    };
    let Some(session) = session else {
        return Some(refusal(
            StatusCode::UNAUTHORIZED,
            "W-WEBUI-015",
            "not signed in: open the address with the token that `warrant web` printed",
            api,
        ));
    };
    if api && door.remote && !disabled("web-token") {
        let ok = bearer(headers).is_some_and(|t| door.token_matches(t));
        if !ok {
            return Some(refusal(
                StatusCode::UNAUTHORIZED,
                "W-WEBUI-016",
                "this server listens beyond loopback: every request needs the launch token (Authorization: Bearer)",
                api,
            ));
        }
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD);
    if !safe && !disabled("web-csrf") {
        let sent = headers.get(CSRF_HEADER).and_then(|h| h.to_str().ok());
        if session.csrf.is_empty() || sent != Some(session.csrf.as_str()) {
            return Some(refusal(
                StatusCode::FORBIDDEN,
                "W-WEBUI-013",
                "a state-changing request needs the page's CSRF header; reload the page",
                api,
            ));
        }
    }
    req.extensions_mut().insert(session);
    None
}

fn secure_headers(headers: &mut HeaderMap) {
    if !disabled("web-csp") {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_loopback_door_answers_to_loopback_names_of_its_port_only() {
        let (door, token) = Door::new("127.0.0.1:8080".parse().unwrap(), false);
        let answers: Vec<bool> = [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "127.0.0.1:8081",
            "evil.example:8080",
            "127.0.0.1",
            "10.0.0.1:8080",
        ]
        .iter()
        .map(|h| door.host_allowed(h))
        .collect();
        assert_eq!(answers, vec![true, true, true, false, false, false, false]);
        assert!(door.token_matches(&token));
        assert!(!door.token_matches(&token[1..]));
        assert_eq!(token.len(), 64);
    }

    #[test]
    fn a_door_on_every_address_answers_to_ip_literals_never_to_names() {
        let (door, _) = Door::new("0.0.0.0:9000".parse().unwrap(), true);
        let answers: Vec<bool> = [
            "10.1.2.3:9000",
            "[fe80::1]:9000",
            "evil.example:9000",
            "10.1.2.3:9001",
        ]
        .iter()
        .map(|h| door.host_allowed(h))
        .collect();
        assert_eq!(answers, vec![true, true, false, false]);
    }

    #[test]
    fn the_session_cookie_and_the_token_are_read_exactly() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; warrant_session=abc; b=2"),
        );
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("warrant_sessionx=no"),
        );
        assert_eq!(cookie_value(&headers, COOKIE), Some("abc"));
        assert_eq!(query_token(Some("x=1&token=t0k")), Some("t0k"));
        assert_eq!(query_token(Some("tokens=t0k")), None);
        assert_eq!(query_token(None), None);
    }

    #[test]
    fn sessions_are_kept_by_digest_and_each_has_its_own_csrf_value() {
        let (door, _) = Door::new("127.0.0.1:1".parse().unwrap(), false);
        let one = door.open_session().unwrap();
        let two = door.open_session().unwrap();
        let (a, b) = (door.session(&one).unwrap(), door.session(&two).unwrap());
        assert_ne!(a.csrf, b.csrf);
        assert!(door.session("not-a-session").is_none());
        let kept = door.sessions.lock().unwrap();
        assert!(!kept.contains_key(&[0u8; 32]));
        assert!(kept.contains_key(&digest(&one)));
    }
}
