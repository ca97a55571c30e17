//! The demonstration: read a program JAX printed, check it, print it back byte for byte,
//! and evaluate it with the reference interpreter next to JAX's own outputs.
//!
//! Run with `cargo run --release --example demo`.

use std::path::Path;

use remat_ir::{parse_jaxpr, pp_jaxpr, Array};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/conformance");
    for case_name in ["seed_policy_dots_no_batch", "seed_scan_plain"] {
        let case: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(data.join(format!("{case_name}.json")))?)?;
        let text = case["jaxpr"].as_str().ok_or("case without jaxpr")?;
        match case["description"].as_str().filter(|d| !d.is_empty()) {
            Some(d) => println!("== {case_name}: {d}"),
            None => println!("== {case_name}"),
        }

        let jaxpr = parse_jaxpr(text, &format!("{case_name}.jaxpr"))?;
        remat_ir::verify::verify(&jaxpr)?;
        let printed = pp_jaxpr(&jaxpr);
        println!("{printed}");
        println!("printed text identical to JAX's: {}", printed == text);

        let args = case["args"]
            .as_array()
            .ok_or("case without args")?
            .iter()
            .map(Array::from_json)
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = remat_interp::eval_jaxpr(&jaxpr, &[], &args)?;
        for (i, (out, jax)) in outputs.iter().zip(case["outputs"].as_array().ok_or("case without outputs")?).enumerate()
        {
            let jax = Array::from_json(jax)?;
            let worst =
                out.to_f64_vec().iter().zip(jax.to_f64_vec()).map(|(a, b)| (a - b).abs()).fold(0.0f64, f64::max);
            println!("output {i}: {} = {:?} (largest difference from JAX: {worst:.2e})", out.aval(), preview(out));
        }
        println!();
    }
    println!("Next: `remat print FILE.jaxpr` and `remat eval FILE.jaxpr --inputs IN.json` do the same from the command line.");
    Ok(())
}

fn preview(a: &Array) -> Vec<f64> {
    a.to_f64_vec().into_iter().take(6).collect()
}
