//! Shared by the conformance tests: a recorded JAX case (`tests/data/conformance/*.json`)
//! and the checks a Rust version of it must pass.

use remat_interp::eval_jaxpr;
use remat_ir::Array;
use remat_testkit::{arg_names, arrays, conformance_case, within};
use remat_trace::{ArgTree, Traced};

/// One case recorded from JAX: its program's text, arguments and outputs.
pub struct Case {
    pub name: String,
    pub jaxpr: String,
    pub args: Vec<Array>,
    pub outputs: Vec<Array>,
    pub arg_names: Vec<String>,
    /// What JAX's vjp saves: `(aval, kind, what)` in JAX's order.
    pub saved_residuals: Vec<(String, String, String)>,
}

impl Case {
    pub fn load(name: &str) -> Case {
        let json = conformance_case(name);
        Case {
            name: name.to_string(),
            jaxpr: json["jaxpr"].as_str().unwrap().to_string(),
            args: arrays(&json, "args"),
            outputs: arrays(&json, "outputs"),
            arg_names: arg_names(&json),
            saved_residuals: json["saved_residuals"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let field = |k: &str| r[k].as_str().unwrap().to_string();
                    (field("aval"), field("kind"), field("what"))
                })
                .collect(),
        }
    }

    /// The `i`-th flattened argument.
    pub fn arg(&self, i: usize) -> Array {
        self.args[i].clone()
    }

    /// The traced program verifies, takes JAX's argument names and, evaluated on the case's
    /// arguments (flattened from `args`, the tree it was traced with), gives JAX's outputs
    /// (|a - b| <= max(1e-4 |b|, 1e-5)).
    pub fn assert_evaluates(&self, traced: &Traced, args: &impl ArgTree) {
        remat_ir::verify_closed(&traced.jaxpr)
            .unwrap_or_else(|e| panic!("{}: the traced jaxpr does not verify: {e}", self.name));
        assert_eq!(traced.arg_names, self.arg_names, "{}: argument names", self.name);
        let flat = traced.flatten_args(args).unwrap();
        for (i, (a, b)) in flat.iter().zip(&self.args).enumerate() {
            assert_eq!(a.to_f64_vec(), b.to_f64_vec(), "{}: argument {i} is not the case's", self.name);
        }
        let got = eval_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &flat)
            .unwrap_or_else(|e| panic!("{}: evaluation failed: {e}", self.name));
        assert_eq!(got.len(), self.outputs.len(), "{}: number of outputs", self.name);
        for (i, (g, w)) in got.iter().zip(&self.outputs).enumerate() {
            assert_eq!(g.aval(), w.aval(), "{}: output {i} type", self.name);
            for (j, (a, b)) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()).enumerate() {
                let close = within(a, b, 1e-4, 1e-5) || a == b;
                assert!(close, "{}: output {i}, element {j}: got {a}, JAX gave {b}", self.name);
            }
        }
    }

    /// The traced program's vjp saves what JAX's saves (aval, kind and name, in JAX's
    /// order), and the saved outputs point at the Rust source that computed them.
    pub fn assert_residuals(&self, traced: &Traced) {
        let residuals = remat_ad::saved_residuals(&traced.jaxpr.jaxpr, &traced.arg_names)
            .unwrap_or_else(|e| panic!("{}: vjp failed: {e}", self.name));
        let got: Vec<(String, String, String)> = residuals
            .iter()
            .map(|r| (r.aval.to_string(), r.kind.kind_name().to_string(), r.kind.what().to_string()))
            .collect();
        assert_eq!(got, self.saved_residuals, "{}: saved residuals differ from JAX's", self.name);
        for r in &residuals {
            let from_an_equation = matches!(r.kind.kind_name(), "output" | "named" | "jit");
            let offloaded = r.aval.memory_space != remat_ir::MemorySpace::Device;
            if from_an_equation && !offloaded {
                assert!(r.source.file.ends_with(".rs"), "{}: residual {r} does not point at Rust source", self.name);
            }
        }
    }

    /// The traced program prints exactly as JAX printed the case.
    pub fn assert_text(&self, traced: &Traced) {
        let text = traced.to_string();
        assert!(
            text == self.jaxpr,
            "{}: the jaxpr differs from JAX's\n--- JAX\n{}\n--- Rust\n{text}",
            self.name,
            self.jaxpr
        );
    }
}
