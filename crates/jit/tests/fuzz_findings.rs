//! The programs exploration with random programs (`REMAT_RANDOM_SEED=random` in
//! `tests/random_programs.rs`) found disagreeing or corrupting memory, as data, each with
//! the bug it found. Every one also runs into outputs that sit at the start of larger
//! allocations whose tail holds garbage (`common::differential_by`), so that a write past an
//! output fails here, at once, instead of corrupting the heap for the allocator to notice
//! later; and every one agrees with the interpreter bit for bit.

mod common;

use common::{check_bits, differential_by};
use ndarray::{ArrayD, IxDyn};
use remat_ir::{parse_jaxpr, Array, DType, Jaxpr};
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

/// Found by the program fuzzer as seeds 6140793772455415424 (`pow` of a negative base and
/// `-1.5`), 952015622130954465 and 12524237689543571803 (`log` of a negative number),
/// 5436307873073589089, 11609577827510356883 and 8316581480312483824 (`pow` of a NaN made
/// by `bitcast_convert_type`, or of a negative base): the NaN's bits, visible through
/// `bitcast_convert_type`, differed. The JIT's inline `log` and `pow` materialised the
/// positive NaN `0x7FC00000` where glibc (the interpreter) and XLA on x86 CPU give the
/// default NaN `0xFFC00000` for an invalid operation and return a NaN operand itself. The
/// programs as found, on inputs that reach those NaNs.
#[test]
fn nan_bits_through_bitcast_are_the_interpreters() {
    let programs = [
        "{ lambda ; a:f32[5] b:bf16[] c:i32[] d:bool[0]. let
    e:f32[5] = clamp -0.5:f32[] a 0.75:f32[]
    f:f32[5] = pow e -1.5:f32[]
    g:f32[0] = slice[limit_indices=(5,) start_indices=(5,) strides=(2,)] a
    _:f32[0] _:bool[0] = sort[dimension=0 is_stable=True num_keys=1] g d
    h:i32[5] = bitcast_convert_type[new_dtype=int32] f
    i:f32[5] = integer_pow[y=9] a
  in (h, i) }",
        "{ lambda ; a:f32[3] b:u8[]. let
    c:f32<host>[3] = device_put[
      copy_semantics=(ArrayCopySemantics.ALWAYS_COPY,)
      devices=(MemorySpace.Host,)
      srcs=(None,)
    ] a
    d:f32[3] = device_put[
      copy_semantics=(ArrayCopySemantics.ALWAYS_COPY,)
      devices=(MemorySpace.Device,)
      srcs=(None,)
    ] c
    e:f32[3] = name[name=n] a
    f:bool[3] = lt e d
    g:f32[3] = log e
    h:f32[3] = rev[dimensions=(0,)] d
    _:bool[0] = slice[limit_indices=(1,) start_indices=(1,) strides=None] f
    i:i32[3] = bitcast_convert_type[new_dtype=int32] g
    j:f32[3] = select_n f g h
  in (i, j) }",
        "{ lambda ; a:i64[] b:f64[2] c:u8[3] d:i32[]. let
    _:u8[2] = convert_element_type[new_dtype=uint8 weak_type=False] b
    e:f32[] = bitcast_convert_type[new_dtype=float32] d
    f:f32[] = pow e e
    g:i32[] = bitcast_convert_type[new_dtype=int32] f
  in (d, e, f, g) }",
        "{ lambda ; a:f32[] b:u32[6] c:key<fry>[3] d:i32[]. let
    _:i32[] = rem d d
    e:f32[] = log a
    f:i32[] = bitcast_convert_type[new_dtype=int32] e
    g:u32[11] = reduce_window_sum[
      base_dilation=(2,)
      padding=((0, 1),)
      window_dilation=(1,)
      window_strides=(1,)
      window_dimensions=(2,)
    ] b
    h:i32[5] = broadcast_in_dim[broadcast_dimensions=() shape=(5,) sharding=None] d
  in (f, g, h) }",
        "{ lambda ; a:f64[0,5] b:bf16[0,3] c:i32[]. let
    d:f32[] = bitcast_convert_type[new_dtype=float32] c
    e:i32[] = add_any 255:i32[] c
    f:f32[] = pow d 1000000.0:f32[]
    g:i32[] = bitcast_convert_type[new_dtype=int32] f
  in (a, e, f, g) }",
        "{ lambda ; a:f32[5,4] b:i8[7,5,1] c:key<fry>[7,3,5] d:u32[]. let
    e:f32[5,4] = pow a a
    _:f32[5,4] = remat2[
      differentiated=True
      jaxpr={ lambda ; f:f32[5,4] g:f32[5,4]. let h:f32[5,4] = pow f g in (h,) }
      policy=None
      prevent_cse=True
    ] a a
    i:f32[5,4] = select_n True:bool[] e e
    j:i32[5,4] = bitcast_convert_type[new_dtype=int32] e
  in (d, i, j) }",
    ];
    for (k, text) in programs.into_iter().enumerate() {
        let jaxpr = parse_jaxpr(text, "finding").expect("parses");
        let args = nan_making_args(&jaxpr);
        check(&format!("program {k}"), &jaxpr, &args).unwrap_or_else(|e| panic!("{e}"));
    }
}

fn f32s(xs: &[f32]) -> Array {
    Array::F32(ArrayD::from_shape_vec(IxDyn(&[xs.len()]), xs.to_vec()).expect("a vector"))
}

fn f32_scalar(x: f32) -> Array {
    Array::F32(ndarray::arr0(x).into_dyn())
}

/// Arguments that reach NaNs: floats cycling through negative numbers and NaNs of both
/// signs and odd payloads, integers through the bit patterns of such NaNs; the rest random.
fn nan_making_args(jaxpr: &Jaxpr) -> Vec<Array> {
    const F: [u32; 6] = [0xBF80_0000, 0xFFFF_FFFE, 0xC020_0000, 0x7FC0_0001, 0x3F00_0000, 0xFFC0_0000];
    let mut rng = Rng(5);
    jaxpr
        .in_avals()
        .iter()
        .map(|a| {
            let shape = IxDyn(&a.shape);
            let mut i = 0;
            let mut next = || {
                i += 1;
                F[i % F.len()]
            };
            match a.dtype {
                DType::F32 => Array::F32(ArrayD::from_shape_fn(shape, |_| f32::from_bits(next()))),
                DType::I32 => Array::I32(ArrayD::from_shape_fn(shape, |_| next() as i32)),
                _ => rng.array(a),
            }
        })
        .collect()
}

/// `pow` on a grid of special operands, as scalars and as vectors (the JIT's f32x4 path):
/// the JIT and the interpreter both give XLA's bits (XLA on x86 CPU calls glibc's `powf`),
/// NaN payloads and signs included: a NaN base comes back quieted (its sign flipped for
/// an odd integer exponent), then a NaN exponent; `pow(x, 0)` and `pow(1, y)` are 1 but
/// for a signaling NaN; a negative base with a non-integer exponent is `0xFFC00000`.
#[test]
fn pow_gives_xlas_nan_bits() {
    let (nx, ny) = (POW_X.len(), POW_Y.len());
    let xs: Vec<f32> = POW_X.iter().flat_map(|&x| std::iter::repeat_n(f32::from_bits(x), ny)).collect();
    let ys: Vec<f32> = (0..nx).flat_map(|_| POW_Y.iter().map(|&y| f32::from_bits(y))).collect();
    let want: Vec<u32> = POW_XLA.iter().flatten().copied().collect();
    let vector = parse_jaxpr(
        &format!(
            "{{ lambda ; a:f32[{n}] b:f32[{n}]. let
    c:f32[{n}] = pow a b
    d:u32[{n}] = bitcast_convert_type[new_dtype=uint32] c
  in (d,) }}",
            n = nx * ny
        ),
        "grid",
    )
    .expect("parses");
    let args = [f32s(&xs), f32s(&ys)];
    check("pow grid", &vector, &args).unwrap_or_else(|e| panic!("{e}"));
    let interp = remat_interp::eval_jaxpr(&vector, &[], &args).expect("runs");
    let got: Vec<u32> = interp[0].to_f64_vec().iter().map(|&b| b as u32).collect();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "pow({:#x}, {:#x}): interpreter {g:#x}, XLA {w:#x}", POW_X[i / ny], POW_Y[i % ny]);
    }
    let scalar = parse_jaxpr(
        "{ lambda ; a:f32[] b:f32[]. let
    c:f32[] = pow a b
    d:u32[] = bitcast_convert_type[new_dtype=uint32] c
  in (d,) }",
        "grid",
    )
    .expect("parses");
    for (i, w) in want.iter().enumerate() {
        let args = [f32_scalar(xs[i]), f32_scalar(ys[i])];
        check(&format!("pow({:#x}, {:#x})", POW_X[i / ny], POW_Y[i % ny]), &scalar, &args)
            .unwrap_or_else(|e| panic!("{e}, XLA gives {w:#x}"));
    }
}

/// `log` and `log1p` of negative numbers, zeros, infinities and NaNs of both signs: the
/// JIT's bits are the interpreter's (glibc's: the default NaN `0xFFC00000` for a negative
/// argument, a NaN argument itself). XLA's vectorised `log` gives `0xFFFFFFFF` for both
/// instead, and its scalar `log` `0xFFC00000`: its bits depend on its vectorisation, so
/// they are no oracle here.
#[test]
fn log_nan_bits_are_the_interpreters() {
    let xs: Vec<f32> = [
        0xBF80_0000u32,
        0xC000_0000,
        0xFF80_0000,
        0x8000_0000,
        0x0000_0000,
        0x7FC0_0000,
        0xFFC0_0000,
        0xFFFF_FFFD,
        0x7F80_0001,
        0x3F80_0000,
        0x7F80_0000,
        0xBF40_0000,
    ]
    .into_iter()
    .map(f32::from_bits)
    .collect();
    for op in ["log", "log1p"] {
        let vector = parse_jaxpr(
            &format!(
                "{{ lambda ; a:f32[12]. let b:f32[12] = {op} a\n    c:u32[12] = bitcast_convert_type[new_dtype=uint32] b in (c,) }}"
            ),
            "log",
        )
        .expect("parses");
        check(op, &vector, &[f32s(&xs)]).unwrap_or_else(|e| panic!("{e}"));
        let scalar = parse_jaxpr(
            &format!("{{ lambda ; a:f32[]. let b:f32[] = {op} a\n    c:u32[] = bitcast_convert_type[new_dtype=uint32] b in (c,) }}"),
            "log",
        )
        .expect("parses");
        for &x in &xs {
            check(&format!("{op}({:#x})", x.to_bits()), &scalar, &[f32_scalar(x)]).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let interp = remat_interp::eval_jaxpr(
        &parse_jaxpr("{ lambda ; a:f32[2]. let b:f32[2] = log a\n    c:u32[2] = bitcast_convert_type[new_dtype=uint32] b in (c,) }", "log")
            .expect("parses"),
        &[],
        &[f32s(&[-1.0, -2.0])],
    )
    .expect("runs");
    assert_eq!(interp[0].to_f64_vec(), vec![f64::from(0xFFC0_0000u32); 2], "log of a negative number: the default NaN");
}

const POW_X: [u32; 15] = [
    0xC0000000, 0xBF800000, 0xBF000000, 0x80000000, 0x00000000, 0x3F000000, 0x3F800000, 0x40000000, 0x7F800000,
    0xFF800000, 0x7FC00000, 0xFFC00000, 0xFFFFFFFD, 0x7F800001, 0xFF800005,
];
const POW_Y: [u32; 14] = [
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x40400000, 0x40000000, 0x3F000000, 0xBFC00000, 0x49742400,
    0x7F800000, 0xFF800000, 0xFFFFFFFD, 0x7FC00001, 0x7F800002,
];
const POW_XLA: [[u32; 14]; 15] = [
    [
        0x3F800000, 0x3F800000, 0xC0000000, 0xBF000000, 0xC1000000, 0x40800000, 0xFFC00000, 0xFFC00000, 0x7F800000,
        0x7F800000, 0x00000000, 0xFFFFFFFD, 0x7FC00001, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0xBF800000, 0xBF800000, 0xBF800000, 0x3F800000, 0xFFC00000, 0xFFC00000, 0x3F800000,
        0x3F800000, 0x3F800000, 0xFFFFFFFD, 0x7FC00001, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0xBF000000, 0xC0000000, 0xBE000000, 0x3E800000, 0xFFC00000, 0xFFC00000, 0x00000000,
        0x00000000, 0x7F800000, 0xFFFFFFFD, 0x7FC00001, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0x80000000, 0xFF800000, 0x80000000, 0x00000000, 0x00000000, 0x7F800000, 0x00000000,
        0x00000000, 0x7F800000, 0xFFFFFFFD, 0x7FC00001, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0x00000000, 0x7F800000, 0x00000000, 0x00000000, 0x00000000, 0x7F800000, 0x00000000,
        0x00000000, 0x7F800000, 0xFFFFFFFD, 0x7FC00001, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0x3F000000, 0x40000000, 0x3E000000, 0x3E800000, 0x3F3504F3, 0x403504F3, 0x00000000,
        0x00000000, 0x7F800000, 0xFFFFFFFD, 0x7FC00001, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000,
        0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0x40000000, 0x3F000000, 0x41000000, 0x40800000, 0x3FB504F3, 0x3EB504F3, 0x7F800000,
        0x7F800000, 0x00000000, 0xFFFFFFFD, 0x7FC00001, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0x7F800000, 0x00000000, 0x7F800000, 0x7F800000, 0x7F800000, 0x00000000, 0x7F800000,
        0x7F800000, 0x00000000, 0xFFFFFFFD, 0x7FC00001, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0xFF800000, 0x80000000, 0xFF800000, 0x7F800000, 0x7F800000, 0x00000000, 0x7F800000,
        0x7F800000, 0x00000000, 0xFFFFFFFD, 0x7FC00001, 0x7FC00002,
    ],
    [
        0x3F800000, 0x3F800000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000,
        0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000,
    ],
    [
        0x3F800000, 0x3F800000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0xFFC00000, 0xFFC00000, 0xFFC00000, 0xFFC00000,
        0xFFC00000, 0xFFC00000, 0xFFC00000, 0xFFC00000, 0xFFC00000,
    ],
    [
        0x3F800000, 0x3F800000, 0x7FFFFFFD, 0x7FFFFFFD, 0x7FFFFFFD, 0xFFFFFFFD, 0xFFFFFFFD, 0xFFFFFFFD, 0xFFFFFFFD,
        0xFFFFFFFD, 0xFFFFFFFD, 0xFFFFFFFD, 0xFFFFFFFD, 0xFFFFFFFD,
    ],
    [
        0x7FC00001, 0x7FC00001, 0x7FC00001, 0x7FC00001, 0x7FC00001, 0x7FC00001, 0x7FC00001, 0x7FC00001, 0x7FC00001,
        0x7FC00001, 0x7FC00001, 0x7FC00001, 0x7FC00001, 0x7FC00001,
    ],
    [
        0xFFC00005, 0xFFC00005, 0x7FC00005, 0x7FC00005, 0x7FC00005, 0xFFC00005, 0xFFC00005, 0xFFC00005, 0xFFC00005,
        0xFFC00005, 0xFFC00005, 0xFFC00005, 0xFFC00005, 0xFFC00005,
    ],
];

/// Found by the program fuzzer's value-and-grad programs (issue 40; first as seed
/// 2213914867404379067 of run 1, then in 351 of its 19,848 programs): `value_and_grad`
/// of a program taking a PRNG key beside its floats (dropout's key, a sampler's) panicked
/// ("no literal of dtype key<fry>"), because the vjp gives every input a gradient and made
/// the key's as a zero literal, which keys do not have. The zero gradient of a key input is
/// now the key of zero words (JAX's is a `float0` array; remat's gradients of non-float
/// inputs are zeros of their own dtype, as for integers). Both ways the fuzzer
/// differentiates: the value and the gradient of the float input, and the whole vjp
/// program, whose key gradient is that zero key.
#[test]
fn a_program_taking_a_key_has_a_value_and_grad() {
    let f = parse_jaxpr(
        "{ lambda ; a:f32[] k:key<fry>[] n:i32[]. let
    b:f32[] = mul a a
    u:u32[] = random_bits[bit_width=32 shape=()] k
    v:f32[] = convert_element_type[new_dtype=float32 weak_type=False] u
    c:f32[] = mul b v
  in (c,) }",
        "finding",
    )
    .expect("parses");
    let value_and_grad = remat_ad::value_and_grad(&f, &[0]).expect("differentiates");
    check("value_and_grad", &value_and_grad, &args_of(&value_and_grad, 3)).unwrap_or_else(|e| panic!("{e}"));
    let whole = remat_ad::vjp_program(&f, &[]).expect("differentiates").jaxpr;
    let key_grad = whole.atom_aval(&whole.outvars[2]);
    assert_eq!(key_grad, remat_ir::Aval::scalar(DType::Key), "{}", remat_ir::pp_jaxpr(&whole));
    check("vjp_program", &whole, &args_of(&whole, 3)).unwrap_or_else(|e| panic!("{e}"));
}
