//! A renderer for the subset of Helm's templates (Go's text/template plus
//! a few Sprig functions) that deploy/helm/nodewarden uses, so CI can check
//! the chart without a Helm binary: none is packaged for Linux by the
//! registries this project may install from (Debian has no `helm`; PyPI's
//! helm-package ships macOS and Windows binaries only).
//!
//! Supported: text with `{{ }}` actions and `{{-`/`-}}` trimming; comments
//! `{{/* */}}`; `if`/`else`/`end` and `range`/`end`; fields of `.` and `$`
//! (`.Values.a.b`, `.Release.Namespace`, `.Release.Name`); string and
//! number literals; the functions `eq`, `not`, `quote`, `toYaml`,
//! `indent`, `nindent`; pipelines with `|`. Anything else is an error
//! naming it, and so is a value the template asks for that is missing.
//! Values are checked against values.schema.json (type, enum, required,
//! properties, additionalProperties, items, minimum), as Helm does.

use std::path::Path;

use serde_json::{Value, json};

#[derive(Debug)]
enum Node {
    Text(String),
    Out(String),
    If(String, Vec<Node>, Vec<Node>),
    Range(String, Vec<Node>),
}

/// Splits a template into text and actions, applying the trim markers.
fn lex(src: &str, file: &str) -> Vec<(bool, String)> {
    let mut out: Vec<(bool, String)> = Vec::new();
    let mut rest = src;
    let mut trim_next = false;
    while let Some(start) = rest.find("{{") {
        let mut text = rest[..start].to_string();
        if trim_next {
            text = text.trim_start().to_string();
        }
        let after = &rest[start + 2..];
        let end = after.find("}}").unwrap_or_else(|| panic!("{file}: an action is not closed with }}}}"));
        let mut action = &after[..end];
        if let Some(a) = action.strip_prefix('-') {
            text = text.trim_end().to_string();
            action = a;
        }
        trim_next = false;
        if let Some(a) = action.strip_suffix('-') {
            trim_next = true;
            action = a;
        }
        out.push((false, text));
        out.push((true, action.trim().to_string()));
        rest = &after[end + 2..];
    }
    let text = if trim_next { rest.trim_start() } else { rest };
    out.push((false, text.to_string()));
    out
}

fn parse(
    tokens: &mut std::vec::IntoIter<(bool, String)>,
    file: &str,
    inside: Option<&str>,
) -> (Vec<Node>, Option<String>) {
    let mut nodes = Vec::new();
    while let Some((action, s)) = tokens.next() {
        if !action {
            nodes.push(Node::Text(s));
            continue;
        }
        if s.starts_with("/*") {
            continue;
        }
        let (word, rest) = s.split_once(' ').map_or((s.as_str(), ""), |(w, r)| (w, r.trim()));
        match word {
            "if" => {
                let (then, ended) = parse(tokens, file, Some("if"));
                let els =
                    if ended.as_deref() == Some("else") { parse(tokens, file, Some("else")).0 } else { Vec::new() };
                nodes.push(Node::If(rest.to_string(), then, els));
            }
            "range" => {
                let (body, ended) = parse(tokens, file, Some("range"));
                assert_eq!(ended.as_deref(), Some("end"), "{file}: `else` in a range is not supported");
                nodes.push(Node::Range(rest.to_string(), body));
            }
            "else" | "end" => {
                assert!(inside.is_some(), "{file}: `{s}` without an opening if or range");
                assert!(rest.is_empty(), "{file}: `{s}` is not supported (else if, ...)");
                return (nodes, Some(word.to_string()));
            }
            "define" | "template" | "include" | "with" | "block" => {
                panic!("{file}: `{word}` is not supported by this renderer")
            }
            _ => nodes.push(Node::Out(s)),
        }
    }
    assert!(inside.is_none(), "{file}: `{}` is not closed with end", inside.unwrap_or_default());
    (nodes, None)
}

/// Splits on `sep` outside double quotes.
fn split_outside_quotes(s: &str, sep: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut quoted = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                parts.last_mut().expect("a part").push(c);
            }
            '\\' if quoted => {
                let last = parts.last_mut().expect("a part");
                last.push(c);
                if let Some(n) = chars.next() {
                    last.push(n);
                }
            }
            c if c == sep && !quoted => parts.push(String::new()),
            c => parts.last_mut().expect("a part").push(c),
        }
    }
    parts.into_iter().map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

struct Ctx<'a> {
    root: &'a Value,
    file: &'a str,
}

impl Ctx<'_> {
    fn field(&self, dot: &Value, path: &str) -> Value {
        let (base, rest) = if let Some(r) = path.strip_prefix('$') { (self.root, r) } else { (dot, path) };
        let mut v = base;
        for part in rest.split('.').filter(|p| !p.is_empty()) {
            v = v.get(part).unwrap_or_else(|| panic!("{}: {path} is not set (no {part:?})", self.file));
        }
        v.clone()
    }

    fn operand(&self, dot: &Value, arg: &str) -> Value {
        if arg.starts_with('"') {
            serde_json::from_str(arg).unwrap_or_else(|e| panic!("{}: bad string literal {arg}: {e}", self.file))
        } else if arg.starts_with('.') || arg.starts_with('$') {
            self.field(dot, arg)
        } else if let Ok(n) = arg.parse::<i64>() {
            json!(n)
        } else if arg == "true" || arg == "false" {
            json!(arg == "true")
        } else {
            panic!("{}: {arg:?} is not a value this renderer understands", self.file)
        }
    }

    fn call(&self, dot: &Value, words: &[String], piped: Option<Value>) -> Value {
        let mut args: Vec<Value> = Vec::new();
        let name = words[0].as_str();
        let is_function =
            !(name.starts_with('.') || name.starts_with('$') || name.starts_with('"')) && name.parse::<i64>().is_err();
        if !is_function {
            assert!(words.len() == 1 && piped.is_none(), "{}: {words:?} is not a function call", self.file);
            return self.operand(dot, name);
        }
        args.extend(words[1..].iter().map(|w| self.operand(dot, w)));
        args.extend(piped);
        let n = |i: usize| -> usize {
            args.get(i).and_then(Value::as_u64).unwrap_or_else(|| panic!("{}: {name} wants a number", self.file))
                as usize
        };
        match (name, args.len()) {
            ("eq", 2) => json!(args[0] == args[1]),
            ("not", 1) => json!(!truthy(&args[0])),
            ("quote", 1) => json!(format!("{:?}", text(&args[0]))),
            ("toYaml", 1) => {
                let y = serde_yaml_ng::to_string(&args[0]).expect("toYaml");
                json!(y.trim_end_matches('\n'))
            }
            ("indent", 2) => json!(indent(&text(&args[1]), n(0))),
            ("nindent", 2) => json!(format!("\n{}", indent(&text(&args[1]), n(0)))),
            _ => panic!("{}: {name} with {} argument(s) is not supported by this renderer", self.file, args.len()),
        }
    }

    fn pipeline(&self, dot: &Value, p: &str) -> Value {
        let mut value = None;
        for cmd in split_outside_quotes(p, '|') {
            let words = split_outside_quotes(&cmd, ' ');
            assert!(!words.is_empty(), "{}: empty command in {p:?}", self.file);
            assert!(
                !words.iter().any(|w| w.starts_with('(')),
                "{}: parenthesised expressions are not supported: {p:?}",
                self.file
            );
            value = Some(self.call(dot, &words, value));
        }
        value.unwrap_or_else(|| panic!("{}: empty action", self.file))
    }

    fn render(&self, dot: &Value, nodes: &[Node], out: &mut String) {
        for node in nodes {
            match node {
                Node::Text(t) => out.push_str(t),
                Node::Out(p) => out.push_str(&text(&self.pipeline(dot, p))),
                Node::If(p, then, els) => {
                    self.render(dot, if truthy(&self.pipeline(dot, p)) { then } else { els }, out);
                }
                Node::Range(p, body) => match self.pipeline(dot, p) {
                    Value::Array(items) => items.iter().for_each(|item| self.render(item, body, out)),
                    Value::Null => {}
                    other => panic!("{}: range over {other}, not a list", self.file),
                },
            }
        }
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// A value as Go's `%v` prints it (what `{{ .Values.x }}` writes).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => panic!("a template printed a null value"),
        other => other.to_string(),
    }
}

fn indent(s: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    s.lines().map(|l| format!("{pad}{l}")).collect::<Vec<_>>().join("\n")
}

/// Deep-merges `over` into `base` (maps merge, anything else replaces).
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// The JSON Schema subset values.schema.json uses; errors name the path.
pub fn validate(schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let type_ok = match schema["type"].as_str() {
        None => true,
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("boolean") => v.is_boolean(),
        Some("integer") => v.as_i64().is_some() || v.as_u64().is_some(),
        Some("number") => v.is_number(),
        Some(other) => panic!("values.schema.json: type {other} is not supported by this check"),
    };
    if !type_ok {
        errors.push(format!("{path}: {v} is not of type {}", schema["type"]));
        return;
    }
    if let Some(choices) = schema["enum"].as_array()
        && !choices.contains(v)
    {
        errors.push(format!("{path}: {v} is not one of {}", Value::Array(choices.clone())));
    }
    if let Some(min) = schema["minimum"].as_f64()
        && v.as_f64().is_some_and(|x| x < min)
    {
        errors.push(format!("{path}: {v} is less than {min}"));
    }
    if let Some(obj) = v.as_object() {
        for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !obj.contains_key(r) {
                errors.push(format!("{path}: {r} is required"));
            }
        }
        for (k, sub) in obj {
            match schema["properties"].get(k) {
                Some(s) => validate(s, sub, &format!("{path}.{k}"), errors),
                None if schema["additionalProperties"] == false => {
                    errors.push(format!("{path}: {k} is not a known value"));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            validate(items, x, &format!("{path}[{i}]"), errors);
        }
    }
}

/// Renders the chart at `dir` as `helm template NAME dir -n NAMESPACE`
/// with `overrides` merged over values.yaml: the objects, or the schema
/// errors.
pub fn render(dir: &Path, name: &str, namespace: &str, overrides: &Value) -> Result<Vec<Value>, Vec<String>> {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut values: Value = serde_yaml_ng::from_str(&read(&dir.join("values.yaml"))).expect("values.yaml is YAML");
    merge(&mut values, overrides);
    let schema: Value =
        serde_json::from_str(&read(&dir.join("values.schema.json"))).expect("values.schema.json is JSON");
    let mut errors = Vec::new();
    validate(&schema, &values, "values", &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let root = json!({"Values": values, "Release": {"Name": name, "Namespace": namespace}});
    let mut files: Vec<_> = std::fs::read_dir(dir.join("templates"))
        .expect("templates/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "yaml")
                && !p.file_name().is_some_and(|f| f.to_string_lossy().starts_with('_'))
        })
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for f in files {
        let file = f.display().to_string();
        let mut tokens = lex(&read(&f), &file).into_iter();
        let (nodes, _) = parse(&mut tokens, &file, None);
        let mut out = String::new();
        Ctx { root: &root, file: &file }.render(&root, &nodes, &mut out);
        objects.extend(super::yaml_docs(&out, &file));
    }
    Ok(objects)
}
