//! The outcome of a conformance run, three ways: a summary table for
//! people (stdout), `conformance-report.json` for tools, and
//! `conformance-junit.xml` for CI.
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{json, Value};

use super::scenario::{RobotNeed, AREAS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    /// Not run: the endpoint's profile lacks what it needs (a tool its
    /// robot has no part for); the reason says what. Never counted as passed.
    Skipped,
    /// Left out by --area, --robot or --only: never counted as passed.
    NotSelected,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::NotSelected => "not selected",
        }
    }
}

/// Where and why a scenario failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The failing step's index ("3", or "3.1" inside a repeat); None when
    /// the scenario failed before its first step (opening "main") or its
    /// file did not load.
    pub step: Option<String>,
    pub label: Option<String>,
    pub reason: String,
}

impl Failure {
    /// One line naming the scenario and step.
    pub fn describe(&self, scenario: &str) -> String {
        let at = match (&self.step, &self.label) {
            (Some(step), Some(label)) => format!("step {step} \"{label}\""),
            (Some(step), None) => format!("step {step}"),
            (None, Some(label)) => label.clone(),
            (None, None) => "before the first step".to_string(),
        };
        format!("scenario '{scenario}', {at}: {}", self.reason)
    }
}

#[derive(Debug, Clone)]
pub struct ScenarioResult {
    pub name: String,
    pub area: String,
    pub file: String,
    /// None when the file did not load.
    pub robot: Option<RobotNeed>,
    pub checks: String,
    pub status: Status,
    pub duration_s: f64,
    pub failure: Option<Failure>,
    /// Why it was skipped (Status::Skipped).
    pub skip_reason: Option<String>,
    /// The last lines sent and received (failed scenarios).
    pub transcript: Vec<String>,
    /// What the simulator's ground truth showed while the scenario ran
    /// (`--truth`): figures and violations (judge::Figures::to_json).
    pub truth: Option<Value>,
}

impl ScenarioResult {
    pub fn failure_message(&self) -> Option<String> {
        self.failure.as_ref().map(|f| f.describe(&self.name))
    }
}

/// A whole run.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub endpoint: String,
    /// The robot profile the run certifies (`--profile`), when named.
    pub profile: Option<String>,
    pub started_at: SystemTime,
    pub duration_s: f64,
    pub results: Vec<ScenarioResult>,
}

impl RunReport {
    /// (passed, failed, skipped, not selected) in `area` (all areas: None).
    pub fn counts(&self, area: Option<&str>) -> (usize, usize, usize, usize) {
        let of = |status| {
            self.results
                .iter()
                .filter(|r| area.is_none_or(|a| r.area == a) && r.status == status)
                .count()
        };
        (of(Status::Passed), of(Status::Failed), of(Status::Skipped), of(Status::NotSelected))
    }

    /// Every selected scenario passed or was skipped for what the profile
    /// lacks, and at least one passed.
    pub fn all_passed(&self) -> bool {
        let (passed, failed, _, _) = self.counts(None);
        failed == 0 && passed > 0
    }
}

/// The table printed on stdout.
pub fn summary_table(report: &RunReport) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<12} {:>7} {:>7} {:>8} {:>13}\n",
        "area", "passed", "failed", "skipped", "not selected"
    ));
    let mut areas: Vec<&str> = AREAS.to_vec();
    for result in &report.results {
        if !areas.contains(&result.area.as_str()) {
            areas.push(&result.area);
        }
    }
    for area in areas {
        let (passed, failed, skipped, not_selected) = report.counts(Some(area));
        out.push_str(&format!(
            "{area:<12} {passed:>7} {failed:>7} {skipped:>8} {not_selected:>13}\n"
        ));
    }
    let (passed, failed, skipped, not_selected) = report.counts(None);
    out.push_str(&format!(
        "{:<12} {passed:>7} {failed:>7} {skipped:>8} {not_selected:>13}\n",
        "total"
    ));
    let skips: Vec<&ScenarioResult> =
        report.results.iter().filter(|r| r.status == Status::Skipped).collect();
    if !skips.is_empty() {
        out.push_str("\nSkipped (this profile lacks what they need):\n");
        for result in skips {
            out.push_str(&format!(
                "  {}/{}: {}\n",
                result.area,
                result.name,
                result.skip_reason.as_deref().unwrap_or("")
            ));
        }
    }
    let failures: Vec<&ScenarioResult> =
        report.results.iter().filter(|r| r.status == Status::Failed).collect();
    if !failures.is_empty() {
        out.push_str("\nFailures:\n");
        for result in failures {
            let failure = result.failure.as_ref();
            let step = match failure.and_then(|f| f.step.as_ref()) {
                Some(step) => format!("step {step}"),
                None => "-".to_string(),
            };
            let label = failure
                .and_then(|f| f.label.as_ref())
                .map(|l| format!(" \"{l}\""))
                .unwrap_or_default();
            let reason = failure.map_or("", |f| f.reason.as_str());
            out.push_str(&format!("  {}/{}  {step}{label}: {reason}\n", result.area, result.name));
        }
    }
    let judged: Vec<&ScenarioResult> =
        report.results.iter().filter(|r| r.truth.is_some()).collect();
    if !judged.is_empty() {
        out.push_str("\nOn the simulator's ground truth:\n");
        for result in judged {
            let summary = result
                .truth
                .as_ref()
                .and_then(|t| t.get("summary"))
                .and_then(Value::as_str)
                .unwrap_or("");
            out.push_str(&format!(
                "  {}/{} ({}): {summary}\n",
                result.area,
                result.name,
                result.status.as_str()
            ));
        }
    }
    if passed == 0 && failed == 0 && skipped == 0 {
        out.push_str("\nNo scenario was selected.\n");
    } else if passed == 0 && failed == 0 {
        out.push_str("\nNo scenario ran: every one selected was skipped.\n");
    }
    out.push_str(&format!(
        "\nTotal time: {:.1} s against {}\n",
        report.duration_s, report.endpoint
    ));
    out
}

/// `conformance-report.json`.
pub fn to_json(report: &RunReport) -> Value {
    let (passed, failed, skipped, not_selected) = report.counts(None);
    json!({
        "endpoint": report.endpoint,
        "profile": report.profile,
        "started_at": rfc3339(report.started_at),
        "duration_s": report.duration_s,
        "counts": { "passed": passed, "failed": failed, "skipped": skipped, "not_selected": not_selected },
        "scenarios": report.results.iter().map(|r| json!({
            "name": r.name,
            "area": r.area,
            "file": r.file,
            "robot": r.robot.map(RobotNeed::as_str),
            "checks": r.checks,
            "status": r.status.as_str(),
            "duration_s": r.duration_s,
            "failing_step": r.failure.as_ref().and_then(|f| f.step.clone()),
            "failing_step_label": r.failure.as_ref().and_then(|f| f.label.clone()),
            "reason": r.failure.as_ref().map(|f| f.reason.clone()),
            "skip_reason": r.skip_reason,
            "transcript_tail": r.transcript,
            "ground_truth": r.truth,
        })).collect::<Vec<_>>(),
    })
}

/// Text escaped for XML content; characters XML 1.0 cannot carry become U+FFFD.
pub fn xml_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Text escaped for a double- or single-quoted XML attribute; tabs and
/// line breaks as references so that they survive attribute normalisation.
pub fn xml_attr(text: &str) -> String {
    xml_text(text)
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
        .replace('\t', "&#9;")
        .replace('\n', "&#10;")
        .replace('\r', "&#13;")
}

/// `conformance-junit.xml`: a testsuite per area, a testcase per scenario.
pub fn junit_xml(report: &RunReport) -> String {
    let (passed, failed, skipped, not_selected) = report.counts(None);
    let skipped = skipped + not_selected;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"aicc-conformance\" tests=\"{}\" failures=\"{failed}\" skipped=\"{skipped}\" time=\"{:.3}\" timestamp=\"{}\">\n",
        passed + failed + skipped,
        report.duration_s,
        rfc3339(report.started_at)
    ));
    let mut areas: Vec<&str> = Vec::new();
    for result in &report.results {
        if !areas.contains(&result.area.as_str()) {
            areas.push(&result.area);
        }
    }
    for area in areas {
        let results: Vec<&ScenarioResult> =
            report.results.iter().filter(|r| r.area == area).collect();
        let (passed, failed, skipped, not_selected) = report.counts(Some(area));
        let skipped = skipped + not_selected;
        let time: f64 = results.iter().map(|r| r.duration_s).sum();
        out.push_str(&format!("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"{skipped}\" time=\"{time:.3}\">\n", xml_attr(area), passed + failed + skipped));
        for result in results {
            out.push_str(&format!(
                "    <testcase name=\"{}\" classname=\"conformance.{}\" file=\"{}\" time=\"{:.3}\"",
                xml_attr(&result.name),
                xml_attr(area),
                xml_attr(&result.file),
                result.duration_s
            ));
            match result.status {
                Status::Passed => out.push_str("/>\n"),
                Status::NotSelected => {
                    out.push_str(">\n      <skipped message=\"not selected\"/>\n    </testcase>\n")
                }
                Status::Skipped => out.push_str(&format!(
                    ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    xml_attr(result.skip_reason.as_deref().unwrap_or("skipped"))
                )),
                Status::Failed => {
                    let message = result.failure_message().unwrap_or_else(|| "failed".to_string());
                    let mut body = format!("{message}\nchecks: {}\n", result.checks);
                    if !result.transcript.is_empty() {
                        body.push_str("last lines (> sent, < received):\n");
                        for line in &result.transcript {
                            body.push_str(line);
                            body.push('\n');
                        }
                    }
                    out.push_str(&format!(">\n      <failure message=\"{}\" type=\"conformance\">{}</failure>\n    </testcase>\n", xml_attr(&message), xml_text(&body)));
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// Writes both report files into `dir` (created if missing).
pub fn write_reports(report: &RunReport, dir: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let json_path = dir.join("conformance-report.json");
    let junit_path = dir.join("conformance-junit.xml");
    let text = serde_json::to_string_pretty(&to_json(report)).map_err(std::io::Error::other)?;
    std::fs::write(&json_path, text + "\n")?;
    std::fs::write(&junit_path, junit_xml(report))?;
    Ok((json_path, junit_path))
}

/// `2025-01-31T12:34:56Z` (UTC), from the civil calendar of the Unix days.
pub fn rfc3339(time: SystemTime) -> String {
    let seconds = time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Howard Hinnant's days-from-civil, inverted.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn result(name: &str, area: &str, status: Status) -> ScenarioResult {
        ScenarioResult {
            name: name.into(),
            area: area.into(),
            file: format!("conformance/scenarios/{area}/01_{name}.yaml"),
            robot: Some(RobotNeed::None),
            checks: "AICC §10".into(),
            status,
            duration_s: 0.25,
            failure: (status == Status::Failed).then(|| Failure { step: Some("2".into()), label: Some("call <teleport> & \"more\"".into()), reason: "at error.code: expected \"tool_unknown\", got 'x'\u{1}".into() }),
            skip_reason: (status == Status::Skipped).then(|| "needs tool look_at (no controller is configured for it), which this profile does not offer".into()),
            transcript: vec!["main> {\"a\":\"<b>\"}".into()],
            truth: None,
        }
    }

    fn report() -> RunReport {
        RunReport {
            endpoint: "tcp://127.0.0.1:43010".into(),
            profile: Some("turtlebot3".into()),
            started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            duration_s: 3.5,
            results: vec![
                result("a_passes", "protocol", Status::Passed),
                result("b_fails", "protocol", Status::Failed),
                result("c_skipped", "governor", Status::NotSelected),
                result("d_no_head", "governor", Status::Skipped),
            ],
        }
    }

    #[test]
    fn xml_escaping_covers_markup_quotes_and_control_characters() {
        assert_eq!(xml_text("a<b>&c"), "a&lt;b&gt;&amp;c");
        assert_eq!(
            xml_attr("say \"hi\" & 'bye'\n"),
            "say &quot;hi&quot; &amp; &apos;bye&apos;&#10;"
        );
        assert_eq!(xml_text("bell\u{7}"), "bell\u{FFFD}");
    }

    #[test]
    fn junit_has_a_suite_per_area_and_escaped_failures() {
        let xml = junit_xml(&report());
        assert!(xml.contains("<testsuite name=\"protocol\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\""), "{xml}");
        assert!(xml.contains("<testsuite name=\"governor\" tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"2\""), "{xml}");
        assert!(xml.contains("<skipped message=\"not selected\"/>"), "{xml}");
        assert!(xml.contains("<testcase name=\"d_no_head\" classname=\"conformance.governor\" file=\"conformance/scenarios/governor/01_d_no_head.yaml\" time=\"0.250\">\n      <skipped message=\"needs tool look_at (no controller is configured for it), which this profile does not offer\"/>"), "{xml}");
        assert!(xml.contains("failure message=\"scenario &apos;b_fails&apos;, step 2 &quot;call &lt;teleport&gt; &amp; &quot;more&quot;&quot;"), "{xml}");
        assert!(xml.contains("got &apos;x&apos;\u{FFFD}\""), "{xml}");
        assert!(xml.contains("main&gt; {\"a\":\"&lt;b&gt;\"}"), "{xml}");
        assert!(!xml.contains('\u{1}'));
    }

    #[test]
    fn the_table_counts_per_area_and_lists_failures() {
        let table = summary_table(&report());
        assert!(table.contains("protocol           1       1        0             0"), "{table}");
        assert!(table.contains("governor           0       0        1             1"), "{table}");
        assert!(table.contains("total              1       1        1             1"), "{table}");
        assert!(table.contains("governor/d_no_head: needs tool look_at"), "{table}");
        assert!(table.contains("protocol/b_fails  step 2 \"call <teleport>"), "{table}");
        assert!(!report().all_passed());
    }

    #[test]
    fn json_names_status_step_and_transcript() {
        let json = to_json(&report());
        assert_eq!(json["started_at"], "2023-11-14T22:13:20Z");
        assert_eq!(
            json["counts"],
            json!({ "passed": 1, "failed": 1, "skipped": 1, "not_selected": 1 })
        );
        assert_eq!(json["profile"], "turtlebot3");
        assert_eq!(
            (
                json["scenarios"][3]["status"].as_str(),
                json["scenarios"][3]["skip_reason"]
                    .as_str()
                    .map(|r| r.starts_with("needs tool look_at"))
            ),
            (Some("skipped"), Some(true))
        );
        let failed = &json["scenarios"][1];
        assert_eq!(
            (failed["status"].as_str(), failed["failing_step"].as_str()),
            (Some("failed"), Some("2"))
        );
        assert_eq!(failed["transcript_tail"][0], "main> {\"a\":\"<b>\"}");
        assert_eq!(json["scenarios"][2]["status"], "not selected");
    }

    #[test]
    fn rfc3339_handles_leap_years() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }
}
