#!/usr/bin/env python3
# Description: the gateway's chat templates (engined/gateway/chat-template.c over the Jinja interpreter) against Jinja itself: every tokenizer_config.json fixture in tests/chat-templates/ (bos_token and eos_token from the file, as the gateway reads them) rendered by the C code and by python3-jinja2 set up as transformers sets it up, over conversations that probe strip/trim, roles and errors (the template's raise_exception text word for word); transformers' own outputs for four templates; a template that does not parse is refused with its line.
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "chat-templates")
RENDER = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.environ.get("BUILD_DIR", os.path.join(HERE, "..", "build")), "tests", "chat-template-render")

try:
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("SKIP: python3-jinja2 is not installed (tools/install-deps.sh installs it)")
    sys.exit(77)

fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg)


def special(cfg, key):
    v = cfg.get(key)
    if isinstance(v, dict):
        v = v.get("content")
    return v


def jinja_render(cfg, msgs, agp):
    """What transformers' apply_chat_template(tokenize=False) does."""
    def raise_exception(message):
        raise TemplateError(message)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        return True, env.from_string(cfg["chat_template"]).render(
            messages=msgs, add_generation_prompt=agp,
            bos_token=special(cfg, "bos_token"), eos_token=special(cfg, "eos_token"))
    except TemplateError as e:
        return False, str(e)


def c_render(path, msgs, agp):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(msgs, f)
        conv = f.name
    try:
        args = [RENDER, path, conv] + ([] if agp else ["--no-generation-prompt"])
        p = subprocess.run(args, capture_output=True)
    finally:
        os.unlink(conv)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8").strip()


def m(role, content):
    return {"role": role, "content": content}


SYS = m("system", "You are a helpful assistant")
CHAT = [m("user", "Hello"), m("assistant", "Hi there"), m("user", "Who are you"),
        m("assistant", "   I am an assistant   "), m("user", "Another question")]
CONVERSATIONS = [
    ("five turns", CHAT, True),
    ("five turns + system", [SYS] + CHAT, True),
    ("one user turn", [m("user", "Once upon a time")], True),
    ("no generation prompt", [m("user", "Hi"), m("assistant", "Hello!")], False),
    ("ends with the assistant", [m("user", "Hi"), m("assistant", "Hello")], True),
    ("unicode whitespace", [m("user", "\u00a0\u3000 hi \u2003\n\t ")], True),
    ("system, blank user", [m("system", " sys "), m("user", "  \n ")], True),
    ("empty content", [m("user", "")], True),
    ("quotes, backslashes, newlines", [m("user", "a 'b' \"c\" \\n d\\\ne {{ x }} {% y %}")], True),
    ("emoji and CJK", [SYS, m("user", "\U0001F600 你好  ")], True),
    ("two users in a row", [m("user", "a"), m("user", "b")], True),
    ("assistant first", [m("assistant", "a"), m("user", "b")], True),
    ("system later", [m("user", "a"), m("system", "b")], True),
    ("system later, then user", [m("user", "a"), m("system", "b"), m("user", "c")], True),
]

# transformers' apply_chat_template outputs for the five-turn chat, as published
# with mistral.rs's chat-template tests
TRANSFORMERS = {
    "chatml": ([SYS] + CHAT, "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n"),
    "mistral-instruct-v0.1": (CHAT, "<s>[INST] Hello [/INST]Hi there</s> [INST] Who are you [/INST]   I am an assistant   </s> [INST] Another question [/INST]"),
    "llama-2-chat": ([SYS] + CHAT, "<s>[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s><s>[INST] Who are you [/INST] I am an assistant </s><s>[INST] Another question [/INST]"),
    "mixtral-instruct": (CHAT, "<s>[INST] Hello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"),
}

if not os.access(RENDER, os.X_OK):
    print("FAIL: %s not built" % RENDER)
    sys.exit(1)

compared = 0
for name in sorted(os.listdir(FIXTURES)):
    path = os.path.join(FIXTURES, name)
    if not name.endswith(".json"):
        continue
    cfg = json.load(open(path))
    key = name[:-5]
    for title, msgs, agp in CONVERSATIONS:
        ok, want = jinja_render(cfg, msgs, agp)
        rc, got, err = c_render(path, msgs, agp)
        compared += 1
        if ok and (rc != 0 or got != want):
            fail("%s / %s: jinja %r, ours (exit %d) %r %s" % (key, title, want, rc, got, err))
        elif not ok and (rc != 4 or err != want):
            fail("%s / %s: jinja raises %r, ours (exit %d) %r %r" % (key, title, want, rc, got, err))
    if key in TRANSFORMERS:
        msgs, want = TRANSFORMERS[key]
        ok, jin = jinja_render(cfg, msgs, True)
        rc, got, err = c_render(path, msgs, True)
        if jin != want:
            fail("%s: this Jinja setup differs from transformers: %r" % (key, jin))
        if got != want:
            fail("%s: ours differs from transformers: %r" % (key, got))
    print("ok: %s matches Jinja on %d conversations" % (key, len(CONVERSATIONS)))

# the same template text with real newlines instead of Jinja's '\n' is the same template
cfg = json.load(open(os.path.join(FIXTURES, "llama-2-chat.json")))
cfg["chat_template"] = cfg["chat_template"].replace("\\n", "\n")
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump(cfg, f)
rc, got, err = c_render(f.name, [SYS] + CHAT, True)
os.unlink(f.name)
if rc != 0 or got != TRANSFORMERS["llama-2-chat"][1]:
    fail("llama-2-chat with literal newlines: exit %d %r %s" % (rc, got, err))
else:
    print("ok: a template's '\\n' and a literal newline are one template")

# a template that does not parse is refused, naming the line
cfg = {"chat_template": "{% for m in messages %}\n{{ m.content }}\n{% endfor %}\n{% include 'x' %}"}
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump(cfg, f)
rc, got, err = c_render(f.name, [m("user", "hi")], True)
os.unlink(f.name)
if rc != 3 or err != "line 4: unsupported statement 'include'":
    fail("a template with include: exit %d %r %r" % (rc, got, err))
else:
    print("ok: an unsupported statement is refused with its line (%s)" % err)

if fails:
    print("%d failures" % fails)
    sys.exit(1)
print("chat-templates: all %d renderings equal Jinja's" % compared)
