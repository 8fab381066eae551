//! The `tools` table: one row per manifest tool, columns aligned.
use super::manifest::Manifest;

const HEADER: [&str; 6] = ["id", "class", "capability", "granted", "strict_input", "limits"];

/// The manifest's tools as a text table (ends with a newline).
pub fn tools_table(manifest: &Manifest) -> String {
    let mut rows: Vec<[String; 6]> = vec![HEADER.map(str::to_owned)];
    for tool in manifest.tools() {
        rows.push([
            tool.id.clone(),
            tool.class.clone(),
            tool.capability.clone().unwrap_or_else(|| "-".into()),
            if manifest.is_granted(&tool.id) { "yes" } else { "no" }.into(),
            tool.strict_input.to_string(),
            tool.limits.as_ref().map_or_else(|| "-".into(), |limits| limits.to_string()),
        ]);
    }
    let widths: Vec<usize> = (0..HEADER.len())
        .map(|column| rows.iter().map(|row| row[column].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> =
            row.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::manifest::tests::sensors_only;

    #[test]
    fn every_tool_has_a_row_saying_whether_it_is_granted() {
        let table = tools_table(&Manifest::from_message(&sensors_only()).unwrap());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[0].starts_with("id") && lines[0].ends_with("limits"), "{table}");
        let words = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            words(lines[1]),
            ["proprioception", "sensor", "can_observe_world", "yes", "false", "-"]
        );
        assert_eq!(
            words(lines[2]),
            ["vision", "sensor", "can_observe_world", "yes", "true", r#"{"calls_per_minute":60}"#]
        );
        assert_eq!(words(lines[3]), ["move", "actuator", "can_move_self", "no", "true", "-"]);
        assert_eq!(lines[1].find("sensor"), lines[3].find("actuator"), "columns are aligned");
    }
}
