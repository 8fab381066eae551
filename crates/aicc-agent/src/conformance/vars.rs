//! Scenario variables (`${session_id}`, `${tools.move.limits...}`,
//! captures) and their substitution into messages and matchers.
use serde_json::{Map, Value};

/// Longest text a variable's JSON may take when spliced into a string.
const MAX_SPLICE_BYTES: usize = 64 * 1024;

/// Why a `${var}` reference cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VarError {
    /// No variable of that name; `set` lists those that are.
    #[error("variable '${{{path}}}' is not set (set: {})", if set.is_empty() { "none".to_string() } else { set.join(", ") })]
    NotSet { path: String, set: Vec<String> },
    /// The variable is set but has nothing at that path.
    #[error("variable '${{{path}}}': '{name}' has no such path")]
    NoSuchPath { path: String, name: String },
    /// `${` without its `}`.
    #[error("'{text}': '${{' without a closing '}}'")]
    Unclosed { text: String },
    /// A value too long to splice into a string.
    #[error("variable '${{{path}}}' is {bytes} bytes of text; too long to splice into a string")]
    TooLong { path: String, bytes: usize },
}

/// Variables of one scenario run: a JSON object, looked up by dotted paths
/// (`tools.move.input_schema`, `second.session_id`, `output.pose.x`).
#[derive(Debug, Clone, Default)]
pub struct Variables {
    values: Map<String, Value>,
}

/// A value inside `root` at a dotted path; array indices are numbers.
pub fn lookup<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    if path.is_empty() {
        return Some(root);
    }
    path.split('.').try_fold(root, |value, segment| match value {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

impl Variables {
    pub fn set(&mut self, name: &str, value: Value) {
        self.values.insert(name.to_string(), value);
    }

    /// `name` or `name.path.inside`.
    pub fn get(&self, path: &str) -> Option<&Value> {
        let (name, rest) = path.split_once('.').unwrap_or((path, ""));
        lookup(self.values.get(name)?, rest)
    }

    fn require(&self, path: &str) -> Result<&Value, VarError> {
        self.get(path).ok_or_else(|| {
            let name = path.split('.').next().unwrap_or(path);
            if self.values.contains_key(name) {
                VarError::NoSuchPath { path: path.to_string(), name: name.to_string() }
            } else {
                let mut set: Vec<String> = self.values.keys().cloned().collect();
                set.sort_unstable();
                VarError::NotSet { path: path.to_string(), set }
            }
        })
    }

    /// Replaces `${var}` in every string of `value`: a string that is
    /// exactly `"${var}"` becomes the variable's JSON value; inside a longer
    /// string, its text (strings as they are, other values as JSON).
    /// Object keys are left alone.
    pub fn substitute(&self, value: &Value) -> Result<Value, VarError> {
        Ok(match value {
            Value::String(text) => self.substitute_str(text)?,
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.substitute(v)).collect::<Result<_, _>>()?)
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.substitute(v)?)))
                    .collect::<Result<_, VarError>>()?,
            ),
            other => other.clone(),
        })
    }

    fn substitute_str(&self, text: &str) -> Result<Value, VarError> {
        if let Some(path) = whole_reference(text) {
            return self.require(path).cloned();
        }
        if !text.contains("${") {
            return Ok(Value::String(text.to_string()));
        }
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end =
                after.find('}').ok_or_else(|| VarError::Unclosed { text: text.to_string() })?;
            let value = self.require(&after[..end])?;
            let spliced = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if spliced.len() > MAX_SPLICE_BYTES {
                return Err(VarError::TooLong {
                    path: after[..end].to_string(),
                    bytes: spliced.len(),
                });
            }
            out.push_str(&spliced);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(Value::String(out))
    }

    /// A string field that may be a variable reference (e.g. a call_id).
    pub fn substitute_text(&self, text: &str) -> Result<String, VarError> {
        match self.substitute_str(text)? {
            Value::String(s) => Ok(s),
            other => Ok(other.to_string()),
        }
    }
}

/// `path` when `text` is exactly `${path}`.
pub fn whole_reference(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("${")?.strip_suffix('}')?;
    (!inner.is_empty() && !inner.contains(['{', '}', '$'])).then_some(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> Variables {
        let mut v = Variables::default();
        v.set("session_id", json!("abc-123"));
        v.set("tools", json!({ "say": { "limits": { "calls_per_minute": 30 } } }));
        v.set("manifest", json!({ "tools": [{ "id": "say" }, { "id": "move" }] }));
        v.set("cursor", json!(7));
        v
    }

    #[test]
    fn a_whole_reference_keeps_the_json_type() {
        let v = vars();
        assert_eq!(v.substitute(&json!("${cursor}")).unwrap(), json!(7));
        assert_eq!(
            v.substitute(&json!("${tools.say.limits}")).unwrap(),
            json!({ "calls_per_minute": 30 })
        );
        assert_eq!(v.substitute(&json!("${manifest.tools.1.id}")).unwrap(), json!("move"));
        assert_eq!(
            v.substitute(&json!({ "a": ["${cursor}", 1], "${cursor}": true })).unwrap(),
            json!({ "a": [7, 1], "${cursor}": true }),
            "keys are not substituted"
        );
    }

    #[test]
    fn references_inside_strings_splice_text() {
        let v = vars();
        assert_eq!(
            v.substitute(&json!("session ${session_id} at ${cursor}")).unwrap(),
            json!("session abc-123 at 7")
        );
        assert_eq!(v.substitute_text("c-${cursor}").unwrap(), "c-7");
        assert_eq!(v.substitute(&json!("no references")).unwrap(), json!("no references"));
    }

    #[test]
    fn unknown_variables_and_paths_are_named() {
        let v = vars();
        let unset = v.substitute(&json!("${nope}")).unwrap_err().to_string();
        assert!(unset.contains("'${nope}' is not set") && unset.contains("session_id"), "{unset}");
        let no_path = v.substitute(&json!("x ${tools.move.limits}")).unwrap_err().to_string();
        assert!(no_path.contains("'tools' has no such path"), "{no_path}");
        assert!(v
            .substitute(&json!("a ${unclosed"))
            .unwrap_err()
            .to_string()
            .contains("without a closing"));
        assert_eq!(
            v.substitute(&json!("${tools.move}")),
            Err(VarError::NoSuchPath { path: "tools.move".into(), name: "tools".into() })
        );
    }
}
