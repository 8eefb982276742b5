//! The Prometheus text format (version 0.0.4), as `/metrics` pages serve
//! it: what the harnesses read a controller's zones, queues, writes and
//! leadership from.
//!
//! A sample line is `name{label="value",...} value [timestamp]`. A label
//! value is quoted and may hold anything, with `\"`, `\\` and `\n`
//! escaped, so the labels are read character by character: splitting
//! them on `,` or `",` (the two readers this replaces) gives a wrong value
//! for a zone or a reason with a comma or an escaped quote in it. Values
//! may be `+Inf`, `-Inf` or `NaN` (a histogram's last bucket is `+Inf`).
//! Comments (`# HELP`, `# TYPE`) and blank lines carry no sample.

use std::borrow::Cow;

/// One sample: a metric's name, its labels in the order written, and its
/// value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample<'a> {
    /// The metric's name (`nodewarden_zone_state`, or a histogram's
    /// `..._bucket`).
    pub name: &'a str,
    /// `(name, value)`, the value unescaped.
    pub labels: Vec<Label<'a>>,
    /// The value.
    pub value: f64,
}

/// A label: its name, and its value unescaped (borrowed from the page
/// when it has no escape, which is nearly always).
pub type Label<'a> = (&'a str, Cow<'a, str>);

impl Sample<'_> {
    /// The value of the label `key`, if the sample has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_ref())
    }
}

/// Why a line is not a sample: which part of it could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// It does not start with a metric name.
    #[error("no metric name")]
    Name,
    /// A label is not `name="value"`, or the braces do not close.
    #[error("a label is not name=\"value\" at byte {0}")]
    Label(usize),
    /// A label value has a backslash before something other than `"`,
    /// `\` or `n`.
    #[error("an unknown escape in a label value at byte {0}")]
    Escape(usize),
    /// The value is missing or not a number.
    #[error("the value {0:?} is not a number")]
    Value(String),
    /// Something other than a timestamp follows the value.
    #[error("{0:?} after the value is not a timestamp")]
    Trailing(String),
}

/// One line read: `Ok(None)` for a comment or a blank line.
pub fn parse_line(line: &str) -> Result<Option<Sample<'_>>, ParseError> {
    let line = line.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let end = line
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())))
        .map_or(line.len(), |(i, _)| i);
    if end == 0 {
        return Err(ParseError::Name);
    }
    let name = &line[..end];
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.trim_start().strip_prefix('{') {
        let offset = line.len() - inner.len();
        let (read, after) = parse_labels(inner, offset)?;
        labels = read;
        rest = after;
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or_else(|| ParseError::Value(String::new()))?;
    // Rust reads a float as Go writes one, `+Inf`, `-Inf` and `NaN` too.
    let value = value.parse::<f64>().map_err(|_| ParseError::Value(value.to_string()))?;
    match (fields.next(), fields.next()) {
        (None, _) => {}
        (Some(t), None) if t.parse::<i64>().is_ok() => {}
        (Some(t), _) => return Err(ParseError::Trailing(t.to_string())),
    }
    Ok(Some(Sample { name, labels, value }))
}

/// The labels after a `{`, up to and including its `}`, and what follows
/// it. `offset` is where `text` starts in the line (for an error's byte).
fn parse_labels(text: &str, offset: usize) -> Result<(Vec<Label<'_>>, &str), ParseError> {
    let mut labels = Vec::new();
    let mut rest = text;
    let at = |rest: &str| offset + text.len() - rest.len();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if end == 0 || rest.as_bytes()[0].is_ascii_digit() {
            return Err(ParseError::Label(at(rest)));
        }
        let key = &rest[..end];
        rest = rest[end..].trim_start();
        rest = rest.strip_prefix('=').map(str::trim_start).ok_or(ParseError::Label(at(rest)))?;
        rest = rest.strip_prefix('"').ok_or(ParseError::Label(at(rest)))?;
        let (value, after) = quoted(rest, at(rest))?;
        labels.push((key, value));
        rest = after.trim_start();
        // A comma between labels, and one allowed before the `}`.
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err(ParseError::Label(at(rest)));
        }
    }
}

/// A label value after its opening quote: unescaped (borrowed when it has
/// no escape), and what follows its closing quote.
fn quoted(text: &str, offset: usize) -> Result<(Cow<'_, str>, &str), ParseError> {
    let mut owned: Option<String> = None;
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                let value = owned.map_or(Cow::Borrowed(&text[..i]), Cow::Owned);
                return Ok((value, &text[i + 1..]));
            }
            '\\' => {
                let s = owned.get_or_insert_with(|| text[..i].to_string());
                match chars.next() {
                    Some((_, '"')) => s.push('"'),
                    Some((_, '\\')) => s.push('\\'),
                    Some((_, 'n')) => s.push('\n'),
                    _ => return Err(ParseError::Escape(offset + i)),
                }
            }
            c => {
                if let Some(s) = owned.as_mut() {
                    s.push(c);
                }
            }
        }
    }
    Err(ParseError::Label(offset + text.len()))
}

/// Every sample of a page, in order. A line that is not one is passed
/// over: a harness reads whatever a process managed to serve, and one
/// unreadable line should not hide the others.
pub fn samples(page: &str) -> impl Iterator<Item = Sample<'_>> {
    page.lines().filter_map(|l| parse_line(l).ok().flatten())
}

/// The samples of the metric `name` (exactly: `name_total` is another
/// metric).
pub fn named<'a>(page: &'a str, name: &'a str) -> impl Iterator<Item = Sample<'a>> + 'a {
    // Only lines that start with the name are parsed at all.
    page.lines()
        .filter(move |l| l.trim_start().starts_with(name))
        .filter_map(|l| parse_line(l).ok().flatten())
        .filter(move |s| s.name == name)
}

/// The sum of every sample of the metric `name` over all its label sets;
/// 0 when it has none.
pub fn sum(page: &str, name: &str) -> f64 {
    named(page, name).map(|s| s.value).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Sample<'_> {
        parse_line(line).expect("parses").expect("a sample")
    }

    fn labels<'a>(s: &'a Sample<'_>) -> Vec<(&'a str, &'a str)> {
        s.labels.iter().map(|(k, v)| (*k, v.as_ref())).collect()
    }

    #[test]
    fn a_plain_sample_and_one_with_labels_and_a_timestamp() {
        let s = one("nodewarden_up 1");
        assert_eq!((s.name, s.value, s.labels.len()), ("nodewarden_up", 1.0, 0));
        let s = one("nodewarden_zone_rate{zone=\"r/a\"} 0.01 1712345678000");
        assert_eq!((s.name, s.value), ("nodewarden_zone_rate", 0.01));
        assert_eq!(labels(&s), [("zone", "r/a")]);
        let s = one("  x:y_z{ a = \"1\" , b=\"2\", } -3e-2");
        assert_eq!((s.name, s.value), ("x:y_z", -0.03));
        assert_eq!(labels(&s), [("a", "1"), ("b", "2")]);
        assert_eq!(one("empty{} 4").labels.len(), 0);
    }

    /// The reader in chaos split labels on `,` and took the first `}`;
    /// the one in wire split on `",` and kept escapes: each gave a wrong
    /// value for some of these.
    #[test]
    fn label_values_may_hold_commas_braces_equals_and_escapes() {
        let s = one(r#"m{zone="eu,west}/a",reason="a=b",q="say \"hi\", then go",path="C:\\x\ny"} 7"#);
        assert_eq!(
            labels(&s),
            [("zone", "eu,west}/a"), ("reason", "a=b"), ("q", "say \"hi\", then go"), ("path", "C:\\x\ny")]
        );
        assert_eq!(s.value, 7.0);
        assert_eq!(s.label("q"), Some("say \"hi\", then go"));
        assert_eq!(s.label("absent"), None);
        // Borrowed when nothing is escaped.
        assert!(matches!(s.labels[0].1, Cow::Borrowed(_)));
        // A value ending in a backslash: `\\` then the closing quote.
        let s = one(r#"m{a="x\\",b="y"} 1"#);
        assert_eq!(labels(&s), [("a", "x\\"), ("b", "y")]);
    }

    #[test]
    fn infinities_and_nan_are_values() {
        let s = one("nodewarden_write_lag_seconds_bucket{class=\"node\",le=\"+Inf\"} +Inf");
        assert_eq!(s.value, f64::INFINITY);
        assert_eq!(s.label("le").and_then(|v| v.parse().ok()), Some(f64::INFINITY));
        assert_eq!(one("m -Inf").value, f64::NEG_INFINITY);
        assert!(one("m NaN").value.is_nan());
    }

    #[test]
    fn comments_and_blank_lines_carry_no_sample() {
        for line in ["# HELP m what it is", "# TYPE m counter", "#", "", "   "] {
            assert_eq!(parse_line(line), Ok(None), "{line:?}");
        }
    }

    #[test]
    fn what_is_not_a_sample_says_where() {
        assert_eq!(parse_line("{a=\"1\"} 1"), Err(ParseError::Name));
        assert_eq!(parse_line("9m 1"), Err(ParseError::Name));
        assert_eq!(parse_line("m{a=1} 1"), Err(ParseError::Label(4)));
        assert_eq!(parse_line("m{a=\"1\" b=\"2\"} 1"), Err(ParseError::Label(8)));
        // The quote never closes: the end of the line.
        assert_eq!(parse_line("m{a=\"1} 1"), Err(ParseError::Label(9)));
        assert_eq!(parse_line("m{a=\"\\t\"} 1"), Err(ParseError::Escape(5)));
        assert_eq!(parse_line("m"), Err(ParseError::Value(String::new())));
        assert_eq!(parse_line("m one"), Err(ParseError::Value("one".into())));
        assert_eq!(parse_line("m 1 soon"), Err(ParseError::Trailing("soon".into())));
        assert_eq!(parse_line("HTTP/1.1 200 OK"), Err(ParseError::Value("/1.1".into())));
    }

    #[test]
    fn a_metric_is_summed_over_its_labels_and_only_its_own_name() {
        let page = "# TYPE nodewarden_write_queue_depth gauge\n\
                    nodewarden_write_queue_depth{class=\"node\"} 3\n\
                    nodewarden_write_queue_depth{class=\"pod_status\"} 40\n\
                    nodewarden_write_queue_depth_other 7\n\
                    not a sample line\n\
                    nodewarden_up 1\n";
        assert_eq!(sum(page, "nodewarden_write_queue_depth"), 43.0);
        assert_eq!(sum(page, "nodewarden_up"), 1.0);
        assert_eq!(sum(page, "nodewarden_absent"), 0.0);
        assert_eq!(samples(page).count(), 4);
    }
}
