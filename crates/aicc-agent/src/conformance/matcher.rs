//! Matchers of the scenario format: a YAML/JSON value that a received
//! message must satisfy. Plain values compare equal (numbers as f64),
//! objects list the keys that must match (others are ignored), arrays
//! match element-wise; objects whose keys start with `$` are operators.
//! A non-match says where and why, e.g.
//! `at error.code: expected "tool_unknown", got "invalid_input"`.
//!
//! Variables (`${var}`) are resolved while matching, and a value taken
//! from a variable is compared as plain data: a `$` key inside it (a JSON
//! Schema's `$schema`) is not an operator.
use serde_json::Value;

use super::vars::{whole_reference, Variables};

/// The operators, for validation and messages.
pub const OPERATORS: &[&str] = &[
    "$type",
    "$any",
    "$absent",
    "$approx",
    "$tol",
    "$from",
    "$gte",
    "$lte",
    "$gt",
    "$lt",
    "$one_of",
    "$contains",
    "$all",
    "$len",
    "$min_len",
    "$text",
    "$capture",
];
const TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array", "null"];
/// Default tolerance of `$approx` without `$tol`.
const DEFAULT_TOLERANCE: f64 = 1e-9;
/// Longest rendering of a value in a message.
const SHOWN_CHARS: usize = 160;

/// Why a value did not match.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Where, as a dotted path from the matched value ("" = the value itself).
    pub path: String,
    pub reason: String,
}

impl Mismatch {
    fn new(path: &str, reason: impl Into<String>) -> Self {
        Self { path: path.to_string(), reason: reason.into() }
    }

    /// How deep into the value the match got (for picking the nearest
    /// miss); a message of another `type` is as far as can be.
    pub fn depth(&self) -> usize {
        if self.path.is_empty() || self.path == "type" {
            0
        } else {
            self.path.split('.').count()
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "at {}: {}", self.path, self.reason)
        }
    }
}

/// Variables captured by a successful match (`$capture`).
pub type Captures = Vec<(String, Value)>;

/// A value, shortened for messages.
pub fn show(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= SHOWN_CHARS {
        return text;
    }
    let cut: String = text.chars().take(SHOWN_CHARS).collect();
    format!("{cut}… ({} bytes)", text.len())
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn is_operator_object(value: &Value) -> bool {
    value.as_object().is_some_and(|m| m.keys().any(|k| k.starts_with('$')))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64()
                || n.is_u64()
                || n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.is_finite())
        }
        _ => false,
    }
}

/// A matcher of the wrong shape: where in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{problem}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct MatcherError {
    /// Dotted path inside the matcher ("" = the matcher itself).
    pub path: String,
    pub problem: MatcherProblem,
}

/// What is wrong with a matcher (`got` is the offending value, shortened).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatcherProblem {
    /// A plain key beside `$` operators in one object.
    #[error("'{key}' mixed with $ operators in one object (put operators in their own object)")]
    MixedWithOperators { key: String },
    /// A `$` key that is no operator.
    #[error("unknown operator '{op}' (known: {})", OPERATORS.join(", "))]
    UnknownOperator { op: String },
    /// `$type` naming no JSON type.
    #[error("$type takes one of {}, got {got}", TYPES.join("|"))]
    NotAType { got: String },
    /// `$any` or `$absent` with another argument than true.
    #[error("{op} takes true, got {got}")]
    NotTrue { op: String, got: String },
    /// A comparison or tolerance that is not a number (or a reference to one).
    #[error("{op} takes a number or \"${{var}}\", got {got}")]
    NotANumber { op: String, got: String },
    /// `$from` or `$capture` that is not a variable name.
    #[error("{op} takes a variable name (no ${{}}), got {got}")]
    NotAVariableName { op: String, got: String },
    /// `$len` or `$min_len` that is not a whole number (or a reference to one).
    #[error("{op} takes a whole number or \"${{var}}\", got {got}")]
    NotACount { op: String, got: String },
    /// `$text` that is not a string.
    #[error("$text takes a string, got {got}")]
    TextNotAString { got: String },
    /// `$one_of` that is not a non-empty list.
    #[error("$one_of takes a non-empty list of matchers, got {got}")]
    OneOfNotAList { got: String },
    /// `$tol` or `$from` without `$approx`.
    #[error("$tol and $from go with $approx")]
    WithoutApprox,
    /// `$absent` beside other operators.
    #[error("$absent stands alone")]
    AbsentNotAlone,
    /// `$absent` where there is no key to be missing.
    #[error("$absent applies to an object's key (the key must be missing)")]
    AbsentNotAKey,
}

/// Checks a matcher's shape (before any variable is known): operators
/// known and well-typed, `$absent` only as an object value.
pub fn validate(matcher: &Value) -> Result<(), MatcherError> {
    validate_at(matcher, "", false)
}

fn number_or_reference(value: &Value, path: &str, op: &str) -> Result<(), MatcherError> {
    match value {
        Value::Number(_) => Ok(()),
        Value::String(s) if whole_reference(s).is_some() => Ok(()),
        other => Err(MatcherError {
            path: path.to_string(),
            problem: MatcherProblem::NotANumber { op: op.to_string(), got: show(other) },
        }),
    }
}

/// `object_value`: the matcher is the value of an object key (where
/// `$absent` makes sense).
fn validate_at(matcher: &Value, path: &str, object_value: bool) -> Result<(), MatcherError> {
    let wrong = |problem: MatcherProblem| Err(MatcherError { path: path.to_string(), problem });
    match matcher {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, m)| validate_at(m, &child(path, &i.to_string()), false)),
        Value::Object(map) if is_operator_object(matcher) => {
            if let Some(plain) = map.keys().find(|k| !k.starts_with('$')) {
                return wrong(MatcherProblem::MixedWithOperators { key: plain.clone() });
            }
            if let Some(unknown) = map.keys().find(|k| !OPERATORS.contains(&k.as_str())) {
                return wrong(MatcherProblem::UnknownOperator { op: unknown.clone() });
            }
            for (op, arg) in map {
                match op.as_str() {
                    "$type" => {
                        if !arg.as_str().is_some_and(|t| TYPES.contains(&t)) {
                            return wrong(MatcherProblem::NotAType { got: show(arg) });
                        }
                    }
                    "$any" | "$absent" => {
                        if arg != &Value::Bool(true) {
                            return wrong(MatcherProblem::NotTrue {
                                op: op.clone(),
                                got: show(arg),
                            });
                        }
                    }
                    "$approx" | "$gte" | "$lte" | "$gt" | "$lt" | "$tol" => {
                        number_or_reference(arg, path, op)?
                    }
                    "$from" | "$capture" => {
                        if !arg.as_str().is_some_and(|s| !s.is_empty() && !s.contains("${")) {
                            return wrong(MatcherProblem::NotAVariableName {
                                op: op.clone(),
                                got: show(arg),
                            });
                        }
                    }
                    "$len" | "$min_len" => match arg {
                        Value::Number(n) if n.as_u64().is_some() => {}
                        Value::String(s) if whole_reference(s).is_some() => {}
                        other => {
                            return wrong(MatcherProblem::NotACount {
                                op: op.clone(),
                                got: show(other),
                            })
                        }
                    },
                    "$text" => {
                        if !arg.is_string() {
                            return wrong(MatcherProblem::TextNotAString { got: show(arg) });
                        }
                    }
                    "$one_of" => {
                        let Some(options) = arg.as_array().filter(|a| !a.is_empty()) else {
                            return wrong(MatcherProblem::OneOfNotAList { got: show(arg) });
                        };
                        for (i, option) in options.iter().enumerate() {
                            validate_at(option, &child(path, &format!("$one_of[{i}]")), false)?;
                        }
                    }
                    "$contains" | "$all" => validate_at(arg, &child(path, op), false)?,
                    _ => unreachable!("checked against OPERATORS"),
                }
            }
            if (map.contains_key("$tol") || map.contains_key("$from"))
                && !map.contains_key("$approx")
            {
                return wrong(MatcherProblem::WithoutApprox);
            }
            if map.contains_key("$absent") {
                if map.len() > 1 {
                    return wrong(MatcherProblem::AbsentNotAlone);
                }
                if !object_value {
                    return wrong(MatcherProblem::AbsentNotAKey);
                }
            }
            Ok(())
        }
        Value::Object(map) => {
            map.iter().try_for_each(|(k, m)| validate_at(m, &child(path, k), true))
        }
        _ => Ok(()),
    }
}

/// Matches `actual` against `matcher`; on success returns the captures.
/// Variables referenced must be set (check with [`unresolved`] first: an
/// unset one here is a mismatch).
pub fn matches(matcher: &Value, actual: &Value, vars: &Variables) -> Result<Captures, Mismatch> {
    let mut captures = Vec::new();
    match_at(matcher, actual, vars, "", false, &mut captures)?;
    Ok(captures)
}

/// The first `${var}` in `matcher` that is not set (with the reason).
pub fn unresolved(matcher: &Value, vars: &Variables) -> Option<String> {
    match matcher {
        Value::String(s) if s.contains("${") => {
            vars.substitute(matcher).err().map(|unset| unset.to_string())
        }
        Value::Array(items) => items.iter().find_map(|m| unresolved(m, vars)),
        Value::Object(map) => map.iter().find_map(|(k, m)| {
            if k == "$from" {
                let name = m.as_str().unwrap_or_default();
                return vars
                    .get(name)
                    .is_none()
                    .then(|| format!("$from: variable '{name}' is not set"));
            }
            if k == "$capture" {
                return None;
            }
            unresolved(m, vars)
        }),
        _ => None,
    }
}

fn numbers_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => false,
    }
}

fn resolve(arg: &Value, vars: &Variables, path: &str) -> Result<Value, Mismatch> {
    vars.substitute(arg).map_err(|e| Mismatch::new(path, e.to_string()))
}

fn number_arg(arg: &Value, vars: &Variables, path: &str, op: &str) -> Result<f64, Mismatch> {
    let value = resolve(arg, vars, path)?;
    value.as_f64().ok_or_else(|| {
        Mismatch::new(path, format!("{op} needs a number, the variable holds {}", show(&value)))
    })
}

fn match_at(
    matcher: &Value,
    actual: &Value,
    vars: &Variables,
    path: &str,
    literal: bool,
    captures: &mut Captures,
) -> Result<(), Mismatch> {
    match matcher {
        Value::String(text) if !literal && text.contains("${") => {
            let expected = resolve(matcher, vars, path)?;
            // The variable's value (or the spliced text) is compared as data.
            match_at(&expected, actual, vars, path, true, captures)
        }
        Value::Object(map) if !literal && is_operator_object(matcher) => {
            for (op, arg) in map {
                apply_operator(op, arg, map, actual, vars, path, captures)?;
            }
            Ok(())
        }
        Value::Object(map) => {
            let Value::Object(fields) = actual else {
                return Err(Mismatch::new(
                    path,
                    format!("expected an object, got {} {}", type_name(actual), show(actual)),
                ));
            };
            for (key, m) in map {
                let at = child(path, key);
                let absent = !literal && m.as_object().is_some_and(|o| o.contains_key("$absent"));
                match (fields.get(key), absent) {
                    (None, true) => {}
                    (Some(found), true) => {
                        return Err(Mismatch::new(
                            &at,
                            format!("expected no '{key}', got {}", show(found)),
                        ))
                    }
                    (None, false) => {
                        return Err(Mismatch::new(&at, format!("key '{key}' is missing")))
                    }
                    (Some(found), false) => match_at(m, found, vars, &at, literal, captures)?,
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            let Value::Array(elements) = actual else {
                return Err(Mismatch::new(
                    path,
                    format!(
                        "expected an array of {}, got {} {}",
                        items.len(),
                        type_name(actual),
                        show(actual)
                    ),
                ));
            };
            if items.len() != elements.len() {
                return Err(Mismatch::new(
                    path,
                    format!(
                        "expected {} elements, got {}: {}",
                        items.len(),
                        elements.len(),
                        show(actual)
                    ),
                ));
            }
            for (i, (m, element)) in items.iter().zip(elements).enumerate() {
                match_at(m, element, vars, &child(path, &i.to_string()), literal, captures)?;
            }
            Ok(())
        }
        Value::Number(_) if numbers_equal(matcher, actual) => Ok(()),
        scalar if scalar == actual => Ok(()),
        scalar => {
            Err(Mismatch::new(path, format!("expected {}, got {}", show(scalar), show(actual))))
        }
    }
}

fn apply_operator(
    op: &str,
    arg: &Value,
    all: &serde_json::Map<String, Value>,
    actual: &Value,
    vars: &Variables,
    path: &str,
    captures: &mut Captures,
) -> Result<(), Mismatch> {
    let fail = |reason: String| Err(Mismatch::new(path, reason));
    match op {
        "$any" | "$tol" | "$from" => Ok(()),
        // The object matcher handles $absent (it needs the parent); reaching
        // here means the key was present.
        "$absent" => fail(format!("expected the key to be missing, got {}", show(actual))),
        "$type" => {
            let wanted = arg.as_str().unwrap_or_default();
            let ok = match wanted {
                "integer" => is_integer(actual),
                other => type_name(actual) == other,
            };
            if ok {
                Ok(())
            } else {
                fail(format!(
                    "expected a value of type {wanted}, got {} {}",
                    type_name(actual),
                    show(actual)
                ))
            }
        }
        "$approx" => {
            let target = number_arg(arg, vars, path, op)?;
            let tolerance = match all.get("$tol") {
                Some(t) => number_arg(t, vars, path, "$tol")?,
                None => DEFAULT_TOLERANCE,
            };
            let Some(value) = actual.as_f64() else {
                return fail(format!(
                    "expected a number ≈ {target}, got {} {}",
                    type_name(actual),
                    show(actual)
                ));
            };
            let (compared, what) = match all.get("$from").and_then(Value::as_str) {
                Some(from) => {
                    let base = vars.get(from).and_then(Value::as_f64).ok_or_else(|| {
                        Mismatch::new(path, format!("$from: variable '{from}' is not a number"))
                    })?;
                    (value - base, format!("{value} − {from} ({base}) = {}", value - base))
                }
                None => (value, value.to_string()),
            };
            if (compared - target).abs() <= tolerance {
                Ok(())
            } else {
                fail(format!("expected ≈ {target} ± {tolerance}, got {what}"))
            }
        }
        "$gte" | "$lte" | "$gt" | "$lt" => {
            let bound = number_arg(arg, vars, path, op)?;
            let Some(value) = actual.as_f64() else {
                return fail(format!(
                    "expected a number ({op} {bound}), got {} {}",
                    type_name(actual),
                    show(actual)
                ));
            };
            let (ok, symbol) = match op {
                "$gte" => (value >= bound, "≥"),
                "$lte" => (value <= bound, "≤"),
                "$gt" => (value > bound, ">"),
                _ => (value < bound, "<"),
            };
            if ok {
                Ok(())
            } else {
                fail(format!("expected a number {symbol} {bound}, got {value}"))
            }
        }
        "$one_of" => {
            let options = arg.as_array().map(Vec::as_slice).unwrap_or_default();
            let mut reasons = Vec::new();
            for option in options {
                let mut tentative = Vec::new();
                match match_at(option, actual, vars, path, false, &mut tentative) {
                    Ok(()) => {
                        captures.extend(tentative);
                        return Ok(());
                    }
                    Err(miss) => reasons.push(miss.to_string()),
                }
            }
            fail(format!("matched none of {} alternatives ({})", options.len(), reasons.join("; ")))
        }
        "$contains" => {
            let Value::Array(elements) = actual else {
                return fail(format!(
                    "expected an array ($contains), got {} {}",
                    type_name(actual),
                    show(actual)
                ));
            };
            let mut nearest: Option<Mismatch> = None;
            for element in elements {
                let mut tentative = Vec::new();
                match match_at(arg, element, vars, "", false, &mut tentative) {
                    Ok(()) => {
                        captures.extend(tentative);
                        return Ok(());
                    }
                    Err(miss) => {
                        if nearest.as_ref().is_none_or(|n| miss.depth() > n.depth()) {
                            nearest = Some(miss);
                        }
                    }
                }
            }
            let nearest = nearest.map_or(String::new(), |n| format!("; nearest element: {n}"));
            fail(format!("no element of {} matches {}{nearest}", elements.len(), show(arg)))
        }
        "$all" => {
            let Value::Array(elements) = actual else {
                return fail(format!(
                    "expected an array ($all), got {} {}",
                    type_name(actual),
                    show(actual)
                ));
            };
            for (i, element) in elements.iter().enumerate() {
                match_at(arg, element, vars, &child(path, &i.to_string()), false, captures)?;
            }
            Ok(())
        }
        "$len" | "$min_len" => {
            let wanted = number_arg(arg, vars, path, op)?;
            let length = match actual {
                Value::Array(a) => a.len(),
                Value::String(s) => s.chars().count(),
                Value::Object(o) => o.len(),
                other => {
                    return fail(format!(
                        "{op}: expected an array, string or object, got {} {}",
                        type_name(other),
                        show(other)
                    ))
                }
            } as f64;
            let ok = if op == "$len" { length == wanted } else { length >= wanted };
            if ok {
                Ok(())
            } else {
                fail(format!(
                    "expected length {}{wanted}, got {length}: {}",
                    if op == "$len" { "" } else { "≥ " },
                    show(actual)
                ))
            }
        }
        "$text" => {
            let needle = vars
                .substitute_text(arg.as_str().unwrap_or_default())
                .map_err(|e| Mismatch::new(path, e.to_string()))?;
            let Value::String(text) = actual else {
                return fail(format!(
                    "expected a string containing \"{needle}\", got {} {}",
                    type_name(actual),
                    show(actual)
                ));
            };
            if text.to_lowercase().contains(&needle.to_lowercase()) {
                Ok(())
            } else {
                fail(format!("expected text containing \"{needle}\", got {}", show(actual)))
            }
        }
        "$capture" => {
            captures.push((arg.as_str().unwrap_or_default().to_string(), actual.clone()));
            Ok(())
        }
        other => fail(format!("unknown operator '{other}'")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> Variables {
        let mut v = Variables::default();
        v.set("start", json!(1.0));
        v.set("limit", json!(30));
        v.set("sid", json!("abc"));
        v.set("schema", json!({ "$schema": "x", "type": "object" }));
        v
    }

    fn ok(matcher: Value, actual: Value) -> Captures {
        validate(&matcher).unwrap_or_else(|e| panic!("invalid matcher {matcher}: {e}"));
        matches(&matcher, &actual, &vars())
            .unwrap_or_else(|m| panic!("{matcher} should match {actual}: {m}"))
    }

    fn miss(matcher: Value, actual: Value) -> String {
        validate(&matcher).unwrap_or_else(|e| panic!("invalid matcher {matcher}: {e}"));
        match matches(&matcher, &actual, &vars()) {
            Ok(_) => panic!("{matcher} should not match {actual}"),
            Err(m) => m.to_string(),
        }
    }

    #[test]
    fn scalars_objects_and_arrays() {
        ok(json!(1), json!(1.0));
        ok(json!("a"), json!("a"));
        ok(json!(null), json!(null));
        ok(json!({ "a": 1 }), json!({ "a": 1, "b": 2 }));
        ok(json!([1, { "x": true }]), json!([1, { "x": true, "y": 0 }]));
        assert_eq!(
            miss(
                json!({ "error": { "code": "tool_unknown" } }),
                json!({ "error": { "code": "invalid_input" } })
            ),
            "at error.code: expected \"tool_unknown\", got \"invalid_input\""
        );
        assert_eq!(miss(json!({ "a": 1 }), json!({ "b": 1 })), "at a: key 'a' is missing");
        assert!(miss(json!([1, 2]), json!([1])).contains("expected 2 elements, got 1"));
        assert!(miss(json!({ "a": 1 }), json!([1])).contains("expected an object, got array"));
        assert!(miss(json!(true), json!("true")).contains("expected true, got \"true\""));
    }

    #[test]
    fn type_any_and_absent() {
        ok(json!({ "$type": "integer" }), json!(3));
        ok(json!({ "$type": "integer" }), json!(3.0));
        ok(json!({ "$type": "number" }), json!(3.5));
        ok(json!({ "$type": "null" }), json!(null));
        assert!(miss(json!({ "$type": "integer" }), json!(3.5))
            .contains("type integer, got number 3.5"));
        assert!(miss(json!({ "$type": "object" }), json!("x")).contains("got string"));
        ok(json!({ "a": { "$any": true } }), json!({ "a": [1] }));
        assert!(
            miss(json!({ "a": { "$any": true } }), json!({})).contains("missing"),
            "$any still needs the key"
        );
        ok(json!({ "pose": { "$absent": true } }), json!({ "tools": [] }));
        assert_eq!(
            miss(json!({ "pose": { "$absent": true } }), json!({ "pose": 1 })),
            "at pose: expected no 'pose', got 1"
        );
    }

    #[test]
    fn numeric_comparisons_and_approx() {
        ok(json!({ "$approx": 0.5, "$tol": 0.05 }), json!(0.53));
        assert!(miss(json!({ "$approx": 0.5, "$tol": 0.05 }), json!(0.6))
            .contains("expected ≈ 0.5 ± 0.05, got 0.6"));
        ok(json!({ "$approx": 0.5, "$tol": 0.05, "$from": "start" }), json!(1.52));
        assert!(miss(json!({ "$approx": 0.5, "$tol": 0.05, "$from": "start" }), json!(1.7))
            .contains("start (1)"));
        ok(json!({ "$approx": "${limit}", "$tol": 0 }), json!(30));
        ok(json!({ "$gte": 1, "$lt": 2 }), json!(1));
        assert!(miss(json!({ "$gte": 1, "$lt": 2 }), json!(2)).contains("< 2, got 2"));
        ok(json!({ "$gt": "${limit}" }), json!(31));
        assert!(miss(json!({ "$lte": "${limit}" }), json!(31)).contains("≤ 30"));
        assert!(miss(json!({ "$gt": 0 }), json!("1")).contains("expected a number"));
    }

    #[test]
    fn one_of_contains_all_len_text() {
        ok(json!({ "$one_of": ["fixed", "event", "hybrid"] }), json!("event"));
        assert!(miss(json!({ "$one_of": ["fixed", "event"] }), json!("weekly"))
            .contains("none of 2 alternatives"));
        ok(json!({ "$contains": { "id": "say" } }), json!([{ "id": "move" }, { "id": "say" }]));
        let reason = miss(
            json!({ "$contains": { "id": "say", "class": "actuator" } }),
            json!([{ "id": "say", "class": "sensor" }]),
        );
        assert!(reason.contains("no element of 1") && reason.contains("class"), "{reason}");
        ok(
            json!({ "$all": { "id": { "$type": "string" } } }),
            json!([{ "id": "a" }, { "id": "b" }]),
        );
        assert_eq!(
            miss(
                json!({ "tools": { "$all": { "id": { "$type": "string" } } } }),
                json!({ "tools": [{ "id": "a" }, { "id": 2 }] })
            ),
            "at tools.1.id: expected a value of type string, got number 2"
        );
        ok(json!({ "$len": 2 }), json!([1, 2]));
        ok(json!({ "$min_len": 1 }), json!("x"));
        assert!(miss(json!({ "$len": 2 }), json!([1])).contains("expected length 2, got 1"));
        assert!(miss(json!({ "$min_len": 3 }), json!({ "a": 1 })).contains("≥ 3"));
        ok(json!({ "$text": "INPUT.forward" }), json!("input.forward: not a number"));
        ok(json!({ "$text": "session ${sid}" }), json!("no such Session abc here"));
        assert!(miss(json!({ "$text": "rate limit" }), json!("tool unknown"))
            .contains("containing \"rate limit\""));
    }

    #[test]
    fn captures_come_only_from_the_matching_branch() {
        let captures = ok(
            json!({ "meta": { "seq": { "$capture": "cursor", "$type": "integer" } } }),
            json!({ "meta": { "seq": 7 } }),
        );
        assert_eq!(captures, vec![("cursor".to_string(), json!(7))]);
        let captures = ok(
            json!({ "$one_of": [{ "a": { "$capture": "x" }, "b": 1 }, { "a": { "$capture": "y" } }] }),
            json!({ "a": 5, "b": 2 }),
        );
        assert_eq!(captures, vec![("y".to_string(), json!(5))]);
    }

    #[test]
    fn variables_resolve_and_their_values_are_plain_data() {
        ok(json!({ "session_id": "${sid}" }), json!({ "session_id": "abc" }));
        assert!(miss(json!({ "session_id": "${sid}" }), json!({ "session_id": "abd" }))
            .contains("expected \"abc\""));
        ok(
            json!({ "input_schema": "${schema}" }),
            json!({ "input_schema": { "$schema": "x", "type": "object", "extra": 1 } }),
        );
        ok(json!("id-${sid}"), json!("id-abc"));
        assert_eq!(
            unresolved(&json!({ "a": ["${nope}"] }), &vars()).unwrap(),
            "variable '${nope}' is not set (set: limit, schema, sid, start)"
        );
        assert!(unresolved(&json!({ "$approx": 1, "$from": "gone" }), &vars())
            .unwrap()
            .contains("'gone'"));
        assert_eq!(unresolved(&json!({ "x": { "$capture": "new" } }), &vars()), None);
    }

    #[test]
    fn malformed_matchers_are_refused_by_name() {
        assert!(validate(&json!({ "$gteq": 1 }))
            .unwrap_err()
            .to_string()
            .contains("unknown operator '$gteq'"));
        assert!(validate(&json!({ "$gt": 1, "plain": 2 }))
            .unwrap_err()
            .to_string()
            .contains("mixed"));
        assert!(validate(&json!({ "$absent": true }))
            .unwrap_err()
            .to_string()
            .contains("object's key"));
        assert!(validate(&json!({ "a": { "$absent": true, "$type": "string" } }))
            .unwrap_err()
            .to_string()
            .contains("stands alone"));
        assert!(validate(&json!({ "$type": "float" }))
            .unwrap_err()
            .to_string()
            .contains("$type takes"));
        assert!(validate(&json!({ "$tol": 1 }))
            .unwrap_err()
            .to_string()
            .contains("go with $approx"));
        assert!(validate(&json!({ "a": { "b": { "$len": -1 } } }))
            .unwrap_err()
            .to_string()
            .starts_with("a.b: "));
        assert!(validate(&json!({ "$one_of": [] })).is_err());
        assert!(validate(&json!({ "$gt": "ten" })).unwrap_err().to_string().contains("number or"));
        assert_eq!(
            validate(&json!({ "a": { "$len": "many" } })),
            Err(MatcherError {
                path: "a".into(),
                problem: MatcherProblem::NotACount { op: "$len".into(), got: "\"many\"".into() }
            })
        );
    }
}
