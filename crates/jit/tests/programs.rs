//! Hand-written programs for what the random generator reaches rarely: nested scans (loop
//! lifetimes in the planner), carries that swap places, and chains of layout primitives.
//! `exp_tanh_rows.jaxpr`: `exp` and `tanh` as kernel results (the native row functions)
//! over broadcast, transposed and split rows, saturated and overflowing. `row_blocks.jaxpr`:
//! row functions called on blocks of rows (with a partial last block, and inside an outer
//! loop; `f(x + bias)` with the bias either operand, fused into the row function), and column reductions accumulated in registers (groups of four vectors, single
//! vectors and scalar tail columns; sum, max, min, of a load and of an expression).
//! `row_maxima.jaxpr`: `reduce_max`/`reduce_min` over rows (the four-chain loops), NaNs
//! included, compared bit for bit. `stacked_index.jaxpr` and
//! `fori_loop_value_and_grad.jaxpr` (issue 40: JAX's `value_and_grad` of a `fori_loop`
//! summing `x[i]`): an index computed in a scan body (`clamp`, `select_n`) that feeds a
//! `dynamic_slice` and is also a stacked output, which the loop once wrote straight into
//! its stack while the slice still read the old scalar buffer. `zero_trip_scan_of_keys.jaxpr`
//! (found by the program fuzzer, issue 40): a scan of length 0 whose stacked outputs are
//! keys. `carry_at_a_carried_offset.jaxpr` (the fuzzer, issue 40): a new carry sliced from
//! an xs slice at an offset that is another carry, updated in the same trip (`i + 1`),
//! which the loop once wrote after that carry, so it read the new offset;
//! `while_carry_at_a_carried_offset.jaxpr`, the same in a `while`;
//! `recurrence_through_a_product.jaxpr` (the fuzzer): scans whose carry adds a product of
//! itself (`c + c . w`, u8 and f32), which the loop once ran after its trips as if the
//! product did not read the carry. `in_place_over_a_loop_invariant.jaxpr` (the fuzzer): the
//! last kernel of a scan body, reading a value computed before the loop, was written over
//! that value, which the next trip read again. Each
//! `tests/data/*.jaxpr` runs on pseudo-random inputs under the JIT and the interpreter.

mod common;

use common::differential;
use remat_ir::{parse_jaxpr, Array};
use remat_testkit::Rng;

#[test]
fn hand_written_programs_match_the_interpreter() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut paths: Vec<_> =
        std::fs::read_dir(&dir).expect("the data directory exists").map(|e| e.expect("entry").path()).collect();
    paths.sort();
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
        let jaxpr = parse_jaxpr(&std::fs::read_to_string(path).expect("readable"), &name).expect("parses");
        for seed in 0..4 {
            let mut rng = Rng(seed);
            let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
            if let Err(e) = differential(&name, &jaxpr, &args, 1e-4, 1e-5) {
                failures.push(e);
            }
        }
    }
    assert!(paths.len() >= 5);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `parallel_kernels.jaxpr` has loops and reductions of 2^15 elements and more (the split
/// threshold is 2^13), which run split over the worker threads: every kind of split
/// (rank-1 ranges of whole vectors with an odd tail, outer rows, a kept innermost axis of
/// a reduction, a kept middle axis, integer loops that are not vectorized, a destination
/// inside a concatenation).
#[test]
fn large_loops_are_split_over_threads_and_agree_with_the_interpreter() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/parallel_kernels.jaxpr");
    let jaxpr = parse_jaxpr(&std::fs::read_to_string(path).expect("readable"), "parallel_kernels").expect("parses");
    let compiled = remat_jit::compile(&jaxpr).expect("compiles");
    // g, h, i, j, k, l, m, r, v and the two halves of s: everything but the small fused
    // producers (f, n, o, p, q, t, u live inside their consumers' loops).
    assert_eq!(compiled.plan().parallel_steps, 11, "{:?}", compiled.plan());
    let mut rng = Rng(7);
    let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
    differential("parallel_kernels", &jaxpr, &args, 1e-4, 1e-5).expect("matches");
}

/// Two adjacent products that each run on one thread and touch disjoint memory run at once,
/// one per core (`paired_products.jaxpr`: a weight gradient beside the next layer's
/// product); two whose memory the planner shares (the second product's result placed where
/// the first one's operand was, which dies at the first) run one after the other.
#[test]
fn independent_small_products_run_at_once_unless_their_memory_is_shared() {
    for (name, pairs) in [("paired_products", 1), ("paired_products_in_reused_memory", 0)] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/{name}.jaxpr"));
        let jaxpr = parse_jaxpr(&std::fs::read_to_string(path).expect("readable"), name).expect("parses");
        let compiled = remat_jit::compile(&jaxpr).expect("compiles");
        // One core: nothing to pair with.
        let want = if rayon::current_num_threads() > 1 { pairs } else { 0 };
        assert_eq!(compiled.plan().paired_steps, want, "{name}: {:?}", compiled.plan());
        for seed in 0..4 {
            let mut rng = Rng(seed);
            let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
            differential(name, &jaxpr, &args, 1e-4, 1e-5).expect("matches");
        }
    }
}

/// Row maxima and minima (`reduce_max`/`reduce_min` over the innermost axis, which run four
/// vector chains over blocks of 16 elements) equal the interpreter's bit for bit: rows of
/// 135, 128, 64, 48, 33, 16 and 7 elements, of a load, of an expression, of a transposed
/// view, with NaNs in some rows (`sqrt` of a negative number), which win wherever they are.
#[test]
fn row_maxima_equal_the_interpreter_bit_for_bit() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/row_maxima.jaxpr");
    let jaxpr = parse_jaxpr(&std::fs::read_to_string(path).expect("readable"), "row_maxima").expect("parses");
    let mut nan_rows = 0;
    for seed in 0..8 {
        let mut rng = Rng(seed);
        let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
        let want = remat_interp::eval_jaxpr(&jaxpr, &[], &args).expect("the interpreter runs it");
        nan_rows += want[1].to_f64_vec().iter().filter(|x| x.is_nan()).count();
        common::differential_by("row_maxima", &jaxpr, &args, &[remat_jit::Options::default()], &common::check_bits)
            .expect("the same bits");
    }
    // The inputs do reach the NaN rule: some of the 48 rows of `sqrt(0.995 - a)` hold one.
    assert!(nan_rows > 0 && nan_rows < 48, "{nan_rows} rows with a NaN");
}

/// A value used twice by one later loop, at the points it was written, is computed in that
/// loop's registers instead of a buffer: the backward of a `tanh` layer is one loop. When
/// `g` is also an output it keeps its own loop, and then `tanh a`, read by two loops, keeps
/// its buffer.
#[test]
fn values_used_twice_in_one_loop_stay_in_registers() {
    let body = "
    e:f32[64,32] = tanh a
    f:f32[64,32] = sub 1.0:f32[] e
    g:f32[64,32] = mul b f
    h:f32[64,32] = mul g e
    i:f32[64,32] = add_any g h";
    let folded = format!("{{ lambda ; a:f32[64,32] b:f32[64,32]. let{body}\n  in (i,) }}");
    let kept = format!("{{ lambda ; a:f32[64,32] b:f32[64,32]. let{body}\n  in (i, g) }}");
    let mut rng = Rng(3);
    for (text, functions, peak) in [(folded, 2, 0), (kept, 4, 64 * 32 * 4)] {
        let jaxpr = parse_jaxpr(&text, "t").expect("parses");
        let compiled = remat_jit::compile(&jaxpr).expect("compiles");
        assert_eq!(compiled.plan().functions, functions, "{text}");
        assert_eq!(compiled.plan().peak_bytes, peak, "{text}");
        let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
        differential("tanh backward", &jaxpr, &args, 1e-5, 1e-6).expect("matches");
    }
}

/// The backward scan of an RNN (`scan_long_plain`'s reduced twin: 16 steps, batch 8,
/// width 32) holds nothing per step but its carries. The cotangent each step makes is
/// computed straight into the stack the deferred weight-gradient products read (no buffer
/// and no copy), and that stack is the incoming cotangent stack, filled slot by slot over
/// the slots the loop consumes; the next cotangent (`g @ W^T`) goes straight into the
/// carry's buffer, the bias gradient's row sum is accumulated straight into its carry, and
/// the `reduce_sum` over the unit axis of its `[1, 32]` row is no buffer. The planned peak
/// is four `[16, 8, 32]` stacks, one `[8, 32]` carry and the loop counter (its 64-byte
/// slot): 66,624 bytes, where it was 85,312. The values are JAX's (`conformance.rs` checks
/// the twins).
#[test]
fn a_backward_scan_holds_only_its_carries_and_stacks() {
    let case = remat_testkit::reduced_bench_cases()
        .into_iter()
        .find(|(name, _)| name == "scan_long_plain")
        .expect("the reduced scan_long_plain")
        .1;
    let text = case["jaxpr"].as_str().expect("a jaxpr");
    let jaxpr = parse_jaxpr(text, "scan_long_plain").expect("parses");
    let compiled = remat_jit::compile(&jaxpr).expect("compiles");
    let stack = 16 * 8 * 32 * 4;
    assert_eq!(compiled.plan().peak_bytes, 4 * stack + 8 * 32 * 4 + 64);
    let args = remat_testkit::try_arrays(&case, "args").expect("args");
    differential("scan_long_plain", &jaxpr, &args, 1e-4, 1e-5).expect("matches");
}

/// A carry that adds (or takes the maximum of) a reduction of each step's slice has the
/// reduction accumulate into the carry's buffer: column sums split over the threads
/// (`[128, 512]`, kept columns), row maxima (reduced innermost) and row sums of a transposed
/// slice. A reduction another value also reads keeps its buffer (`k`, a `y` too). All agree
/// with the interpreter; the planned peak is the loop counter's slot and `k`'s row sum.
#[test]
fn scan_carries_accumulate_their_reductions_in_place() {
    let body = "{ lambda ; c:f32[512] m:f32[128] r:f32[512] k:f32[128] x:f32[128,512]. let
        s:f32[512] = reduce_sum[axes=(0,) out_sharding=None] x
        c2:f32[512] = add_any c s
        a:f32[128] = reduce_max[axes=(1,) out_sharding=None] x
        m2:f32[128] = max m a
        t:f32[512,128] = transpose[permutation=(1, 0)] x
        u:f32[512] = reduce_sum[axes=(1,) out_sharding=None] t
        r2:f32[512] = add u r
        v:f32[128] = reduce_sum[axes=(1,) out_sharding=None] x
        k2:f32[128] = add k v
      in (c2, m2, r2, k2, v) }";
    let text = format!(
        "{{ lambda ; c:f32[512] m:f32[128] r:f32[512] k:f32[128] xs:f32[5,128,512]. let
    e:f32[512] f:f32[128] g:f32[512] h:f32[128] i:f32[5,128] = scan[jaxpr={body} length=5 num_carry=4 num_consts=0 reverse=False unroll=1] c m r k xs
  in (e, f, g, h, i) }}"
    );
    let jaxpr = parse_jaxpr(&text, "accumulate").expect("parses");
    let compiled = remat_jit::compile(&jaxpr).expect("compiles");
    let mut rng = Rng(12);
    let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
    // Sums of 640 terms of up to 15 in magnitude, grouped differently: 1e-4 absolute.
    differential("accumulate", &jaxpr, &args, 1e-5, 1e-4).expect("matches");
    assert_eq!(compiled.plan().peak_bytes, 64 + 128 * 4);
}

/// Carries updated in place only where that is safe: a carry that reads itself transposed
/// (other points than it writes) goes through a temporary, and a carry computed by a product
/// whose old value a later `y` still reads is not computed in its own buffer. Both agree
/// with the interpreter.
#[test]
fn scan_carries_read_after_their_update_keep_their_old_values() {
    let body = "{ lambda ; w:f32[16,16] c:f32[16,16] d:f32[16,16] x:f32[16,16]. let
        t:f32[16,16] = transpose[permutation=(1, 0)] c
        u:f32[16,16] = add t x
        n:f32[16,16] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] d w
        y:f32[16,16] = mul d 2.0:f32[]
        z:f32[16,16] = add y c
      in (u, n, z) }";
    let text = format!(
        "{{ lambda ; w:f32[16,16] c:f32[16,16] d:f32[16,16] xs:f32[6,16,16]. let
    e:f32[16,16] f:f32[16,16] g:f32[6,16,16] = scan[jaxpr={body} length=6 num_carry=2 num_consts=1 reverse=False unroll=1] w c d xs
  in (e, f, g) }}"
    );
    let jaxpr = parse_jaxpr(&text, "carries").expect("parses");
    let mut rng = Rng(9);
    let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
    differential("carries", &jaxpr, &args, 1e-4, 1e-5).expect("matches");
}

/// A kernel that writes a buffer live at the planned peak, and whose every input its one
/// consumer reads anyway, folds into that consumer even past the 48-node limit (up to
/// twice it): the fold frees the kernel's buffer and extends no lifetime. This is the
/// backward of a gelu layer as `dots_saveable` leaves it (JAX's text, at 64 x 32): `tanh`
/// of the recomputed pre-activation `g` is read only by the 68-node loop that also reads
/// `g`, so it no longer needs a buffer beside `g` and the cotangent. The planned peak is
/// one buffer, where it is two with `fold_at_peak` off (what the memory planner measures);
/// gelu_deep_dots' peak falls by one `f32[256,128]` to XLA's temp bytes.
#[test]
fn a_kernel_at_the_peak_whose_inputs_its_consumer_reads_folds_past_the_node_limit() {
    let text = "{ lambda ; zy:f32[64,32] zz:f32[64,32] b:f32[32,32] c:f32[32] d:f32[64,32]. let
    a:f32[64,32] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] zy b
    e:f32[64,32] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] zz b
    f:f32[1,32] = broadcast_in_dim[broadcast_dimensions=(1,)] c
    g:f32[64,32] = add a f
    h:f32[64,32] = integer_pow[y=3] g
    i:f32[64,32] = integer_pow[y=2] g
    j:f32[64,32] = mul 3.0:f32[] i
    k:f32[64,32] = mul 0.044714998453855515:f32[] h
    l:f32[64,32] = add g k
    m:f32[64,32] = mul 0.7978845834732056:f32[] l
    n:f32[64,32] = tanh m
    o:f32[64,32] = sub 1.0:f32[] n
    p:f32[64,32] = add 1.0:f32[] n
    q:f32[64,32] = mul 0.5:f32[] p
    r:f32[64,32] = mul g e
    s:f32[64,32] = mul e q
    t:f32[64,32] = mul 0.5:f32[] r
    u:f32[64,32] = mul t o
    v:f32[64,32] = mul u n
    w:f32[64,32] = add_any u v
    x:f32[64,32] = mul 0.7978845834732056:f32[] w
    y:f32[64,32] = add_any s x
    z:f32[64,32] = mul 0.044714998453855515:f32[] x
    ba:f32[64,32] = mul z j
    bb:f32[64,32] = add_any y ba
    bc:f32[32] = reduce_sum[axes=(0,) out_sharding=None] bb
    bd:f32[1,32] = reshape[dimensions=None new_sizes=(1, 32) sharding=None] bc
    be:f32[32] = reduce_sum[axes=(0,) out_sharding=None] bd
    bf:f32[32,32] = dot_general[
      dimension_numbers=(([0], [0]), ([], []))
      preferred_element_type=float32
    ] bb d
    bg:f32[32,32] = transpose[permutation=(1, 0)] bf
    bh:f32[64,32] = dot_general[
      dimension_numbers=(([1], [1]), ([], []))
      preferred_element_type=float32
    ] bb b
  in (bg, be, bh) }";
    let jaxpr = parse_jaxpr(text, "gelu_backward").expect("parses");
    let compiled = remat_jit::compile(&jaxpr).expect("compiles");
    assert_eq!(compiled.plan().peak_bytes, 64 * 32 * 4, "one buffer: the tanh is folded");
    let unfolded = remat_jit::Options { fold_at_peak: false, ..remat_jit::Options::default() };
    let plan = remat_jit::memory_plan(&jaxpr, &[], &unfolded).expect("plans");
    assert_eq!(plan.peak_bytes, 2 * 64 * 32 * 4, "two buffers: the tanh has its own");
    let mut rng = Rng(5);
    let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
    differential("gelu backward", &jaxpr, &args, 1e-4, 1e-5).expect("matches");
}

/// Both ways of compiling a `dot_general` (a loop nest for its shape, or the GEMM call)
/// agree with the interpreter on every layout: contracting either axis, batch axes in any
/// position, several contracted axes, vector operands, f32, f64 and i32, and operands that
/// are fused expressions.
#[test]
fn dot_products_as_loops_and_as_gemm_calls_agree_with_the_interpreter() {
    let cases = [
        ("f32[5,4]", "f32[4]", "(([1], [0]), ([], []))", "f32[5]"),
        ("f32[3,7]", "f32[7,6]", "(([1], [0]), ([], []))", "f32[3,6]"),
        ("f32[3,7]", "f32[6,7]", "(([1], [1]), ([], []))", "f32[3,6]"),
        ("f32[7,3]", "f32[7,6]", "(([0], [0]), ([], []))", "f32[3,6]"),
        ("f32[2,3,7]", "f32[2,7,5]", "(([2], [1]), ([0], [0]))", "f32[2,3,5]"),
        ("f32[3,2,7]", "f32[7,5,2]", "(([2], [0]), ([1], [2]))", "f32[2,3,5]"),
        ("f32[3,4,5]", "f32[4,5,6]", "(([1, 2], [0, 1]), ([], []))", "f32[3,6]"),
        ("f32[9]", "f32[9]", "(([0], [0]), ([], []))", "f32[]"),
        ("f64[6,5]", "f64[5,9]", "(([1], [0]), ([], []))", "f64[6,9]"),
        ("i32[6,5]", "i32[5,9]", "(([1], [0]), ([], []))", "i32[6,9]"),
        ("f32[2,4,3,8]", "f32[2,4,8,5]", "(([3], [2]), ([0, 1], [0, 1]))", "f32[2,4,3,5]"),
        // Large enough for both threads, with sizes that are no multiple of any kernel's
        // tile, in each of the three layouts of an MLP's products (remat's own AVX2 GEMM on
        // CPUs without AVX-512, faer's elsewhere), batched too, and one narrow enough that
        // the threads split its rows.
        ("f32[130,257]", "f32[257,129]", "(([1], [0]), ([], []))", "f32[130,129]"),
        ("f32[257,130]", "f32[257,129]", "(([0], [0]), ([], []))", "f32[130,129]"),
        ("f32[130,257]", "f32[129,257]", "(([1], [1]), ([], []))", "f32[130,129]"),
        ("f64[130,257]", "f64[257,129]", "(([1], [0]), ([], []))", "f64[130,129]"),
        ("f32[3,70,97]", "f32[3,97,101]", "(([2], [1]), ([0], [0]))", "f32[3,70,101]"),
        ("f32[2,257,130]", "f32[2,257,129]", "(([1], [1]), ([0], [0]))", "f32[2,130,129]"),
        ("f32[700,300]", "f32[300,21]", "(([1], [0]), ([], []))", "f32[700,21]"),
        // Batched products each too small for both threads whose batch together is not
        // (the attention's scores and their gradients): the batch is split over the
        // threads, evenly (6) and not (5), with the heads inside the rows as in
        // `[b, t, h, d]` queries and keys read in place.
        ("f32[2,3,129,70]", "f32[2,3,129,70]", "(([3], [3]), ([0, 1], [0, 1]))", "f32[2,3,129,129]"),
        ("f32[5,129,70]", "f32[5,70,131]", "(([2], [1]), ([0], [0]))", "f32[5,129,131]"),
        ("f32[2,129,3,70]", "f32[2,129,3,70]", "(([3], [3]), ([0, 2], [0, 2]))", "f32[2,3,129,129]"),
        ("f32[2,3,129,129]", "f32[2,129,3,70]", "(([3], [1]), ([0, 1], [0, 2]))", "f32[2,3,129,70]"),
    ];
    let mut rng = Rng(11);
    let mut failures = Vec::new();
    for (a, b, dn, out) in cases {
        let dtype = &out[..3];
        let text = format!(
            "{{ lambda ; a:{a} b:{b}. let
    c:{a} = mul a a
    d:{out} = dot_general[dimension_numbers={dn} preferred_element_type={}] c b
  in (d,) }}",
            match dtype {
                "f64" => "float64",
                "i32" => "int32",
                _ => "float32",
            }
        );
        let jaxpr = parse_jaxpr(&text, "dot").expect("parses");
        failures.extend(as_loops_and_as_gemm_calls(&text, &jaxpr, &mut rng));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs `jaxpr` on random arguments compiled with every product as a loop and with every
/// product as a GEMM call, and compares both with the interpreter (and each run into
/// garbage-filled outputs with its fresh run); the mismatches.
fn as_loops_and_as_gemm_calls(label: &str, jaxpr: &remat_ir::Jaxpr, rng: &mut Rng) -> Vec<String> {
    let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
    let options: Vec<remat_jit::Options> = [0, usize::MAX]
        .into_iter()
        .map(|small| remat_jit::Options { small_dot_macs: small, ..Default::default() })
        .collect();
    common::differential_with(label, jaxpr, &args, 1e-5, 1e-5, &options).err().into_iter().collect()
}

/// Operands the GEMM reads through views with a zero stride (a broadcast along the rows or
/// along the contracted axis, never materialized) and a product written straight into a
/// transposed destination agree with the interpreter, as loops and as GEMM calls.
#[test]
fn gemm_operands_with_zero_strides_and_transposed_destinations() {
    let text = "{ lambda ; u:f32[64] v:f32[48] w:f32[48,40]. let
    c:f32[64,48] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(64, 48) sharding=None] v
    d:f32[64,40] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] c w
    e:f32[40,64] = transpose[permutation=(1, 0)] d
    f:f32[64,48] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(64, 48) sharding=None] u
    g:f32[64,40] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] f w
    h:f32[40,48] = dot_general[dimension_numbers=(([0], [0]), ([], [])) preferred_element_type=float32] g c
  in (e, g, h) }";
    let jaxpr = parse_jaxpr(text, "views").expect("parses");
    let failures = as_loops_and_as_gemm_calls("views", &jaxpr, &mut Rng(5));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Steps that run the same loop or product over different buffers share one compiled
/// function (every layer of an MLP): a deeper network of identical layers compiles no more
/// functions, and both compute what the interpreter computes.
#[test]
fn identical_layers_share_compiled_functions() {
    let layer = |x: &str, w: &str, b: &str, out: &str, t: &str, u: &str| {
        format!(
            "
    {t}:f32[8,16] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] {x} {w}
    {u}:f32[1,16] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, 16) sharding=None] {b}
    {out}:f32[8,16] = add {t} {u}"
        )
    };
    let one = format!(
        "{{ lambda ; a:f32[8,16] b:f32[16,16] c:f32[16]. let{}
    e:f32[8,16] = tanh d
  in (e,) }}",
        layer("a", "b", "c", "d", "t1", "u1")
    );
    let three = format!(
        "{{ lambda ; a:f32[8,16] b:f32[16,16] c:f32[16]. let{}
    e:f32[8,16] = tanh d{}
    g:f32[8,16] = tanh f{}
    i:f32[8,16] = tanh h
  in (i,) }}",
        layer("a", "b", "c", "d", "t1", "u1"),
        layer("e", "b", "c", "f", "t2", "u2"),
        layer("g", "b", "c", "h", "t3", "u3")
    );
    let mut rng = Rng(5);
    let mut functions = Vec::new();
    for text in [one, three] {
        let jaxpr = parse_jaxpr(&text, "layers").expect("parses");
        let compiled = remat_jit::compile(&jaxpr).expect("compiles");
        functions.push(compiled.plan().functions);
        let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
        differential("layers", &jaxpr, &args, 1e-5, 1e-6).expect("matches");
    }
    // The product, the bias+tanh loop and the entry, however many layers: where a loop
    // writes (an arena buffer or the caller's output) is a base address, not code.
    assert_eq!(functions, [3, 3]);
}

/// Issue 22, reproducer 6: compile time linear in the number of inputs and outputs. No
/// function grows with the program: `n` independent outputs are `n` steps of one shared
/// kernel function, run by one entry part per 256 steps (so `2 + ceil(n / 256)` functions),
/// and the `sin` each output reads twice is folded into its consumer for every one of them
/// (the folding sweeps once, not once per fold). `examples/compile_scaling.rs` times it.
#[test]
fn wide_programs_compile_to_bounded_functions() {
    for n in [300usize, 3000] {
        let inputs: Vec<String> = (0..n).map(|i| format!("x{i}:f32[]")).collect();
        let mut body = String::new();
        for i in 0..n {
            body += &format!("\n    a{i}:f32[] = sin x{i}\n    y{i}:f32[] = mul a{i} a{i}");
        }
        let outs: Vec<String> = (0..n).map(|i| format!("y{i}")).collect();
        let text = format!("{{ lambda ; {}. let{body}\n  in ({},) }}", inputs.join(" "), outs.join(", "));
        let c = remat_jit::compile(&parse_jaxpr(&text, "wide").unwrap()).unwrap();
        assert_eq!(c.plan().functions, 2 + n.div_ceil(256), "n = {n}");
        assert_eq!(c.plan().peak_bytes, 0, "n = {n}: every sin folded, no buffer left");
        let args: Vec<Array> = (0..n).map(|i| Array::F32(ndarray::arr0(i as f32).into_dyn())).collect();
        let got = c.run(&args).unwrap();
        for (i, y) in got.iter().enumerate() {
            let want = (i as f64).sin().powi(2);
            assert!((y.to_f64_vec()[0] - want).abs() <= 1e-6 * want.max(1.0), "output {i}: {y:?}, want {want}");
        }
    }
}

/// Two-thread products that are deep and narrow (64 x 4099 x 64: `k` split over the threads,
/// the partial sums added, into a plain and a transposed destination) or short and wide
/// (32 x 512 x 520: column blocks per thread, the last one partial) agree with the
/// interpreter. Sums over 4099 terms round differently in another order: rel 1e-3.
#[test]
fn deep_and_wide_products_split_over_threads_agree_with_the_interpreter() {
    let text = "{ lambda ; a:f32[4099,64] b:f32[4099,64] c:f32[32,512] d:f32[512,520]. let
    e:f32[64,64] = dot_general[
      dimension_numbers=(([0], [0]), ([], []))
      preferred_element_type=float32
    ] a b
    f:f32[64,64] = dot_general[
      dimension_numbers=(([0], [0]), ([], []))
      preferred_element_type=float32
    ] b a
    g:f32[64,64] = transpose[permutation=(1, 0)] f
    h:f32[32,520] = dot_general[
      dimension_numbers=(([1], [0]), ([], []))
      preferred_element_type=float32
    ] c d
  in (e, g, h) }";
    let jaxpr = parse_jaxpr(text, "split_products").expect("parses");
    let mut rng = Rng(3);
    let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
    differential("split_products", &jaxpr, &args, 1e-3, 1e-3).expect("matches");
}

/// `cheap_derivations.jaxpr`: `0.5 * (1 - tanh a)` (a short arithmetic function of the
/// output `tanh a`) is read by two reductions, and `exp b + 2` by a product and a reduction.
/// Each reader recomputes such a value from the buffer it derives from instead of the
/// program keeping a buffer for it: the first needs no arena memory at all (it derives
/// from an output), the second only `exp b` (`h`, itself read twice), 256 KiB. Kept in
/// buffers of their own (without the rule), the planned peak is 512 KiB. (Its values: the
/// hand-written programs' test.)
#[test]
fn cheap_derivations_are_recomputed_by_their_readers_not_kept() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cheap_derivations.jaxpr");
    let jaxpr = parse_jaxpr(&std::fs::read_to_string(path).expect("readable"), "cheap_derivations").expect("parses");
    let plan = remat_jit::memory_plan(&jaxpr, &[], &remat_jit::Options::default()).expect("plans");
    assert_eq!(plan.peak_bytes, 65536 * 4, "only exp b is kept");
}

/// Float sums round as a tree would, not one addition after another: the loss-shaped sum
/// of 131,072 squares (the benchmark transformer's), the row sums of 256, and a plain sum of
/// values in [-1, 1], each against the same sums in f64. One chain of four lanes put the
/// first 3.4e-6 from f64 and the last 2.1e-6; XLA's CPU code is at 5.1e-8 and 2.1e-8.
#[test]
fn float_sums_stay_close_to_the_exact_sum() {
    let text = "{ lambda ; a:f32[4,128,256]. let
    b:f32[4,128,256] = integer_pow[y=2] a
    c:f32[] = reduce_sum[axes=(0, 1, 2) out_sharding=None] b
    d:f32[4,128] = reduce_sum[axes=(2,) out_sharding=None] b
    e:f32[131072] = reshape[dimensions=None new_sizes=(131072,) sharding=None] a
    f:f32[] = reduce_sum[axes=(0,) out_sharding=None] e
  in (c, d, f) }";
    let jaxpr = parse_jaxpr(text, "sums").expect("parses");
    let compiled = remat_jit::compile(&jaxpr).expect("compiles");
    // Uniform in [-1, 1] from a fixed linear congruential sequence.
    let mut state = 12345u64;
    let x: Vec<f32> = (0..131_072)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f64 / (1u64 << 24) as f64 * 2.0 - 1.0) as f32
        })
        .collect();
    let a = Array::F32(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[4, 128, 256]), x.clone()).expect("shape"));
    let out = compiled.run(&[&a]).expect("runs");
    let value = |a: &Array| a.to_f64_vec();
    let squares: Vec<f64> = x.iter().map(|&v| (v as f64) * (v as f64)).collect();
    let total: f64 = squares.iter().sum();
    let rows: Vec<f64> = squares.chunks(256).map(|r| r.iter().sum()).collect();
    let plain: f64 = x.iter().map(|&v| v as f64).sum();
    let rel = |got: &[f64], want: &[f64]| {
        let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
        got.iter().zip(want).fold(0.0f64, |m, (g, w)| m.max((g - w).abs())) / scale
    };
    let (e_total, e_rows, e_plain) =
        (rel(&value(&out[0]), &[total]), rel(&value(&out[1]), &rows), rel(&value(&out[2]), &[plain]));
    assert!(e_total < 2e-7, "sum of squares: {e_total:.2e} from f64");
    assert!(e_rows < 4e-7, "row sums: {e_rows:.2e} from f64");
    eprintln!("from f64: sum of squares {e_total:.2e}, row sums {e_rows:.2e}, plain sum {e_plain:.2e} (sum {plain})");
    assert!(e_plain < 5e-7, "plain sum: {e_plain:.2e} from f64");
}
