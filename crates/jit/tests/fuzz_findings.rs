//! The programs exploration with random programs (`REMAT_RANDOM_SEED=random` in
//! `tests/random_programs.rs`) found disagreeing or corrupting memory, as data, each with
//! the bug it found. Every one also runs into outputs that sit at the start of larger
//! allocations whose tail holds garbage (`common::differential_by`), so that a write past an
//! output fails here, at once, instead of corrupting the heap for the allocator to notice
//! later; and every one agrees with the interpreter bit for bit.

mod common;

use common::{check_bits, differential_by};
use remat_ir::{parse_jaxpr, Array, Jaxpr};
use remat_jit::{CseScope, Options};
use remat_testkit::Rng;

/// Runs `jaxpr` under every CSE scope (into fresh outputs, and into guarded ones: see
/// `common::differential_by`): nothing is written past an output, and the results are the
/// interpreter's, bit for bit.
fn check(what: &str, jaxpr: &Jaxpr, args: &[Array]) -> Result<(), String> {
    let options: Vec<Options> = [CseScope::Off, CseScope::Auto, CseScope::AcrossCheckpoints]
        .into_iter()
        .map(|cse| Options { cse, ..Options::default() })
        .collect();
    differential_by(what, jaxpr, args, &options, &check_bits)
}

fn args_of(jaxpr: &Jaxpr, seed: u64) -> Vec<Array> {
    let mut rng = Rng(seed);
    jaxpr.in_avals().iter().map(|a| rng.array(a)).collect()
}

/// Found as seed 2943126155616421681 (the process aborted in `free`): a 16-bit float
/// `dot_general` read only by a `transpose` wrote its f32 product into the transpose's
/// 16-bit buffer, twice the buffer's bytes. The product now goes to a buffer of its own.
/// (Seed 8249296833305715690 found it again with the transpose dead, its buffer lent to a
/// later output's memory: the second program.)
#[test]
fn a_16_bit_dot_read_by_a_transpose_writes_inside_its_buffer() {
    for dtype in ["bf16", "f16"] {
        for perm in ["(0, 1)", "(1, 0)"] {
            let out = if perm == "(0, 1)" { "7,3" } else { "3,7" };
            let text = format!(
                "{{ lambda ; a:{dtype}[7] b:{dtype}[3]. let
    c:{dtype}[7,3] = dot_general[dimension_numbers=(([], []), ([], [])) preferred_element_type={}] a b
    d:{dtype}[{out}] = transpose[permutation={perm}] c
  in (d,) }}",
                if dtype == "bf16" { "bfloat16" } else { "float16" }
            );
            let jaxpr = parse_jaxpr(&text, "finding").expect("parses");
            check(&format!("{dtype} {perm}"), &jaxpr, &args_of(&jaxpr, 7)).unwrap_or_else(|e| panic!("{e}"));
        }
        let text = format!(
            "{{ lambda ; a:{dtype}[1] b:{dtype}[6]. let
    c:{dtype}[1,6] = dot_general[dimension_numbers=(([], []), ([], [])) preferred_element_type={}] a b
    _:{dtype}[6,1] = transpose[permutation=(1, 0)] c
    d:{dtype}[6] = neg b
  in (d,) }}",
            if dtype == "bf16" { "bfloat16" } else { "float16" }
        );
        let jaxpr = parse_jaxpr(&text, "finding").expect("parses");
        check(&format!("{dtype} dead transpose"), &jaxpr, &args_of(&jaxpr, 7)).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Found as seeds 8099259646380176889 (f16) and 16223417802582915196 (bf16): the runtime's
/// 16-bit `cumlogsumexp` computed each `logaddexp` in f32 and rounded once, where the
/// interpreter (and the JIT's elementwise code) rounds every operation; a cancellation
/// downstream magnified the last-bit difference. It now rounds every operation.
#[test]
fn a_16_bit_cumlogsumexp_rounds_every_operation() {
    for dtype in ["bf16", "f16"] {
        for reverse in ["False", "True"] {
            let text = format!(
                "{{ lambda ; a:{dtype}[9,16]. let
    b:{dtype}[9,16] = cumlogsumexp[axis=1 reverse={reverse}] a
  in (b,) }}"
            );
            let jaxpr = parse_jaxpr(&text, "finding").expect("parses");
            for seed in 0..8 {
                check(&format!("{dtype} reverse={reverse} seed {seed}"), &jaxpr, &args_of(&jaxpr, seed))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}
