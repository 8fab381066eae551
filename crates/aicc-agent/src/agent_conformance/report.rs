//! The harness's report: a summary table for people, JSON for machines.
use serde_json::{json, Value};

use super::checks::CheckOutcome;

/// One row per check (PASS/FAIL, name, reason), then a closing count.
pub fn summary_table(outcomes: &[CheckOutcome]) -> String {
    let width = outcomes.iter().map(|o| o.name.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for outcome in outcomes {
        let verdict = if outcome.passed { "PASS" } else { "FAIL" };
        out.push_str(&format!("{verdict}  {:<width$}  {}\n", outcome.name, outcome.reason));
    }
    let passed = outcomes.iter().filter(|o| o.passed).count();
    out.push_str(&format!("agent conformance: {passed} of {} checks passed\n", outcomes.len()));
    out
}

pub fn json_report(client: &str, outcomes: &[CheckOutcome]) -> Value {
    let passed = outcomes.iter().filter(|o| o.passed).count();
    json!({
        "client": client,
        "all_passed": passed == outcomes.len() && !outcomes.is_empty(),
        "passed": passed,
        "failed": outcomes.len() - passed,
        "checks": outcomes.iter().map(|o| json!({ "name": o.name, "passed": o.passed, "reason": o.reason, "evidence": o.evidence })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(name: &str, passed: bool) -> CheckOutcome {
        CheckOutcome {
            name: name.into(),
            passed,
            reason: format!("{name} reason"),
            evidence: vec![],
        }
    }

    #[test]
    fn the_table_and_the_json_count_failures() {
        let outcomes = [outcome("first", true), outcome("a longer name", false)];
        let table = summary_table(&outcomes);
        assert!(table.contains("PASS  first          first reason"), "{table}");
        assert!(table.contains("FAIL  a longer name  a longer name reason"), "{table}");
        assert!(table.ends_with("agent conformance: 1 of 2 checks passed\n"));
        let report = json_report("client --port {port}", &outcomes);
        assert_eq!(
            (report["all_passed"].as_bool(), report["failed"].as_u64()),
            (Some(false), Some(1))
        );
        assert_eq!(report["checks"][1]["name"], "a longer name");
        assert_eq!(json_report("c", &[])["all_passed"], false, "no checks is not a pass");
    }
}
