//! The check every Rust zoo model passes: its trace against the zoo's recording of the
//! same Python model (`tests/data/zoo/NAME.json`, JAX 0.10.2).
//!
//! 1. the traced jaxpr prints exactly as the recorded `jaxpr` (`make_jaxpr` prints no
//!    source locations, so the comparison is byte for byte), with the recorded argument
//!    names;
//! 2. the vjp saves JAX's residuals: `saved_residuals` (aval, kind, name, in order), and
//!    `print_saved_residuals`'s lines as `jax_saved_residuals_text` has them, each line's
//!    source location aside (`from gen_zoo.py:124:20 (dropout_mlp)` there, the Rust file's
//!    line here). JAX's `from a literal` lines are left out of both comparisons, as
//!    `tests/zoo.rs` leaves them out (no rule over the jaxpr can tell them; see
//!    `docs/real_models.md`);
//! 3. the traced program gives the recorded outputs and gradients, with the interpreter
//!    and with the JIT, by the zoo's rule (`check_zoo_values`).

use std::path::Path;

use remat::run::{Backend, Program, RunOptions, VjpRunner};
use remat::{make_jaxpr, ArgTree, Array, Nans, TensorTree, Traced};
use remat_testkit::{
    arg_names, check_zoo_values, data_dir, forward_only, optional_arrays, read_json, reduced_precision, zoo_cotangents,
};
use serde_json::Value;

/// One recorded zoo case.
pub struct Case {
    pub name: String,
    pub json: Value,
}

impl Case {
    /// `tests/data/zoo/NAME.json`.
    pub fn load(name: &str) -> Case {
        let path = data_dir().join("zoo").join(format!("{name}.json"));
        Case { name: name.to_string(), json: read_json(Path::new(&path)) }
    }

    /// The recorded arguments, flattened as JAX flattens them.
    pub fn args(&self) -> Vec<Array> {
        optional_arrays(&self.json, "args").into_iter().map(|a| a.expect("every argument is recorded")).collect()
    }

    fn text(&self, field: &str) -> &str {
        self.json[field].as_str().unwrap_or_else(|| panic!("{}: field {field} is not a string", self.name))
    }

    /// Traces `f` at `args` (a tree of the recorded arrays) and runs the three checks,
    /// returning every failure.
    pub fn check<A: ArgTree, R: TensorTree>(&self, f: impl FnOnce(A::Traced) -> R, args: &A) -> Vec<String> {
        let traced = match make_jaxpr(f, args) {
            Ok(t) => t,
            Err(e) => return vec![format!("{}: trace: {e}", self.name)],
        };
        let mut failures = Vec::new();
        failures.extend(self.check_text(&traced).err());
        failures.extend(self.check_residuals(&traced).err());
        failures.extend(self.check_values(&traced, args).err());
        failures
    }

    /// [`Case::check`], asserting that it finds nothing.
    pub fn assert_matches<A: ArgTree, R: TensorTree>(&self, f: impl FnOnce(A::Traced) -> R, args: &A) {
        let failures = self.check(f, args);
        assert!(failures.is_empty(), "{}:\n{}", self.name, failures.join("\n"));
    }

    /// Check 1: the text and the argument names.
    pub fn check_text(&self, traced: &Traced) -> Result<(), String> {
        let got = traced.to_string();
        let want = self.text("jaxpr");
        if got != want {
            let line = got.lines().zip(want.lines()).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "{}: prints differently from line {}:\n got  {:?}\n want {:?}\nwhole text:\n{got}",
                self.name,
                line + 1,
                got.lines().nth(line).unwrap_or("<end>"),
                want.lines().nth(line).unwrap_or("<end>"),
            ));
        }
        let names = arg_names(&self.json);
        if traced.arg_names != names {
            return Err(format!("{}: argument names {:?}, JAX's {:?}", self.name, traced.arg_names, names));
        }
        Ok(())
    }

    /// Check 2: the residuals, as a list and as `print_saved_residuals` lines.
    pub fn check_residuals(&self, traced: &Traced) -> Result<(), String> {
        if forward_only(&self.json) {
            return Ok(());
        }
        let jaxpr = &traced.jaxpr.jaxpr;
        let v = remat::ad::vjp(jaxpr, &traced.arg_names).map_err(|e| format!("{}: vjp: {e}", self.name))?;
        let got: Vec<String> =
            v.residuals.iter().map(|r| format!("{} {} {}", r.aval, r.kind.kind_name(), r.kind.what())).collect();
        let want = remat_testkit::jax_residual_lines(&self.json);
        if got != want {
            return Err(format!("{}: residuals differ:\n got  {got:?}\n want {want:?}", self.name));
        }
        let text = remat::ad::print_saved_residuals(jaxpr, &traced.arg_names)
            .map_err(|e| format!("{}: print_saved_residuals: {e}", self.name))?;
        let got: Vec<String> = text.lines().map(without_location).collect();
        let want: Vec<String> = self.json["jax_saved_residuals_text"]
            .as_array()
            .expect("jax_saved_residuals_text is a list of lines")
            .iter()
            .map(|l| l.as_str().expect("a line"))
            .filter(|l| !l.ends_with("from a literal"))
            .map(without_location)
            .collect();
        if got != want {
            return Err(format!("{}: print_saved_residuals differs:\n got  {got:#?}\n want {want:#?}", self.name));
        }
        Ok(())
    }

    /// Check 3: outputs and gradients, interpreter and JIT.
    pub fn check_values<A: ArgTree>(&self, traced: &Traced, args: &A) -> Result<(), String> {
        let flat = traced.flatten_args(args).map_err(|e| format!("{}: {e}", self.name))?;
        let refs: Vec<&Array> = flat.iter().collect();
        let reduced = reduced_precision(&self.json);
        let outputs = optional_arrays(&self.json, "outputs");
        for backend in [Backend::Interp, Backend::Jit] {
            let options = RunOptions { backend, nans: Nans::Propagate, ..RunOptions::default() };
            let at = |e: String| format!("{} ({backend:?}): {e}", self.name);
            let p = Program::new(traced.jaxpr.clone(), &options).map_err(|e| at(e.to_string()))?;
            let outs = p.run(&refs).map_err(|e| at(e.to_string()))?;
            check_zoo_values("output", &outs, &outputs, reduced).map_err(at)?;
            if forward_only(&self.json) {
                continue;
            }
            let jaxpr = &traced.jaxpr.jaxpr;
            let out_avals: Vec<_> = jaxpr.outvars.iter().map(|a| jaxpr.atom_aval(a)).collect();
            let cts = zoo_cotangents(&self.json, &out_avals);
            let runner = VjpRunner::new(&traced.jaxpr, &options).map_err(|e| at(e.to_string()))?;
            let r = runner.run(&refs, &cts.iter().collect::<Vec<_>>()).map_err(|e| at(e.to_string()))?;
            check_zoo_values("vjp output", &r.outputs, &outputs, reduced).map_err(at)?;
            check_zoo_values("grad", &r.grads, &optional_arrays(&self.json, "grads"), reduced).map_err(at)?;
        }
        Ok(())
    }
}

/// A `print_saved_residuals` line without its source location: `... from FILE:L:C (fn)`
/// becomes `...`; argument lines (`from the argument x`) stay whole.
fn without_location(line: &str) -> String {
    match line.rfind(" from ") {
        Some(i) if !line[i..].starts_with(" from the argument") => line[..i].to_string(),
        _ => line.to_string(),
    }
}
