"""Every ```python block of README.md and docs/*.md runs, as a reader would paste it, and
what its comments say it gives is checked.

A block is found by the fence rule of `remat_testkit::docs` (crates/testkit/src/docs.rs): a
line of three or more backticks, a language word, the lines up to a fence of at least as
many backticks. A block that is a fragment (it uses a `loss` it does not define) gets the
setup below, keyed by its file and first line; every block runs in a fresh namespace in a
temporary directory (a block may write files), and then its checks run in that namespace.
A block that is neither in SETUP nor complete fails with the NameError that says what is
missing, so a new sample cannot go unrun.
"""

import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

FENCE = re.compile(r"^( *)(`{3,})(.*)$")


def doc_files():
    docs = sorted(f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    return ["README.md"] + [f"docs/{f}" for f in docs]


def code_blocks(file, text):
    """(file, line, lang, text) of every fenced block of `text`, as docs.rs finds them."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = len(m.group(1)), len(m.group(2)), m.group(3).strip()
        body, j = [], i + 1
        while j < len(lines):
            close = FENCE.match(lines[j])
            if close and close.group(3).strip() == "" and len(close.group(2)) >= ticks:
                break
            line = lines[j]
            strip = len(line) - len(line.lstrip(" "))
            body.append(line[min(strip, indent):])
            j += 1
        assert j < len(lines), f"{file}:{i + 1}: a code block that is never closed"
        blocks.append((file, i + 1, lang, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def python_blocks():
    out = []
    for file in doc_files():
        with open(os.path.join(ROOT, file), encoding="utf-8") as f:
            out += [b for b in code_blocks(file, f.read()) if b[2] == "python"]
    return out


def first_line(text):
    return text.split("\n", 1)[0].strip()


# What a fragment needs, by (file, first line of the block).
SETUP = {
    # docs/python.md's tour uses a loss, its parameters and a batch: a two-layer MLP.
    ("docs/python.md", "import jax, remat"): """
import jax.numpy as jnp
def loss(params, batch):
    x, y = batch
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)
params = {"w1": jnp.full((16, 32), 0.1), "w2": jnp.full((32, 4), 0.1)}
batch = (jnp.ones((8, 16)), jnp.zeros((8, 4)))
""",
    # docs/real_models.md's literal example: JAX's own saved_residuals on an f32[3].
    ("docs/real_models.md", "f = lambda x: jnp.sum(0.9 * x)              # a weak Python scalar"): """
import jax, jax.numpy as jnp, numpy as np
from jax._src.ad_checkpoint import saved_residuals
x = jnp.ones(3, jnp.float32)
""",
}


def check_readme(ns):
    # remat.plan fitted the budget by XLA's own memory analysis, and the planned loss's
    # gradient, run by JAX, has the arguments' structure.
    import jax.numpy as jnp
    grads, ws = ns["grads"], ns["ws"]
    assert [g.shape for g in grads] == [w.shape for w in ws]
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in grads)
    assert ns["plan"].xla_memory() is not None


def check_python_md(ns):
    assert os.path.getsize("loss.html") > 0
    assert callable(ns["step"])


def check_real_models(ns):
    # The comments' claims: the same text, JAX saves the weak scalar's literal only.
    import jax
    f, g, x, saved_residuals = ns["f"], ns["g"], ns["x"], ns["saved_residuals"]
    text = str(jax.make_jaxpr(f)(x))
    assert text == str(jax.make_jaxpr(g)(x))
    assert "b:f32[3] = mul 0.8999999761581421:f32[] a" in text, text
    assert [(str(a), w) for a, w in saved_residuals(f, x)] == [("float32[]", "from a literal")]
    assert saved_residuals(g, x) == []


# The checks of what a block's comments say, by the same key; a block without checks must
# still run without an error.
CHECKS = {
    ("README.md", "import jax, jax.numpy as jnp, remat"): check_readme,
    ("docs/python.md", "import jax, remat"): check_python_md,
    ("docs/real_models.md", "f = lambda x: jnp.sum(0.9 * x)              # a weak Python scalar"): check_real_models,
}


def test_the_tables_name_blocks_that_exist():
    keys = {(file, first_line(text)) for file, _, _, text in python_blocks()}
    assert keys, "no Python block found"
    missing = (set(SETUP) | set(CHECKS)) - keys
    assert not missing, f"SETUP/CHECKS name blocks that are gone: {missing}"


def test_the_fence_rule():
    text = "# T\n```python\nx = 1\n```\n- item:\n\n  ```python\n  y = 2\n    z\n  ```\n"
    got = [(line, lang, body) for _, line, lang, body in code_blocks("t.md", text)]
    assert got == [(2, "python", "x = 1\n"), (7, "python", "y = 2\n  z\n")]


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: f"{b[0]}:{b[1]}")
def test_block_runs(block, tmp_path, monkeypatch, capsys):
    file, line, _, text = block
    key = (file, first_line(text))
    monkeypatch.chdir(tmp_path)
    ns = {"__name__": "__doc_sample__"}
    exec(compile(SETUP.get(key, ""), f"<setup of {file}:{line}>", "exec"), ns)
    # Line numbers in a traceback are the document's.
    exec(compile("\n" * line + text, os.path.join(ROOT, file), "exec"), ns)
    capsys.readouterr()
    if key in CHECKS:
        CHECKS[key](ns)
