//! The Prometheus text exposition format (version 0.0.4, and the OpenMetrics text that
//! servers commonly send in its place), parsed into samples.
//!
//! The grammar, line by line:
//!
//! ```text
//! line     = blank | comment | sample
//! comment  = "#" [ ws ( "HELP" | "TYPE" | "UNIT" ) ws name [ ws rest ] | anything ]
//! sample   = name [ "{" [ label { "," label } [ "," ] ] "}" ] ws value [ ws timestamp ]
//!            [ ws "#" exemplar ]
//! label    = lname "=" '"' { char | "\\" | "\"" | "\n" } '"'
//! name     = [a-zA-Z_:][a-zA-Z0-9_:]*      lname = [a-zA-Z_][a-zA-Z0-9_]*
//! value    = a float, "+Inf", "-Inf", "Inf" or "NaN" (any case)
//! ```
//!
//! `ws` is spaces or tabs; lines end in LF (a CR before it is dropped). A timestamp is
//! read and dropped: the scrape's own clock stamps the whole exposition. An exemplar
//! (OpenMetrics, after ` # `) is skipped. `# EOF` ends an OpenMetrics exposition.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One sample: a series' name, its labels (in the order written) and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series name as written (`vllm:time_to_first_token_seconds_bucket`).
    pub name: String,
    /// Label pairs, unescaped, in the order written.
    pub labels: Vec<(String, String)>,
    /// The value (may be infinite or NaN).
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A family's declared type (`# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only ever grows (resets on a restart).
    Counter,
    /// Any value now.
    Gauge,
    /// Cumulative buckets, a sum and a count.
    Histogram,
    /// Quantiles, a sum and a count.
    Summary,
    /// Declared `untyped`, `unknown`, or not declared at all.
    Untyped,
}

/// A parsed exposition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// Every sample, in the order written.
    pub samples: Vec<Sample>,
    /// Declared types by family name.
    pub kinds: BTreeMap<String, Kind>,
}

impl Exposition {
    /// The family `sample_name` belongs to and its type: a histogram's `_bucket`, `_sum`
    /// and `_count` series (a counter's `_total`, `_created`) belong to the declared base.
    pub fn family_of<'a>(&self, sample_name: &'a str) -> (&'a str, Kind) {
        if let Some(k) = self.kinds.get(sample_name) {
            return (sample_name, *k);
        }
        for suffix in ["_bucket", "_sum", "_count", "_total", "_created"] {
            if let Some(base) = sample_name.strip_suffix(suffix)
                && let Some(k) = self.kinds.get(base)
            {
                return (base, *k);
            }
        }
        (sample_name, Kind::Untyped)
    }
}

/// Why a line is not the exposition format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was expected there.
    pub reason: String,
}

/// Parses a whole exposition.
pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    let mut out = Exposition::default();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let err = |reason: String| ParseError {
            line: i + 1,
            reason,
        };
        let trimmed = line.trim_start_matches([' ', '\t']);
        if trimmed.trim_end_matches([' ', '\t']).is_empty() {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            if comment.trim() == "EOF" {
                break;
            }
            comment_line(comment, &mut out).map_err(err)?;
            continue;
        }
        out.samples.push(sample_line(trimmed).map_err(err)?);
    }
    Ok(out)
}

fn comment_line(comment: &str, out: &mut Exposition) -> Result<(), String> {
    let mut words = comment.split([' ', '\t']).filter(|w| !w.is_empty());
    if words.next() != Some("TYPE") {
        return Ok(()); // HELP, UNIT and free comments carry nothing a scrape uses.
    }
    let name = words
        .next()
        .ok_or_else(|| "# TYPE without a metric name".to_string())?;
    if !is_metric_name(name) {
        return Err(format!("# TYPE names {name:?}, not a metric name"));
    }
    let kind = match words.next().map(str::to_ascii_lowercase).as_deref() {
        Some("counter") => Kind::Counter,
        Some("gauge") => Kind::Gauge,
        Some("histogram" | "gaugehistogram") => Kind::Histogram,
        Some("summary") => Kind::Summary,
        Some("untyped" | "unknown" | "info" | "stateset") => Kind::Untyped,
        Some(other) => return Err(format!("# TYPE {name}: unknown type {other:?}")),
        None => return Err(format!("# TYPE {name} without a type")),
    };
    out.kinds.insert(name.to_string(), kind);
    Ok(())
}

fn is_metric_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_' || c == b':')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

fn sample_line(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(format!("expected a metric name at {:?}", clip(line)));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = label_set(after, &mut labels)?;
    } else if rest.trim().is_empty() {
        return Err(format!("{name}: no value"));
    } else if !rest.starts_with([' ', '\t']) {
        return Err(format!("{name}: expected a space before the value"));
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let mut words = rest.splitn(2, [' ', '\t']);
    let value_text = words.next().unwrap_or("");
    let value = parse_value(value_text)
        .ok_or_else(|| format!("{name}: {:?} is not a value", clip(value_text)))?;
    let tail = words.next().unwrap_or("").trim_start_matches([' ', '\t']);
    if !tail.is_empty() && !tail.starts_with('#') {
        let ts = tail.split([' ', '\t']).next().unwrap_or("");
        if ts.parse::<f64>().is_err() {
            return Err(format!("{name}: {:?} is not a timestamp", clip(ts)));
        }
        let after = tail[ts.len()..].trim_start_matches([' ', '\t']);
        if !after.is_empty() && !after.starts_with('#') {
            return Err(format!(
                "{name}: unexpected {:?} after the value",
                clip(after)
            ));
        }
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Reads `lname="value", ...}`; returns what follows the `}`.
fn label_set<'a>(mut s: &'a str, labels: &mut Vec<(String, String)>) -> Result<&'a str, String> {
    loop {
        s = s.trim_start_matches([' ', '\t']);
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        let key = &s[..end];
        if key.is_empty() || key.as_bytes()[0].is_ascii_digit() {
            return Err(format!("expected a label name at {:?}", clip(s)));
        }
        s = s[end..].trim_start_matches([' ', '\t']);
        s = s
            .strip_prefix('=')
            .ok_or_else(|| format!("label {key}: expected '='"))?
            .trim_start_matches([' ', '\t']);
        s = s
            .strip_prefix('"')
            .ok_or_else(|| format!("label {key}: expected a quoted value"))?;
        let mut value = String::new();
        let unterminated = || format!("label {key}: unterminated value");
        loop {
            let i = s.find(['"', '\\']).ok_or_else(unterminated)?;
            value.push_str(&s[..i]);
            if s.as_bytes()[i] == b'"' {
                s = &s[i + 1..];
                break;
            }
            let escaped = s[i + 1..].chars().next().ok_or_else(unterminated)?;
            match escaped {
                'n' => value.push('\n'),
                '\\' | '"' => value.push(escaped),
                // Unknown escapes are kept as written, as Prometheus does.
                c => {
                    value.push('\\');
                    value.push(c);
                }
            }
            s = &s[i + 1 + escaped.len_utf8()..];
        }
        labels.push((key.to_string(), value));
        s = s.trim_start_matches([' ', '\t']);
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err(format!("label {key}: expected ',' or '}}'"));
        }
    }
}

fn parse_value(s: &str) -> Option<f64> {
    // Rust's parser takes "inf", "+Inf", "-inf", "NaN" and "infinity" in any case, as
    // the format allows; it refuses a sign before NaN, which Prometheus accepts.
    s.parse::<f64>().ok().or_else(|| {
        let unsigned = s.strip_prefix(['+', '-'])?;
        unsigned.eq_ignore_ascii_case("nan").then_some(f64::NAN)
    })
}

/// The start of a line quoted in an error, any remembered secret scrubbed.
fn clip(s: &str) -> String {
    crate::net::secret::redact(s).chars().take(40).collect()
}

/// Writes samples in the exposition format (values round-trip exactly).
pub fn render(samples: &[Sample], kinds: &BTreeMap<String, Kind>) -> String {
    let mut out = String::new();
    for (name, kind) in kinds {
        let k = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
            Kind::Untyped => "untyped",
        };
        let _ = writeln!(out, "# TYPE {name} {k}");
    }
    for s in samples {
        out.push_str(&s.name);
        if !s.labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in s.labels.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(out, "{k}=\"{v}\"");
            }
            out.push('}');
        }
        let v = s.value;
        let _ = if v.is_nan() {
            writeln!(out, " NaN")
        } else if v.is_infinite() {
            writeln!(out, " {}Inf", if v > 0.0 { "+" } else { "-" })
        } else {
            writeln!(out, " {v:?}")
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_grammars_corners_parse() {
        let text = "# HELP x_total Help with \\ and \"quotes\".\n\
                    # TYPE x_total counter\n\
                    x_total{a=\"1\",b=\"q\\\"uote\\\\back\\nline\"} 3 1700000000000\n\
                    \n   \t\n\
                    # a free comment\n\
                    # TYPE h histogram\n\
                    h_bucket{le=\"0.5\"} 1\n\
                    h_bucket{le=\"+Inf\",} 2 # {trace_id=\"abc\"} 0.4 1700000000.1\n\
                    h_sum 0.9\r\n\
                    h_count 2\n\
                    g\t-Inf\n\
                    n{} NaN\n\
                    big 1.5e+300\n\
                    # EOF\n\
                    after the end is ignored\n";
        let e = parse(text).unwrap();
        assert_eq!(e.samples.len(), 8);
        let s = &e.samples[0];
        assert_eq!(s.name, "x_total");
        assert_eq!(s.label("b"), Some("q\"uote\\back\nline"));
        assert_eq!(s.value, 3.0);
        assert_eq!(e.samples[2].label("le"), Some("+Inf"));
        assert_eq!(e.samples[2].value, 2.0);
        assert_eq!(e.samples[5].value, f64::NEG_INFINITY);
        assert!(e.samples[6].value.is_nan());
        assert_eq!(e.family_of("h_bucket"), ("h", Kind::Histogram));
        assert_eq!(e.family_of("x_total"), ("x_total", Kind::Counter));
        assert_eq!(e.family_of("nope"), ("nope", Kind::Untyped));
    }

    #[test]
    fn broken_lines_are_named() {
        for (text, says) in [
            ("x{a=\"1\" 2", "expected ',' or '}'"),
            ("x{a=\"1 2", "unterminated"),
            ("x{1a=\"1\"} 2", "label name"),
            ("x{a 1} 2", "expected '='"),
            ("x{a=1} 2", "quoted value"),
            ("x two", "not a value"),
            ("x 1 soon", "not a timestamp"),
            ("9x 1", "metric name"),
            ("# TYPE x sometimes", "unknown type"),
            ("x1", "no value"),
            ("x-1 2", "a space before"),
        ] {
            let e = parse(&format!("ok 1\n{text}\n")).unwrap_err();
            assert_eq!(e.line, 2, "{text}");
            assert!(e.reason.contains(says), "{text}: {}", e.reason);
        }
    }

    fn name() -> impl Strategy<Value = String> {
        "[a-zA-Z_:][a-zA-Z0-9_:]{0,12}"
    }

    fn sample() -> impl Strategy<Value = Sample> {
        let value = prop_oneof![
            any::<f64>(),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            (-1e6f64..1e6),
            (0u32..1000).prop_map(f64::from),
        ];
        let labels = prop::collection::vec(
            ("[a-zA-Z_][a-zA-Z0-9_]{0,6}", "(\\PC|[\"\\\\\n{},=#])*"),
            0..4,
        );
        (name(), labels, value).prop_map(|(name, labels, value)| Sample {
            name,
            labels,
            value,
        })
    }

    fn same(a: &[Sample], b: &[Sample]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.name == y.name
                    && x.labels == y.labels
                    && (x.value == y.value || (x.value.is_nan() && y.value.is_nan()))
            })
    }

    proptest! {
        /// Rendered samples, re-spaced with random blanks, tabs, CRs and blank lines,
        /// parse back to themselves.
        #[test]
        fn rendered_samples_parse_back(
            samples in prop::collection::vec(sample(), 0..12),
            spacing in prop::collection::vec((0usize..3, any::<bool>(), any::<bool>()), 12),
        ) {
            let text = render(&samples, &BTreeMap::new());
            let mut spaced = String::new();
            for (i, line) in text.lines().enumerate() {
                let (blank, tab, cr) = spacing[i % spacing.len()];
                for _ in 0..blank {
                    spaced.push_str(if tab { "\t\n" } else { "\n" });
                }
                // Only the blank before the value: a label value keeps its own.
                let line = match (tab, line.rfind(' ')) {
                    (true, Some(i)) => format!("{}\t {}", &line[..i], &line[i + 1..]),
                    _ => line.to_string(),
                };
                spaced.push_str(&line);
                spaced.push_str(if cr { "\r\n" } else { "\n" });
            }
            let back = parse(&spaced).unwrap();
            prop_assert!(same(&back.samples, &samples), "{spaced}");
        }
    }
}
