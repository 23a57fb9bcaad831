//! GGUF chat templates (SCAN.md): `tokenizer.chat_template` and
//! `tokenizer.chat_template.*` are Jinja templates that loaders render; one
//! that reaches Python's internals can run code when rendered (the class
//! of CVE-2024-34359). The template is matched, never rendered.

use super::{Finding, Rule};
use crate::format::gguf::header::Value;

/// What makes a template unsafe: Python's object internals, and the `os`
/// module or `popen` reached from a template.
const DUNDERS: &[&str] = &[
    "__class__",
    "__globals__",
    "__subclasses__",
    "__builtins__",
    "__import__",
];

/// True for the template keys: `tokenizer.chat_template` and its named
/// variants.
fn is_template_key(key: &str) -> bool {
    key == "tokenizer.chat_template" || key.starts_with("tokenizer.chat_template.")
}

/// The first unsafe token of `template`, if any: a dunder above, the word
/// `mro` (`__mro__`, `.mro()`), `os.` as a word, or `popen`.
pub(super) fn unsafe_token(template: &str) -> Option<String> {
    if let Some(d) = DUNDERS.iter().find(|d| template.contains(*d)) {
        return Some((*d).to_owned());
    }
    let bytes = template.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    // `mro` whose neighbours are no letters or digits (`__mro__` has `_`
    // around it, which counts as a boundary here).
    let bounded = |at: usize, len: usize, underscore_ok: bool| {
        let ok = |c: u8| !(c.is_ascii_alphanumeric() || (!underscore_ok && c == b'_'));
        (at == 0 || ok(bytes[at - 1])) && bytes.get(at + len).is_none_or(|&c| ok(c))
    };
    for (at, _) in template.match_indices("mro") {
        if bounded(at, 3, true) {
            return Some(if template[..at].ends_with("__") {
                "__mro__".to_owned()
            } else {
                "mro".to_owned()
            });
        }
    }
    for (at, _) in template.match_indices("os.") {
        if at == 0 || !word(bytes[at - 1]) {
            return Some("os.".to_owned());
        }
    }
    let lower = template.to_ascii_lowercase();
    lower.contains("popen").then(|| "popen".to_owned())
}

/// The findings of a GGUF header's key/value table.
pub(super) fn findings(metadata: &[(String, Value)], out: &mut Vec<Finding>) {
    for (key, value) in metadata {
        if !is_template_key(key) {
            continue;
        }
        let Value::Str(template) = value else {
            continue;
        };
        if let Some(token) = unsafe_token(template) {
            out.push(Finding::new(
                Rule::GgufChatTemplate,
                format!(
                    "the chat template {} reaches Python internals ({token}): rendering it can run code",
                    crate::text::safe_text(key, 120)
                ),
                Some(token),
                None,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::unsafe_token;

    #[test]
    fn payloads_are_found() {
        for (t, token) in [
            (
                "{{ ''.__class__.__mro__[1].__subclasses__() }}",
                "__class__",
            ),
            ("{{ x.__mro__ }}", "__mro__"),
            ("{{ x.mro() }}", "mro"),
            (
                "{{ cycler.__init__.__globals__.os.popen('id') }}",
                "__globals__",
            ),
            (
                "{{ self._TemplateReference__context.joiner.__init__.__builtins__ }}",
                "__builtins__",
            ),
            ("{{ os.system('id') }}", "os."),
            ("{{ lipsum|attr('popen') }}", "popen"),
            ("{{ __import__('os') }}", "__import__"),
        ] {
            assert_eq!(unsafe_token(t).as_deref(), Some(token), "{t}");
        }
    }

    #[test]
    fn ordinary_templates_are_not() {
        let llama3 = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
        let chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
        let mistral = "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}";
        for t in [
            llama3,
            chatml,
            mistral,
            "{{ macros.x }} {{ photos.y }} {{ memory }}",
        ] {
            assert_eq!(unsafe_token(t), None, "{t}");
        }
    }
}
