//! The PRNG primitives against JAX 0.10.2 (threefry2x32, `jax_threefry_partitionable=True`,
//! its default), bit for bit: every expected value below was printed by JAX on keys given
//! as raw `u32[2]` data (`jax.random.wrap_key_data`), as the model zoo passes them.

use ndarray::{ArrayD, IxDyn};
use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, verify, Array, PrngKey};

fn u32s(shape: &[usize], data: &[u32]) -> Array {
    Array::U32(ArrayD::from_shape_vec(IxDyn(shape), data.to_vec()).expect("element count matches shape"))
}

/// Parses and verifies `text`, then evaluates it on `args`.
fn run(text: &str, args: &[Array]) -> Vec<Array> {
    let jaxpr = parse_jaxpr(text, "random.jaxpr").unwrap_or_else(|e| panic!("parse error: {e}\n{text}"));
    verify(&jaxpr).unwrap_or_else(|e| panic!("verify error: {e}\n{text}"));
    eval_jaxpr(&jaxpr, &[], args).unwrap_or_else(|e| panic!("evaluation error: {e}\n{text}"))
}

fn run1(text: &str, args: &[Array]) -> Array {
    let mut outs = run(text, args);
    assert_eq!(outs.len(), 1);
    outs.remove(0)
}

/// A program of one raw key `a:u32[2]`: `random_wrap`, then `body` (which reads `b`, the
/// key, and binds `out`), returning `out`.
fn on_key(out: &str, body: &str) -> String {
    format!("{{ lambda ; a:u32[2]. let b:key<fry>[] = random_wrap[impl=fry] a; {body} in ({out},) }}")
}

const KEYS: [[u32; 2]; 3] = [[0, 0], [0, 42], [123456789, 4000000000]];

#[test]
fn threefry_known_answer() {
    // Random123's threefry2x32-20 known answer for key (0, 0) and counter (0, 0), which is
    // also JAX's `split(PRNGKey(0))[0]`.
    let key = u32s(&[2], &[0, 0]);
    let text = on_key("d", "c:key<fry>[2] = random_split[shape=(2,)] b; d:u32[2,2] = random_unwrap c");
    let out = run1(&text, &[key]);
    assert_eq!(out.to_f64_vec()[..2], [1797259609.0, 2579123966.0]);
}

#[test]
fn split_into_a_shape() {
    let want: [[u32; 12]; 3] = [
        [
            1797259609, 2579123966, 928981903, 3453687069, 4146024105, 2718843009, 2467461003, 3840466878, 2285895361,
            433833334, 1524306142, 1887795613,
        ],
        [
            1832780943, 270669613, 64467757, 2916123636, 2465931498, 255383827, 3134548294, 894150801, 2954079971,
            3276725750, 2765691542, 824333390,
        ],
        [
            1179309378, 3376224534, 2674402163, 1010311178, 806186258, 3247382529, 1190450480, 1590699983, 4164034002,
            954206025, 2902276804, 3001488645,
        ],
    ];
    let text = on_key("d", "c:key<fry>[3,2] = random_split[shape=(3, 2)] b; d:u32[3,2,2] = random_unwrap c");
    for (key, want) in KEYS.iter().zip(want) {
        assert_eq!(run1(&text, &[u32s(&[2], key)]), u32s(&[3, 2, 2], &want), "key {key:?}");
    }
}

#[test]
fn bits_of_32_and_8_bits() {
    let want32: [[u32; 6]; 3] = [
        [4070199207, 4202968722, 1427181096, 2012915765, 2447653815, 710830403],
        [2098992034, 2919706841, 2646866425, 2409546199, 1935504149, 2516274904],
        [2406992980, 2739929977, 4051848467, 405074687, 3234994843, 505032641],
    ];
    let want8: [[u8; 5]; 3] = [[167, 146, 40, 53, 183], [162, 217, 249, 215, 21], [84, 121, 19, 255, 155]];
    let bits32 = on_key("c", "c:u32[2,3] = random_bits[bit_width=32 shape=(2, 3)] b");
    let bits8 = on_key("c", "c:u8[5] = random_bits[bit_width=8 shape=(5,)] b");
    for ((key, w32), w8) in KEYS.iter().zip(want32).zip(want8) {
        assert_eq!(run1(&bits32, &[u32s(&[2], key)]), u32s(&[2, 3], &w32), "key {key:?}");
        let want8 = Array::U8(ArrayD::from_shape_vec(IxDyn(&[5]), w8.to_vec()).unwrap());
        assert_eq!(run1(&bits8, &[u32s(&[2], key)]), want8, "key {key:?}");
    }
}

#[test]
fn fold_in_hashes_the_message_as_a_u32() {
    let want7 = [[2716826189, 292468403], [2547012911, 1371500959], [2406734841, 1876451422]];
    let want_minus_1 = [[743310391, 3789761811], [2398536845, 3890976714], [1814678904, 3427414420]];
    let fold7 = on_key("d", "c:key<fry>[] = random_fold_in b 7:u32[]; d:u32[2] = random_unwrap c");
    // An i32 message of -1 is the u32 4294967295.
    let fold_minus_1 = on_key("d", "c:key<fry>[] = random_fold_in b -1:i32[]; d:u32[2] = random_unwrap c");
    for ((key, w7), wm1) in KEYS.iter().zip(want7).zip(want_minus_1) {
        assert_eq!(run1(&fold7, &[u32s(&[2], key)]), u32s(&[2], &w7), "key {key:?}");
        assert_eq!(run1(&fold_minus_1, &[u32s(&[2], key)]), u32s(&[2], &wm1), "key {key:?}");
    }
}

/// A key array applies each primitive per key: the key dimensions lead.
#[test]
fn batches_of_keys() {
    let keys = u32s(&[2, 2], &[0, 0, 0, 42]);
    let wrap = "b:key<fry>[2] = random_wrap[impl=fry] a";
    let bits =
        format!("{{ lambda ; a:u32[2,2]. let {wrap}; c:u32[2,3] = random_bits[bit_width=32 shape=(3,)] b in (c,) }}");
    let want = [4070199207, 4202968722, 1427181096, 2098992034, 2919706841, 2646866425];
    assert_eq!(run1(&bits, std::slice::from_ref(&keys)), u32s(&[2, 3], &want));

    let split = format!(
        "{{ lambda ; a:u32[2,2]. let {wrap}; c:key<fry>[2,2] = random_split[shape=(2,)] b; d:u32[2,2,2] = random_unwrap c in (d,) }}"
    );
    let want = [1797259609, 2579123966, 928981903, 3453687069, 1832780943, 270669613, 64467757, 2916123636];
    assert_eq!(run1(&split, std::slice::from_ref(&keys)), u32s(&[2, 2, 2], &want));

    // One message per key, and one key against two messages (broadcasting).
    let fold = format!(
        "{{ lambda ; a:u32[2,2] m:u32[2]. let {wrap}; c:key<fry>[2] = random_fold_in b m; d:u32[2,2] = random_unwrap c in (d,) }}"
    );
    let want = [2467461003, 3840466878, 2765691542, 824333390];
    assert_eq!(run1(&fold, &[keys, u32s(&[2], &[3, 5])]), u32s(&[2, 2], &want));
    let one_key = on_key("d", "c:key<fry>[2] = random_fold_in b m; d:u32[2,2] = random_unwrap c")
        .replace("a:u32[2].", "a:u32[2] m:u32[2].");
    let want = [2467461003, 3840466878, 1524306142, 1887795613];
    assert_eq!(run1(&one_key, &[u32s(&[2], &[0, 0]), u32s(&[2], &[3, 5])]), u32s(&[2, 2], &want));
}

#[test]
fn seeds_of_32_bits_or_fewer_give_zero_high_words() {
    let text = "{ lambda ; a:i32[2,3]. let b:key<fry>[2,3] = random_seed[impl=fry] a; c:u32[2,3,2] = random_unwrap b in (c,) }";
    let seeds = Array::I32(ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1, -2, 3, i32::MAX, i32::MIN, 0]).unwrap());
    let want = [0, 1, 0, 4294967294, 0, 3, 0, 2147483647, 0, 2147483648, 0, 0];
    assert_eq!(run1(text, &[seeds]), u32s(&[2, 3, 2], &want));
    let i8_seed = "{ lambda ; a:i8[]. let b:key<fry>[] = random_seed[impl=fry] a; c:u32[2] = random_unwrap b in (c,) }";
    assert_eq!(run1(i8_seed, &[Array::I8(ArrayD::from_elem(IxDyn(&[]), -3))]), u32s(&[2], &[0, 4294967293]));
}

#[test]
fn wrap_and_unwrap_are_inverse_and_keys_move_through_layout_ops() {
    let text = "{ lambda ; a:u32[2,3,2]. let
        b:key<fry>[2,3] = random_wrap[impl=fry] a
        c:key<fry>[3,2] = transpose[permutation=(1, 0)] b
        d:key<fry>[1,2] = slice[limit_indices=(2, 2) start_indices=(1, 0) strides=None] c
        e:key<fry>[2] = squeeze[dimensions=(0,)] d
        f:key<fry>[2,2] = broadcast_in_dim[broadcast_dimensions=(1,)] e
        g:key<fry>[4] = reshape[dimensions=None new_sizes=(4,) sharding=None] f
        h:key<fry>[6] = concatenate[dimension=0] g e
        i:u32[6,2] = random_unwrap h
      in (i,) }";
    let data: Vec<u32> = (0..12).collect();
    let out = run1(text, &[u32s(&[2, 3, 2], &data)]);
    // b[i][j] = (2(3i + j), 2(3i + j) + 1); c[1] = (b[0][1], b[1][1]) = keys 1 and 4.
    let want = [2, 3, 8, 9, 2, 3, 8, 9, 2, 3, 8, 9];
    assert_eq!(out, u32s(&[6, 2], &want));
    let keys = Array::Key(ArrayD::from_shape_vec(IxDyn(&[1]), vec![PrngKey([7, 9])]).unwrap());
    assert_eq!(keys.to_f64_vec(), [7.0, 9.0]);
}

/// The dropout of the model zoo's `dropout_mlp`: a raw key split in two through
/// `random_unwrap`, `slice` and `squeeze`, then 32-bit bits from each half, as
/// `jax.jit(lambda raw: [jax.random.bits(k, (4, 16)) for k in jax.random.split(raw)])`
/// prints it. The `_uniform` sampler turns exactly these bits into floats.
#[test]
fn dropout_bits_match_jax() {
    let text = "{ lambda ; a:u32[2]. let
        b:key<fry>[] = random_wrap[impl=fry] a
        c:key<fry>[2] = random_split[shape=(2,)] b
        d:u32[2,2] = random_unwrap c
        e:u32[1,2] = slice[limit_indices=(1, 2) start_indices=(0, 0) strides=(1, 1)] d
        f:u32[2] = squeeze[dimensions=(0,)] e
        g:u32[1,2] = slice[limit_indices=(2, 2) start_indices=(1, 0) strides=(1, 1)] d
        h:u32[2] = squeeze[dimensions=(0,)] g
        i:key<fry>[] = random_wrap[impl=fry] f
        j:u32[4,16] = random_bits[bit_width=32 shape=(4, 16)] i
        k:key<fry>[] = random_wrap[impl=fry] h
        l:u32[4,16] = random_bits[bit_width=32 shape=(4, 16)] k
      in (j, l) }";
    let want_j = [
        2277453133, 1345880512, 3872043189, 2999317162, 2654571928, 2670834431, 3082699169, 900655211, 100451196,
        3172953514, 2517460570, 2151723416, 4088812187, 2493165615, 2110849038, 1057023421, 2180421799, 2926548743,
        859974928, 3634858851, 76670590, 2863719781, 1051672037, 3696190877, 2481936614, 3446945018, 4146592489,
        3274023810, 3887125962, 244416668, 2149981473, 1707812221, 3571572623, 2853247548, 1105129543, 3534264051,
        1604963066, 1398943516, 378449225, 2925299798, 2653967877, 559583884, 1986919694, 4228304534, 2653924480,
        2142377166, 1681877555, 1335908780, 2388924594, 2672824473, 2180451307, 4191383567, 1717540959, 4145629485,
        3467357572, 3255754624, 1927796992, 2152358794, 2143233419, 1277978058, 4081926345, 4203693568, 2141422880,
        992943442,
    ];
    let want_l = [
        3125294276, 3383865362, 780371127, 1127988417, 475579021, 870292843, 1364461953, 453421351, 1846147078,
        2063258882, 1461371432, 1490040818, 3887709593, 2513986011, 2833391564, 1658201874, 718247499, 2892157826,
        1416538947, 758964743, 1687653942, 3230540427, 1347709196, 2981936835, 1903455340, 2289788433, 3305790448,
        3843449371, 3391584540, 573107511, 1066014981, 252191396, 1634575829, 2805458990, 814206003, 30148628,
        3540325166, 744175538, 2924883793, 1223768045, 2086352647, 3194648132, 1070108311, 1766334845, 697768825,
        79499456, 4150799676, 2780961444, 3484816163, 1669944845, 1678243476, 3770556123, 2515846098, 1499963763,
        1392404472, 3749011895, 1224706059, 3343234386, 722208603, 2191371193, 2732931865, 762806022, 2627995424,
        355692168,
    ];
    let out = run(text, &[u32s(&[2], &[0, 42])]);
    assert_eq!(out, [u32s(&[4, 16], &want_j), u32s(&[4, 16], &want_l)]);
}

/// Unverified programs reach the interpreter's own checks: errors, never panics.
#[test]
fn bad_operands_are_errors() {
    use remat_interp::eval_primitive;
    use remat_ir::{Aval, DType, Primitive};
    let key = Array::Key(ArrayD::from_elem(IxDyn(&[]), PrngKey([0, 0])));
    let err = |prim: Primitive, args: &[Array], out: Aval| eval_primitive(&prim, args, &[out]).unwrap_err().to_string();
    let bits16 = Primitive::RandomBits { bit_width: 16, shape: vec![2] };
    assert!(err(bits16, std::slice::from_ref(&key), Aval::new(DType::U32, vec![2])).contains("u16"));
    let wrap_err = err(Primitive::RandomWrap, &[u32s(&[3], &[1, 2, 3])], Aval::scalar(DType::Key));
    assert!(wrap_err.contains("last dimension of size 2"), "{wrap_err}");
    let unwrap_err = err(Primitive::RandomUnwrap, &[u32s(&[2], &[1, 2])], Aval::new(DType::U32, vec![2, 2]));
    assert!(unwrap_err.contains("expected a key<fry> operand"), "{unwrap_err}");
    let seed_err = err(Primitive::RandomSeed, std::slice::from_ref(&key), Aval::scalar(DType::Key));
    assert!(seed_err.contains("seeds must be integers"), "{seed_err}");
    // A result of the wrong declared type is reported, as for every primitive.
    let split = Primitive::RandomSplit { shape: vec![2] };
    assert!(err(split, &[key], Aval::new(DType::Key, vec![3])).contains("but the equation declares"));
}

/// `rng_bit_generator` against JAX 0.10.2 on CPU (`tests/data/rng_bit_generator`): every
/// algorithm, shape and unsigned dtype JAX makes, through `remat_math`'s bit generators (whose
/// 16- and 64-bit bits remat has no dtype for) and, for `uint8` and `uint32`, through the
/// interpreter's primitive; the new key and the bits bit for bit.
#[test]
fn rng_bit_generator_matches_jax() {
    let path = remat_testkit::data_dir().join("rng_bit_generator/jax_values.json");
    let cases = remat_testkit::read_json(&path);
    let cases = cases.as_array().expect("a list of cases");
    assert_eq!(cases.len(), 96);
    let words = |v: &serde_json::Value| -> Vec<u64> {
        v.as_array().expect("a list").iter().map(|x| x.as_u64().expect("an unsigned integer")).collect()
    };
    for case in cases {
        let algorithm = case["algorithm"].as_str().unwrap();
        let alg = remat_ir::RngAlgorithm::from_name(algorithm).unwrap();
        let dtype = case["dtype"].as_str().unwrap();
        let shape: Vec<usize> = words(&case["shape"]).iter().map(|&d| d as usize).collect();
        let key: Vec<u32> = words(&case["key"]).iter().map(|&w| w as u32).collect();
        let new_key: Vec<u32> = words(&case["new_key"]).iter().map(|&w| w as u32).collect();
        let bits = words(&case["bits"]);
        let width: u32 = dtype.trim_start_matches("uint").parse().unwrap();
        let what = format!("{algorithm} {dtype} {shape:?}");
        let (k, b) = remat_math::rng_bit_generator_key(alg, key.clone().try_into().unwrap(), &shape, width);
        assert_eq!(k.to_vec(), new_key, "{what}: new key");
        assert_eq!(b, bits, "{what}: bits");
        let short = match dtype {
            "uint8" => "u8",
            "uint32" => "u32",
            _ => continue,
        };
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let (aval_dims, tuple) = match dims.len() {
            1 => (dims[0].clone(), format!("({},)", dims[0])),
            _ => (dims.join(","), format!("({})", dims.join(", "))),
        };
        let text = format!(
            "{{ lambda ; a:u32[4]. let\n    b:u32[4] c:{short}[{aval_dims}] = rng_bit_generator[\n      algorithm={algorithm}\n      dtype={dtype}\n      out_sharding=None\n      shape={tuple}\n    ] a\n  in (b, c) }}"
        );
        let outs = run(&text, &[u32s(&[4], &key)]);
        assert_eq!(outs[0].to_f64_vec(), new_key.iter().map(|&w| f64::from(w)).collect::<Vec<_>>(), "{what}");
        assert_eq!(outs[1].to_f64_vec(), bits.iter().map(|&w| w as f64).collect::<Vec<_>>(), "{what}");
    }
}
