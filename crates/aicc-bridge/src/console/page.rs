//! The page itself: HTML, script and style, built into the binary (nothing
//! for the user to build or fetch; the page loads nothing from elsewhere).

pub const CONSOLE: &str = include_str!("page/console.html");
pub const SCRIPT: &str = include_str!("page/console.js");
pub const STYLE: &str = include_str!("page/console.css");

/// The login form, with a message when a login was refused.
pub fn login(message: Option<&str>) -> String {
    let notice = message
        .map(|m| format!("<p class=\"refused\" id=\"refused\">{}</p>", escape(m)))
        .unwrap_or_default();
    include_str!("page/login.html").replace("<!--notice-->", &notice)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_refusal_is_shown_escaped() {
        let page = super::login(Some("<b>no</b>"));
        assert!(page.contains("&lt;b&gt;no&lt;/b&gt;") && !page.contains("<b>no"));
        assert!(!super::login(None).contains("id=\"refused\""));
    }
}
