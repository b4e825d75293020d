#!/usr/bin/python3
"""Render a chat template exactly as Hugging Face transformers does (the reference for
mxserve's C++ Jinja engine, src/tokenizer/jinja*).

Environment: jinja2 ImmutableSandboxedEnvironment with trim_blocks=True,
lstrip_blocks=True, the loopcontrols extension, `tojson` = json.dumps with
ensure_ascii=False by default, and the `raise_exception` global. Needs python3-jinja2
(`apt-get install python3-jinja2`).

Usage:
  render_chat_template.py TEMPLATE.jinja CASE.json [-o OUT.txt]
  render_chat_template.py --dir tests/chat_template   # re-render every NAME.json there
      (the template is NAME.jinja, or the "template" field of the case file when set).

CASE.json: {"messages": [...], "tools": [...], "add_generation_prompt": true,
            "kwargs": {...}, "bos_token": "...", "eos_token": "..."}
A render error is written as "ERROR: <message>" to NAME.err instead of NAME.txt.
"""
import argparse
import glob
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render(template_src, case):
    env = make_env()
    template = env.from_string(template_src)
    # As transformers' apply_chat_template: special tokens, then chat_template_kwargs, then
    # messages/tools/documents/add_generation_prompt (tools and documents None when absent).
    ctx = {}
    for key in ("bos_token", "eos_token"):
        if key in case:
            ctx[key] = case[key]
    ctx.update(case.get("kwargs", {}))
    ctx["messages"] = case.get("messages", [])
    ctx["tools"] = case.get("tools")
    ctx["documents"] = None
    ctx["add_generation_prompt"] = case.get("add_generation_prompt", True)
    return template.render(**ctx)


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def render_case(template_path, case_path, out_base):
    case = json.loads(read(case_path))
    try:
        text = render(read(template_path), case)
    except Exception as e:  # noqa: BLE001 - any template error becomes an .err golden
        write(out_base + ".err", "ERROR: %s" % e)
        if os.path.exists(out_base + ".txt"):
            os.remove(out_base + ".txt")
        return
    write(out_base + ".txt", text)
    if os.path.exists(out_base + ".err"):
        os.remove(out_base + ".err")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("template", nargs="?")
    ap.add_argument("case", nargs="?")
    ap.add_argument("-o", "--out")
    ap.add_argument("--dir")
    args = ap.parse_args()
    if args.dir:
        for case_path in sorted(glob.glob(os.path.join(args.dir, "*.json"))):
            base = case_path[:-len(".json")]
            case = json.loads(read(case_path))
            template = case.get("template")
            template_path = (os.path.join(args.dir, template) if template else base + ".jinja")
            render_case(template_path, case_path, base)
        return 0
    if not args.template or not args.case:
        ap.error("TEMPLATE and CASE are required without --dir")
    case = json.loads(read(args.case))
    text = render(read(args.template), case)
    if args.out:
        write(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
