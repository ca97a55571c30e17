//! Never a wrong answer, never a silent reinterpretation (issue 40): its reproducers as a
//! new user ran them, end to end, and every option that takes a value given odd values,
//! each with the error that must quote it. Each row of `REJECTED` is a command line and a
//! part of the message it must give, with a non-zero exit.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat")).args(args).output().expect("run remat")
}

/// `jax.make_jaxpr(f)(x)` of `f = lambda x: lax.fori_loop(0, 2, lambda i, acc: acc + x[i], 0.0)`.
const FORI_LOOP: &str = "{ lambda ; a:f32[2]. let
    _:i32[] b:f32[] = scan[
      jaxpr={ lambda ; c:f32[2] d:i32[] e:f32[]. let
          f:i32[] = add d 1:i32[]
          g:bool[] = lt d 0:i32[]
          h:i32[] = convert_element_type[new_dtype=int32 weak_type=False] d
          i:i32[] = add h 2:i32[]
          j:i32[] = select_n g d i
          k:f32[1] = dynamic_slice[slice_sizes=(1,)] c j
          l:f32[] = squeeze[dimensions=(0,)] k
          m:f32[] = convert_element_type[new_dtype=float32 weak_type=False] e
          n:f32[] = add m l
        in (f, n) }
      length=2
      num_carry=2
      num_consts=1
      reverse=False
      unroll=1
    ] a 0:i32[] 0.0:f32[]
  in (b,) }";

/// A checkpoint under JAX's opaque `save_and_offload_only_these_names` closure.
const OPAQUE_POLICY: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = remat2[
      differentiated=False
      jaxpr={ lambda ; c:f32[3]. let
          d:f32[3] = sin c
          e:f32[3] = name[name=attn] d
          f:f32[3] = sin e
          g:f32[3] = name[name=mlp_hidden] f
          h:f32[3] = sin g
        in (h,) }
      policy=<function save_and_offload_only_these_names.<locals>.policy at 0xXXXXXXXXXXXX>
      prevent_cse=True
    ] a
    i:f32[] = reduce_sum[axes=(0,) out_sharding=None] b
  in (i,) }";

/// The files every row reads, written once into a temporary directory.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::Builder::new().prefix("remat-strict").tempdir().expect("a temporary directory");
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("writable");
        write("fori.jaxpr", FORI_LOOP);
        write("opaque.jaxpr", OPAQUE_POLICY);
        write("x.json", r#"[{"dtype":"f32","shape":[2],"data":[1,2]}]"#);
        write("x3.json", r#"[{"dtype":"f32","shape":[3],"data":[1,-2,3]}]"#);
        write("ct.json", r#"[{"dtype":"f32","shape":[],"data":[1]}]"#);
        write("empty.json", "[]");
        write("int.json", r#"[{"dtype":"i32","shape":[2],"data":[1,2]}]"#);
        Files { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().expect("a UTF-8 path").to_string()
    }

    /// A command line with `@name` replaced by the path of that file.
    fn args(&self, line: &str) -> Vec<String> {
        line.split(' ').map(|w| w.strip_prefix('@').map_or_else(|| w.to_string(), |f| self.path(f))).collect()
    }
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Reproducer 1: the loss of the `fori_loop` is 3 on both backends (the JIT gave 2: an
/// index made in the scan body and stacked as a residual was read stale).
#[test]
fn a_fori_loop_over_an_array_has_the_same_loss_and_gradient_on_both_backends() {
    let f = Files::new();
    for backend in ["interp", "jit"] {
        let line = format!("grad @fori.jaxpr --inputs @x.json --cotangents @ct.json --backend {backend}");
        let v = json_of(&remat(&f.args(&line).iter().map(String::as_str).collect::<Vec<_>>()));
        assert_eq!(v["outputs"][0]["data"][0].as_f64(), Some(3.0), "{backend}: {v}");
        assert_eq!(v["grads"][0]["data"], serde_json::json!([1.0, 1.0]), "{backend}: {v}");
    }
}

/// Reproducer 4: JAX's value-and-grad of a `fori_loop` over `jnp.where`s, whose top level
/// holds an equation without outputs, prints back as JAX printed it and runs to JAX's values
/// (`(7.0, [1.0, 0.0, 2.0])` at `[1, -2, 3]`) on both backends.
#[test]
fn an_equation_without_outputs_is_read_printed_and_run() {
    let f = Files::new();
    let file = remat_testkit::data_dir().join("jax_extra/where_without_outputs.jaxpr");
    let text = std::fs::read_to_string(&file).expect("readable");
    let file = file.to_str().expect("a UTF-8 path");
    let printed = remat(&["print", file]);
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim_end(), text.trim_end());
    for backend in ["interp", "jit"] {
        let v = json_of(&remat(&["eval", file, "--inputs", &f.path("x3.json"), "--backend", backend]));
        assert_eq!(v["outputs"][0]["data"][0].as_f64(), Some(7.0), "{backend}: {v}");
        assert_eq!(v["outputs"][1]["data"], serde_json::json!([1.0, 0.0, 2.0]), "{backend}: {v}");
    }
}

/// Reproducer 5: a truncated file is reported where it ends, naming the brace still open.
#[test]
fn a_truncated_file_is_reported_where_it_ends() {
    let f = Files::new();
    // Cut inside a hoisted jaxpr, which the parser skips to first.
    let hoisted = format!(
        "let jaxpr = {} in\n{{ lambda ; a:f32[2]. let  in (a,) }}",
        &FORI_LOOP[FORI_LOOP.find("{ lambda ; c").expect("the body")..]
    );
    let cut = &hoisted[..hoisted.find("dynamic_slice").expect("in the text") + 7];
    std::fs::write(f.path("cut.jaxpr"), cut).expect("writable");
    let out = remat(&["print", &f.path("cut.jaxpr")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let last = cut.lines().count();
    let column = cut.lines().last().expect("a line").chars().count() + 1;
    assert!(err.contains(&format!("line {last}, column {column}: ")), "{err}");
    assert!(err.contains("the text ends inside the jaxpr whose `{` opens at line 1, column 13"), "{err}");
    // Cut in the middle of the main jaxpr: the word the text ends in, said to be the end.
    let cut = &FORI_LOOP[..FORI_LOOP.find("dynamic_slice").expect("in the text") + 7];
    std::fs::write(f.path("cut.jaxpr"), cut).expect("writable");
    let out = remat(&["print", &f.path("cut.jaxpr")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 9, column 22: unknown primitive `dynamic` (the text ends there: is it truncated?)"),
        "{err}"
    );
}

/// Reproducer 6: every command that differentiates a custom rule known only by name says
/// what it differentiates instead, on stderr (and `plan --json` in its notes).
#[test]
fn commands_that_differentiate_say_when_a_custom_rule_is_not_known() {
    let f = Files::new();
    let case: Value = serde_json::from_str(
        &std::fs::read_to_string(remat_testkit::data_dir().join("zoo/custom_vjp.json")).expect("the zoo case"),
    )
    .expect("JSON");
    std::fs::write(f.path("cvjp.jaxpr"), case["jaxpr"].as_str().expect("a jaxpr")).expect("writable");
    std::fs::write(f.path("cvjp_in.json"), case["args"].to_string()).expect("writable");
    std::fs::write(f.path("cvjp_ct.json"), case["cotangents"].to_string()).expect("writable");
    let note = "custom_vjp_call `clip_gradient` at";
    for line in [
        "residuals @cvjp.jaxpr",
        "fwd-bwd @cvjp.jaxpr",
        "grad @cvjp.jaxpr --inputs @cvjp_in.json --cotangents @cvjp_ct.json",
        "plan @cvjp.jaxpr --budget 1MiB",
        "explain @cvjp.jaxpr",
        "report @cvjp.jaxpr",
    ] {
        let out = remat(&f.args(line).iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("note: {note}")) && err.contains("call_jaxpr is differentiated"),
            "{line}: {err}"
        );
    }
    let v = json_of(&remat(
        &f.args("plan @cvjp.jaxpr --budget 1MiB --json").iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    assert!(v["notes"][0].as_str().is_some_and(|n| n.starts_with(note)), "{v}");
    let html = remat(&f.args("report @cvjp.jaxpr").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(String::from_utf8_lossy(&html.stdout).contains(note));
}

/// Reproducer 2: `--policy-names` as one quoted word means what its words mean.
#[test]
fn policy_names_quoted_as_one_word_mean_the_same() {
    let f = Files::new();
    let split = remat(
        &f.args("residuals @opaque.jaxpr --policy-names save=attn offload=mlp_hidden")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let one = remat(&["residuals", &f.path("opaque.jaxpr"), "--policy-names", "save=attn offload=mlp_hidden"]);
    assert!(split.status.success() && one.status.success(), "{}", String::from_utf8_lossy(&one.stderr));
    assert_eq!(split.stdout, one.stdout);
    assert!(String::from_utf8_lossy(&one.stdout).contains("f32<host>[3] output of device_put"));
}

/// Reproducer 3: a report's format follows `-o`'s extension.
#[test]
fn a_report_written_to_an_svg_file_is_an_svg() {
    let f = Files::new();
    let out = f.path("r.svg");
    let run = remat(&["report", &f.path("fori.jaxpr"), "--figure", "split", "-o", &out]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let text = std::fs::read_to_string(&out).expect("written");
    assert!(text.starts_with("<svg") && text.contains("id=\"split\""), "{}", &text[..text.len().min(200)]);
    let html = f.path("r.html");
    let run = remat(&["report", &f.path("fori.jaxpr"), "-o", &html]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(std::fs::read_to_string(&html).expect("written").starts_with("<!DOCTYPE html>"));
}

/// Every option given a value it cannot take: an error that quotes it, never a default.
const REJECTED: &[(&str, &str)] = &[
    ("bench @fori.jaxpr --runs 0", "invalid value '0' for '--runs <RUNS>': must be at least 1"),
    ("bench @fori.jaxpr --runs -1", "unexpected argument '-1'"),
    ("bench @fori.jaxpr --runs two", "`two` is not a count"),
    ("bench @fori.jaxpr --inputs @empty.json", "empty.json: 0 inputs for the 1 argument of"),
    ("eval @fori.jaxpr --inputs @int.json", "int.json: input 0 is i32[2] but argument 0 of"),
    ("grad @fori.jaxpr --inputs @x.json --cotangents @empty.json", "empty.json: 0 cotangents for the 1 outputs"),
    ("eval @fori.jaxpr --inputs @x.json --backend gpu", "invalid value 'gpu' for '--backend <BACKEND>'"),
    ("residuals @opaque.jaxpr --policy-names save=attn,,mlp_hidden", "an empty name in `save=attn,,mlp_hidden`"),
    (
        "residuals @opaque.jaxpr --policy-names keep=attn",
        "expected `save=` or `offload=`, found `keep=` in `keep=attn`",
    ),
    ("residuals @opaque.jaxpr --policy-names save='attn'", "holds `'`"),
    ("residuals @opaque.jaxpr --policy-names save=atn", "'atn' names no `checkpoint_name` inside a checkpoint"),
    ("residuals @opaque.jaxpr --policy-names save=attn offload=attn", "both saveable and offloadable"),
    ("residuals @fori.jaxpr --policy-names save=attn", "and the program has none"),
    ("residuals @opaque.jaxpr", "--policy-names save=NAMES offload=NAMES"),
    ("residuals @fori.jaxpr --arg-names x,y", "--arg-names gives 2 names for the 1 arguments"),
    ("residuals @fori.jaxpr --arg-names ,", "--arg-names `,`: name 1 is empty"),
    (
        "explain @opaque.jaxpr --policy-names save=attn --policy names:nosuchname",
        "the program has no checkpoint_name 'nosuchname'",
    ),
    ("explain @opaque.jaxpr --policy-names save=attn --policy names:attn+attn", "name `attn` is given twice"),
    ("explain @fori.jaxpr --policy everything_but_dots", "unknown policy `everything_but_dots`"),
    (
        "report @opaque.jaxpr --policy-names save=attn --compare nothing,names:typo",
        "the program has no checkpoint_name 'typo'",
    ),
    ("report @fori.jaxpr --figure split", "--figure chooses the figure of an SVG"),
    ("report @fori.jaxpr -o @r.svg --format html", "--format html contradicts -o"),
    ("report @fori.jaxpr -o @r.txt", "`.txt` is neither `.html` nor `.svg`"),
    ("report @fori.jaxpr --no-split --policy-names save=a", "--no-split reports an already-differentiated program"),
    ("report @fori.jaxpr --compare nothing,,dots", "entry 2 is empty"),
    ("plan @fori.jaxpr --budget 0.5", "budget `0.5`: a count of bytes is a whole number"),
    ("plan @fori.jaxpr --budget 1e3", "budget `1e3`: expected a number of bytes"),
    ("plan @fori.jaxpr --budget 12parsecs", "budget `12parsecs`: expected a number of bytes"),
    ("plan @fori.jaxpr --budget 99999999999999999999999", "more bytes than a 64-bit address holds"),
    ("plan @fori.jaxpr --budget 1MiB --argnums 0,0", "input 0 is given twice"),
    ("plan @fori.jaxpr --budget 1MiB --argnums 0,,1", "entry 2 is empty"),
    ("plan @fori.jaxpr --budget 1MiB --argnums 1-0", "the range `1-0` runs backwards"),
    ("plan @fori.jaxpr --budget 1MiB --argnums 3", "argnum 3 is out of range"),
    ("plan @fori.jaxpr --frontier -o @p.jaxpr", "-o writes the planned program for --budget"),
    ("plan @fori.jaxpr --budget 1MiB --names-only", "the program names none"),
    ("plan @opaque.jaxpr --budget 1MiB --policy-names save=nosuch", "'nosuch' names no `checkpoint_name`"),
];

#[test]
fn odd_option_values_are_errors_that_say_what_and_where() {
    let f = Files::new();
    let mut failures = Vec::new();
    for (line, want) in REJECTED {
        let args = f.args(line);
        let out = remat(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !err.contains(want) {
            failures.push(format!("`{line}`: exit {:?}, stderr: {err}", out.status.code()));
        }
        if err.contains("panicked") {
            failures.push(format!("`{line}` panicked: {err}"));
        }
    }
    assert!(!Path::new(&f.path("p.jaxpr")).exists(), "a refused plan wrote its -o file");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
