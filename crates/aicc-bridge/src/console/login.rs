//! Who may use the console: an admin token exchanged once for a session
//! cookie, and a brake on guessing. No I/O: the handlers pass `now` and
//! the request's source address.
//!
//! The brake is per source address and never locks the right token out:
//! an address that sent [`MAX_FAILURES`] wrong tokens within
//! [`FAILURE_WINDOW`] has its wrong tokens answered 429 (and slowly, by
//! the handler), but the operator's token is always checked and always
//! admitted, from any address, so that a guesser cannot lock the operator
//! out. Tokens are long random secrets: what the brake limits is the noise.
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The cookie that carries a console session.
pub const COOKIE: &str = "aicc_console";
/// A console session lasts this long after it was opened.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Console sessions kept at once (the oldest is ended to open another).
pub const MAX_SESSIONS: usize = 64;
/// Refused logins from one address within [`FAILURE_WINDOW`] before its
/// further wrong tokens are throttled.
pub const MAX_FAILURES: usize = 10;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Addresses whose refusals are remembered at once (the one refused
/// longest ago is forgotten first).
pub const MAX_TRACKED_ADDRESSES: usize = 1024;

/// What a login attempt led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// The session id to set as the cookie.
    Granted(String),
    /// The token is not an admin token.
    Refused,
    /// The token is not an admin token, and this address sent too many of
    /// those lately: retry after this (the right token is never throttled).
    Throttled { retry_after: Duration },
}

#[derive(Debug, Default)]
pub struct Logins {
    /// Session id → when it ends.
    sessions: HashMap<String, Instant>,
    /// Refused attempts in the window per source address, oldest first.
    failures: HashMap<IpAddr, VecDeque<Instant>>,
}

impl Logins {
    /// Decides an attempt from `source`. `is_admin` says whether the
    /// presented token is an admin token (checked by the caller, in
    /// constant time); `new_session_id` is the random id to hand out if granted.
    pub fn attempt(
        &mut self,
        is_admin: bool,
        new_session_id: String,
        source: IpAddr,
        now: Instant,
    ) -> Login {
        if is_admin {
            self.sessions.retain(|_, ends| *ends > now);
            if self.sessions.len() >= MAX_SESSIONS {
                if let Some(oldest) =
                    self.sessions.iter().min_by_key(|(_, ends)| **ends).map(|(id, _)| id.clone())
                {
                    self.sessions.remove(&oldest);
                }
            }
            self.sessions.insert(new_session_id.clone(), now + SESSION_LIFETIME);
            return Login::Granted(new_session_id);
        }
        self.forget_old_failures(now);
        let refusals = self.failures.entry(source).or_default();
        refusals.push_back(now);
        if refusals.len() > MAX_FAILURES {
            refusals.pop_front();
            let oldest = refusals.front().copied().unwrap_or(now);
            return Login::Throttled {
                retry_after: FAILURE_WINDOW.saturating_sub(now.saturating_duration_since(oldest)),
            };
        }
        Login::Refused
    }

    /// Refusals older than the window go, and the map stays bounded.
    fn forget_old_failures(&mut self, now: Instant) {
        self.failures.retain(|_, refusals| {
            refusals.retain(|at| now.saturating_duration_since(*at) < FAILURE_WINDOW);
            !refusals.is_empty()
        });
        while self.failures.len() >= MAX_TRACKED_ADDRESSES {
            let Some(stalest) =
                self.failures.iter().min_by_key(|(_, r)| r.back().copied()).map(|(a, _)| *a)
            else {
                break;
            };
            self.failures.remove(&stalest);
        }
    }

    /// Whether a request's `Cookie` header carries a live console session.
    pub fn admits(&self, cookie_header: Option<&str>, now: Instant) -> bool {
        let Some(id) = cookie_header.and_then(session_cookie) else { return false };
        self.sessions.iter().any(|(known, ends)| {
            *ends > now
                && bool::from(subtle::ConstantTimeEq::ct_eq(known.as_bytes(), id.as_bytes()))
        })
    }

    /// Ends the session of a `Cookie` header (logging out).
    pub fn end(&mut self, cookie_header: Option<&str>) {
        if let Some(id) = cookie_header.and_then(session_cookie) {
            self.sessions.remove(id);
        }
    }
}

/// The console session id in a `Cookie` header's `name=value; ...` pairs.
pub fn session_cookie(header: &str) -> Option<&str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
        .filter(|v| !v.is_empty())
}

/// The `token` field of an `application/x-www-form-urlencoded` body.
pub fn form_token(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == "token")
        .and_then(|(_, value)| percent_decode(value))
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here() -> IpAddr {
        "127.0.0.1".parse().unwrap()
    }

    #[test]
    fn an_admin_token_opens_a_session_its_cookie_admits_until_it_ends() {
        let t0 = Instant::now();
        let mut logins = Logins::default();
        assert_eq!(logins.attempt(true, "abc".into(), here(), t0), Login::Granted("abc".into()));
        assert!(logins.admits(Some("theme=dark; aicc_console=abc"), t0));
        assert!(!logins.admits(Some("aicc_console=abd"), t0), "another id");
        assert!(!logins.admits(Some("aicc_console="), t0));
        assert!(!logins.admits(None, t0));
        assert!(!logins.admits(Some("aicc_console=abc"), t0 + SESSION_LIFETIME), "expired");
        logins.end(Some("aicc_console=abc"));
        assert!(!logins.admits(Some("aicc_console=abc"), t0), "logged out");
    }

    #[test]
    fn a_guessing_address_is_throttled_but_the_right_token_is_never_locked_out() {
        let t0 = Instant::now();
        let mut logins = Logins::default();
        let guesser: IpAddr = "10.0.0.66".parse().unwrap();
        for n in 0..MAX_FAILURES {
            assert_eq!(logins.attempt(false, format!("s{n}"), guesser, t0), Login::Refused);
        }
        assert!(
            matches!(logins.attempt(false, "s".into(), guesser, t0 + Duration::from_secs(10)), Login::Throttled { retry_after } if retry_after == Duration::from_secs(50))
        );
        assert_eq!(
            logins.attempt(true, "op".into(), guesser, t0 + Duration::from_secs(10)),
            Login::Granted("op".into()),
            "the right token, even from the guessing address"
        );
        assert_eq!(
            logins.attempt(false, "x".into(), here(), t0 + Duration::from_secs(10)),
            Login::Refused,
            "another address is not throttled"
        );
        assert_eq!(
            logins.attempt(
                false,
                "y".into(),
                guesser,
                t0 + FAILURE_WINDOW + Duration::from_secs(11)
            ),
            Login::Refused,
            "the window passed"
        );
    }

    #[test]
    fn remembered_addresses_are_bounded() {
        let t0 = Instant::now();
        let mut logins = Logins::default();
        for n in 0..(MAX_TRACKED_ADDRESSES as u32 + 50) {
            let address = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n));
            logins.attempt(false, "s".into(), address, t0 + Duration::from_micros(n as u64));
        }
        assert!(logins.failures.len() <= MAX_TRACKED_ADDRESSES);
    }

    #[test]
    fn sessions_are_bounded() {
        let t0 = Instant::now();
        let mut logins = Logins::default();
        for n in 0..MAX_SESSIONS + 5 {
            logins.attempt(true, format!("s{n}"), here(), t0 + Duration::from_millis(n as u64));
        }
        assert_eq!(logins.sessions.len(), MAX_SESSIONS);
        assert!(!logins.admits(Some("aicc_console=s0"), t0), "the oldest was ended");
        assert!(logins.admits(Some(&format!("aicc_console=s{}", MAX_SESSIONS + 4)), t0));
    }

    #[test]
    fn form_bodies_are_decoded() {
        assert_eq!(form_token(b"token=a%2Bb%3D+c&x=1").as_deref(), Some("a+b= c"));
        assert_eq!(form_token(b"x=1"), None);
        assert_eq!(form_token(b"token=%zz"), None, "bad escape");
        assert_eq!(form_token(b"token=%4"), None, "cut escape");
    }
}
