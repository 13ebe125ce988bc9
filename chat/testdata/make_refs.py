#!/usr/bin/env python3
"""Render every conversation in conversations.json with every template in templates.json
the way Hugging Face's tokenizer.apply_chat_template(..., tokenize=False) does, and write the
results for chat_test.go to compare byte for byte.

Command lines (run from the repository root; no network, no model files needed):

    python3 chat/testdata/make_refs.py                    # transformers -> chat/testdata/hf_refs.json
    python3 chat/testdata/make_refs.py --engine jinja2    # plain jinja2 -> chat/testdata/jinja2_refs.json

--engine transformers (the default) needs the transformers package (any version with
transformers.utils.chat_template_utils: 4.51 or newer, 5.x included) and renders through its
render_jinja_template, the function apply_chat_template calls: Hugging Face's own sandboxed
Jinja environment, tojson, raise_exception and strftime_now. Torch is not needed.

--engine jinja2 needs only jinja2 and renders through make_hf_like_env below, a copy of the
environment that transformers builds (same options, filters and globals). It exists so that the
references can be regenerated where transformers is not installed; its output is written to a
different file and says which engine made it.

Both pass what apply_chat_template passes: messages, tools (None when the conversation has
none), documents=None, add_generation_prompt, the tokenizer's bos_token/eos_token (left out when
the tokenizer has none, as its special_tokens_map leaves them out) and the extra variables of the
template and of the conversation. A render that raises is recorded as an error with the
exception's type and message.
"""

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent


def make_hf_like_env():
    """The Jinja environment of transformers.utils.chat_template_utils._compile_jinja_template."""
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(Extension):
        # transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def transformers_renderer():
    import transformers
    from transformers.utils import chat_template_utils as ctu

    def render(template, messages, tools, add_generation_prompt, variables):
        if hasattr(ctu, "render_jinja_template"):
            result = ctu.render_jinja_template(
                conversations=[messages],
                tools=tools,
                documents=None,
                chat_template=template,
                add_generation_prompt=add_generation_prompt,
                **variables,
            )
            # (rendered chats, generation indices) in 4.5x; take the one chat either way.
            rendered = result[0] if isinstance(result, tuple) else result
            return rendered[0] if isinstance(rendered, list) else rendered
        # Older 4.x: apply_chat_template compiled the template and rendered it directly.
        compiled = ctu._compile_jinja_template(template)
        return compiled.render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt, **variables
        )

    return render, "transformers " + transformers.__version__


def jinja2_renderer():
    import jinja2

    env = make_hf_like_env()

    def render(template, messages, tools, add_generation_prompt, variables):
        compiled = env.from_string(template)
        return compiled.render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt, **variables
        )

    return render, "jinja2 " + jinja2.__version__ + " (make_refs.py's copy of the transformers environment)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=["transformers", "jinja2"], default="transformers")
    parser.add_argument("--out", help="output file (default: hf_refs.json or jinja2_refs.json beside this script)")
    args = parser.parse_args()

    if args.engine == "transformers":
        render, engine = transformers_renderer()
        out = Path(args.out) if args.out else HERE / "hf_refs.json"
    else:
        render, engine = jinja2_renderer()
        out = Path(args.out) if args.out else HERE / "jinja2_refs.json"

    templates = json.loads((HERE / "templates.json").read_text(encoding="utf-8"))["templates"]
    conversations = json.loads((HERE / "conversations.json").read_text(encoding="utf-8"))["conversations"]

    refs = {}
    for t in templates:
        source = (HERE / t["file"]).read_text(encoding="utf-8")
        for c in conversations:
            variables = {}
            for key in ("bos_token", "eos_token"):
                if t.get(key) is not None:
                    variables[key] = t[key]
            variables.update(t.get("vars", {}))
            variables.update(c.get("vars", {}))
            key = t["name"] + "/" + c["name"]
            try:
                refs[key] = {"text": render(source, c["messages"], c.get("tools"), c["add_generation_prompt"], variables)}
            except Exception as e:  # the template raised: record it, the Go side must fail too
                refs[key] = {"error": str(e), "error_type": type(e).__name__}

    doc = {"engine": engine, "command": "python3 chat/testdata/make_refs.py --engine " + args.engine, "refs": refs}
    out.write_text(json.dumps(doc, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{out}: {len(refs)} renders by {engine}", file=sys.stderr)


if __name__ == "__main__":
    main()
