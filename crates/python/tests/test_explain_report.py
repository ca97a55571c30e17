"""`remat.explain` (the residual ledger) and `remat.report` (the HTML report and its SVG
figures) on the zoo and benchmark programs: the ledger's peak is the sum its text
states, its rows are the saved residuals, `policy=` and `budget=` work; the report is a
self-contained HTML page that Jupyter shows and `save` writes."""

import re

import jax
import pytest

import remat
import models
from helpers import args_of, jax_residuals, shape_structs

P = jax.checkpoint_policies
DIFFERENTIABLE = [c for c in models.ALL if not c.forward_only]
# Programs without a checkpoint of their own: `explain(policy=p)` checkpoints the whole
# function, so its rows are what JAX saves of `jax.checkpoint(f, policy=p)`.
UNCHECKPOINTED = ["mlp_small_plain", "transformer_plain", "gpt_plain", "cnn_plain", "resnet_plain",
                  "gelu_deep_plain", "scan_long_plain", "lstm", "unet_down_up", "vit_patch_embed", "moe_top_k"]
# The policies a ledger takes (an offloading policy is no ledger side): the names one on
# the one program that names these values (a policy of names the program lacks is an
# error, test_errors.py).
LEDGER_POLICIES = {
    "nothing_saveable": P.nothing_saveable,
    "everything_saveable": P.everything_saveable,
    "dots_saveable": P.dots_saveable,
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
}
LEDGER_CASES = [(name, p) for name in UNCHECKPOINTED for p in LEDGER_POLICIES] + \
    [("transformer_plain", "save_only_these_names")]
LEDGER_POLICIES["save_only_these_names"] = P.save_only_these_names("attn_out", "mlp_hidden")


def stated_peak(ledger):
    """The sum the ledger's text ends with: `peak: R (residuals) + O (other buffers) + U
    (unused) = P bytes`, as numbers."""
    m = re.findall(r"^peak: (\d+) \(residuals\) \+ (\d+) \(other buffers\) \+ (\d+) \(unused\) = (\d+) bytes",
                   ledger.text, re.M)
    assert len(m) == 1, ledger.text[-500:]
    return tuple(int(x) for x in m[0])


def assert_consistent(ledger, residuals):
    assert isinstance(ledger, remat.Ledger)
    r, o, u, total = stated_peak(ledger)
    assert r + o + u == total == ledger.peak_bytes
    assert (ledger.peak["residual_bytes"], ledger.peak["other_bytes"], ledger.peak["unused_bytes"]) == (r, o, u)
    assert ledger.plan["peak_bytes"] == ledger.peak_bytes
    assert [row["text"] for row in ledger.rows] == [x.line for x in residuals]
    assert [row["bytes"] for row in ledger.rows] == [x.bytes for x in residuals]
    assert str(ledger) == ledger.text and ledger.text.startswith("residual ledger: ")
    for i, row in enumerate(ledger.rows):
        assert f"residual {i}: {row['text']}" in ledger.text
    assert ledger._repr_html_().startswith("<pre>")


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=str)
def test_explain_as_written(case):
    args = args_of(case.name)
    ledger = remat.explain(case.fn, *args)
    assert_consistent(ledger, remat.saved_residuals(case.fn, *args))
    assert ledger.equations > 0


@pytest.mark.parametrize("name,policy", LEDGER_CASES)
def test_explain_under_policy_is_what_jax_saves(name, policy):
    case = models.by_name(name)
    args = args_of(name)
    p = LEDGER_POLICIES[policy]
    ledger = remat.explain(case.fn, *args, policy=p)
    assert_consistent(ledger, remat.saved_residuals(case.fn, *args, policy=p))
    want = jax_residuals(jax.checkpoint(case.fn, policy=p), *args)
    assert [(row["aval"], row["text"][len(row["aval"]) + 1:]) for row in ledger.rows] == [(a, d) for a, d, _ in want]


def test_explain_policy_replaces_the_programs_own():
    """On a program with checkpoints, `policy=` puts every checkpoint under it (the GPT
    block's save_only_these_names('attn_out') becomes nothing_saveable): the rows are those
    of the function inside the checkpoint, checkpointed with the new policy."""
    case = models.by_name("gpt_block")
    args = args_of(case.name)
    ledger = remat.explain(case.fn, *args, policy=P.nothing_saveable)
    inner = models.zoo.gpt_block_loss
    assert [row["text"] for row in ledger.rows] == \
        [r.line for r in remat.saved_residuals(inner, *args, policy=P.nothing_saveable)]
    assert not any("named 'attn_out'" in row["text"] for row in ledger.rows)
    assert any("named 'attn_out'" in r.line for r in remat.saved_residuals(case.fn, *args))


def test_explain_from_shape_dtype_structs():
    case = models.by_name("transformer_plain")
    args = args_of(case.name)
    a, b = remat.explain(case.fn, *args), remat.explain(case.fn, *shape_structs(args))
    assert a.text == b.text and a.peak_bytes == b.peak_bytes


@pytest.mark.parametrize("budget", ["10KiB", 12000, "0.015MB"])
def test_explain_with_a_budget(budget):
    """The planner's plan for the budget: a peak within it, below the program's own, and
    every row saved by the planner's decision or an argument."""
    case = models.by_name("transformer_plain")
    args = args_of(case.name)
    as_written = remat.explain(case.fn, *args)
    bytes_ = remat.parse_budget(budget)
    planned = remat.explain(case.fn, *args, budget=budget)
    r, o, u, total = stated_peak(planned)
    assert r + o + u == total == planned.peak_bytes
    assert planned.peak_bytes <= bytes_ < as_written.peak_bytes
    assert planned.plan["merged_across_checkpoints"] is False
    whys = {row["why"] for row in planned.rows}
    assert any(w.startswith(f"planner decision: the plan for a budget of {bytes_} bytes") for w in whys)
    assert all(w.startswith("planner decision") or w.startswith("an argument") for w in whys)


def test_explain_with_a_budget_no_plan_fits():
    case = models.by_name("transformer_plain")
    with pytest.raises(remat.RematError, match=r"no plan fits the budget of 100 bytes: the smallest peak reachable is \d+"):
        remat.explain(case.fn, *args_of(case.name), budget=100)


def test_parse_budget():
    assert remat.parse_budget("12GiB") == 12 << 30
    assert remat.parse_budget("64MiB") == 64 << 20
    assert remat.parse_budget("1.5GB") == 1_500_000_000
    assert remat.parse_budget("1000000") == 1_000_000
    assert remat.parse_budget(4096) == 4096


# ---- the report --------------------------------------------------------------------------


def test_report_html(tmp_path):
    case = models.by_name("mlp_medium_plain")
    args = args_of(case.name)
    report = remat.report(case.fn, *args, title="two tanh layers")
    assert isinstance(report, remat.Report)
    html = report._repr_html_()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<title>remat report: two tanh layers</title>" in html
    for section in ("Memory over program order", "The split", "Frontier", "Ledger"):
        assert section in html
    path = tmp_path / "report.html"
    report.save(path)
    assert path.read_text(encoding="utf-8") == html
    report.save(str(tmp_path / "again.html"))
    assert (tmp_path / "again.html").read_text(encoding="utf-8") == html


def test_report_title_defaults_to_the_function_name():
    case = models.by_name("mlp_medium_plain")
    html = remat.report(case.fn, *args_of(case.name)).html
    assert "<title>remat report: loss</title>" in html


def test_report_compares_policies_and_budgets():
    case = models.by_name("mlp_medium_plain")
    args = args_of(case.name)
    html = remat.report(case.fn, *args, policies=[P.dots_saveable, P.nothing_saveable], budgets=["1KiB"]).html
    assert html.startswith("<!DOCTYPE html>")
    for side in ("as written: peak", "dots_saveable: peak", "nothing_saveable: peak", "planner: plan for 1.00 KiB: peak"):
        assert side in html, side


@pytest.mark.parametrize("figure", ["split", "memory", "frontier"])
def test_report_figure_is_svg(figure):
    case = models.by_name("mlp_medium_plain")
    svg = remat.report(case.fn, *args_of(case.name), figure=figure)
    assert isinstance(svg, str)
    assert svg.startswith(f'<svg xmlns="http://www.w3.org/2000/svg" id="{figure}"') and svg.rstrip().endswith("</svg>")


def test_report_split_of_a_policy():
    """The split figure draws one side: as written, or the one policy given."""
    case = models.by_name("mlp_medium_plain")
    args = args_of(case.name)
    as_written = remat.report(case.fn, *args, figure="split")
    nothing = remat.report(case.fn, *args, figure="split", policies=[P.nothing_saveable])
    assert nothing.startswith("<svg") and nothing != as_written
    assert remat.report(case.fn, *args, figure="split", budgets=["1KiB"]).startswith("<svg")


def test_report_refuses_a_side_given_twice():
    """A policy or a budget given twice (a budget in two spellings of the same bytes
    included) is an error, as `remat report --compare dots,dots_saveable` is."""
    case = models.by_name("mlp_small_plain")
    args = args_of(case.name)
    P = jax.checkpoint_policies
    with pytest.raises(remat.RematError, match="given twice"):
        remat.report(case.fn, *args, policies=[P.dots_saveable, P.dots_saveable])
    with pytest.raises(remat.RematError, match="given twice"):
        remat.report(case.fn, *args, budgets=["1KiB", 1024])
