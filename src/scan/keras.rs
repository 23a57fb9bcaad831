//! A `.keras` archive's `config.json` (SCAN.md): every object of the
//! config walked (iteratively, however deep): a `Lambda` layer, whose code
//! runs at load, is `keras-lambda`; a `module` outside `keras` /
//! `keras.*`, or a `registered_name` of another package (`pkg>Name`), is
//! `keras-custom-module`.

use serde_json::Value;

use super::{Finding, Rule};

/// True for Keras's own modules.
fn is_keras_module(module: &str) -> bool {
    module == "keras" || module.starts_with("keras.")
}

/// The findings of a parsed config.
pub(super) fn findings(config: &Value, member: &str, out: &mut Vec<Finding>) {
    let mut stack: Vec<(&Value, String)> = vec![(config, String::new())];
    let shown = |s: &str| crate::text::safe_text(s, 200);
    while let Some((value, at)) = stack.pop() {
        match value {
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate().rev() {
                    stack.push((v, format!("{at}[{i}]")));
                }
            }
            Value::Object(map) => {
                let text = |k: &str| map.get(k).and_then(Value::as_str);
                let name = text("name").or_else(|| {
                    map.get("config")
                        .and_then(|c| c.get("name"))
                        .and_then(Value::as_str)
                });
                let whose = match name {
                    Some(n) => format!("{member}: the object {} at {at}", shown(n)),
                    None => format!("{member}: the object at {at}"),
                };
                if text("class_name") == Some("Lambda") {
                    out.push(Finding::new(
                        Rule::KerasLambda,
                        format!(
                            "{whose} is a Lambda layer: its code runs when the model is loaded"
                        ),
                        Some("Lambda".into()),
                        None,
                    ));
                }
                if let Some(module) = text("module")
                    && !is_keras_module(module)
                {
                    out.push(Finding::new(
                        Rule::KerasCustomModule,
                        format!(
                            "{whose} is deserialized from the module {}, outside Keras",
                            shown(module)
                        ),
                        Some(module.to_owned()),
                        None,
                    ));
                }
                if let Some(registered) = text("registered_name")
                    && let Some((package, _)) = registered.split_once('>')
                    && package != "keras"
                    && !is_keras_module(package)
                {
                    out.push(Finding::new(
                        Rule::KerasCustomModule,
                        format!(
                            "{whose} is registered by the package {}, outside Keras",
                            shown(package)
                        ),
                        Some(registered.to_owned()),
                        None,
                    ));
                }
                for (k, v) in map.iter().rev() {
                    if matches!(v, Value::Array(_) | Value::Object(_)) {
                        stack.push((v, format!("{at}/{k}")));
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(config: &str) -> Vec<(Rule, Option<String>)> {
        let v: Value = serde_json::from_str(config).unwrap();
        let mut out = Vec::new();
        findings(&v, "config.json", &mut out);
        out.into_iter().map(|f| (f.rule, f.evidence)).collect()
    }

    #[test]
    fn built_in_layers_are_not_findings() {
        let c = r#"{"module": "keras", "class_name": "Sequential", "config": {"name": "s",
            "layers": [{"module": "keras.layers", "class_name": "InputLayer", "config": {}, "registered_name": null},
                       {"module": "keras.layers", "class_name": "Dense", "config": {"dtype": {"module": "keras",
                        "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
                        "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform"}},
                        "registered_name": null}]}, "registered_name": null}"#;
        assert!(rules(c).is_empty());
    }

    #[test]
    fn lambda_and_foreign_modules_are() {
        let c = r#"{"module": "keras", "class_name": "Functional", "config": {"layers": [
            {"module": "keras.layers", "class_name": "Lambda", "config": {"name": "l", "function": {}}},
            {"module": "evilpkg.layers", "class_name": "Custom", "registered_name": "evilpkg>Custom", "config": {}},
            {"module": "keras.layers", "class_name": "X", "registered_name": "keras>X"}]}}"#;
        assert_eq!(
            rules(c),
            [
                (Rule::KerasLambda, Some("Lambda".into())),
                (Rule::KerasCustomModule, Some("evilpkg.layers".into())),
                (Rule::KerasCustomModule, Some("evilpkg>Custom".into())),
            ]
        );
    }
}
