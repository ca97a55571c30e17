//! Gradients in the structure of the arguments (`Grad::call_tree`, `VjpFn::call`): tuples,
//! `Vec`s, `BTreeMap`s of named parameters and `pytree!` structs, nested; and a
//! `Checkpoint` or `Jit` passed to `grad`, `jit` and `scan` itself.

use std::collections::BTreeMap;

use remat::{checkpoint, named, pytree, Array, Aval, Backend, DType, Policy, Tensor};

pytree! {
    /// One dense layer.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Layer<T> {
        pub w: T,
        pub b: T,
    }
}

pytree! {
    /// A perceptron: an input scale and a stack of layers.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Mlp<T> {
        scale: T,
        layers: Vec<Layer<T>>,
    }
}

fn array(shape: &[usize], offset: f32) -> Array {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| ((i as f32 * 0.37 + offset).sin()) * 0.5).collect();
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).unwrap())
}

fn params() -> Mlp<Array> {
    Mlp {
        scale: array(&[4], 0.1),
        layers: vec![
            Layer { w: array(&[5, 4], 0.2), b: array(&[5], 0.3) },
            Layer { w: array(&[2, 5], 0.4), b: array(&[2], 0.5) },
        ],
    }
}

fn loss(p: Mlp<Tensor>) -> Tensor {
    let mut h = p.scale.tanh();
    for layer in &p.layers {
        h = (layer.w.dot(&h) + &layer.b).tanh();
    }
    h.powi(2).sum()
}

fn flatten(p: &Mlp<Array>) -> Vec<Array> {
    let mut v = vec![p.scale.clone()];
    for l in &p.layers {
        v.extend([l.w.clone(), l.b.clone()]);
    }
    v
}

#[test]
fn a_pytree_structs_gradient_is_the_same_struct() {
    let p = params();
    let g: Mlp<Array> = remat::grad(loss).call_tree(&p).unwrap();
    let flat = remat::grad(loss).call(&p).unwrap();
    assert_eq!(flatten(&g), flat);
    assert_eq!(g.layers[1].w.shape(), [2, 5]);
    let (value, g2) = remat::value_and_grad(loss).backend(Backend::Interp).value_and_call_tree(&p).unwrap();
    assert_eq!(remat::value_and_grad(loss).call_tree(&p).unwrap(), g);
    let err = remat::grad(loss).value_and_call_tree(&p).unwrap_err().to_string();
    assert!(err.contains("needs a value_and_grad"), "{err}");
    assert_eq!(value.shape(), [0usize; 0]);
    for (a, b) in flatten(&g2).iter().zip(&flat) {
        for (x, y) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
            assert!((x - y).abs() < 1e-5, "{x} vs {y}");
        }
    }
}

#[test]
fn a_structs_leaves_are_named_by_their_fields() {
    let f32s = |s: &[usize]| Aval::new(DType::F32, s.to_vec());
    let avals = Mlp {
        scale: f32s(&[4]),
        layers: vec![Layer { w: f32s(&[5, 4]), b: f32s(&[5]) }, Layer { w: f32s(&[2, 5]), b: f32s(&[2]) }],
    };
    let traced = remat::make_jaxpr(loss, &named("params", avals.clone())).unwrap();
    assert_eq!(
        traced.arg_names,
        ["params.scale", "params.layers[0].w", "params.layers[0].b", "params.layers[1].w", "params.layers[1].b"]
    );
    let ck = checkpoint(loss).policy(Policy::NothingSaveable);
    let residuals = remat::saved_residuals(|p| ck.call(p), &named("params", avals)).unwrap();
    assert_eq!(residuals[1].to_string(), "f32[5,4] from the argument params.layers[0].w");
}

#[test]
fn tuples_vecs_and_maps_keep_their_structure() {
    let f = |(a, b): (Tensor, Tensor)| (a.sin() * b.cos()).sum();
    let (ga, gb) = remat::grad(f).call_tree(&(array(&[3], 0.1), array(&[3], 0.2))).unwrap();
    assert_eq!((ga.shape(), gb.shape()), ([3usize].as_slice(), [3usize].as_slice()));

    let v = vec![array(&[2], 0.1), array(&[2], 0.2), array(&[2], 0.3)];
    let g: Vec<Array> =
        remat::grad(|xs: Vec<Tensor>| xs.iter().map(|x| x.powi(2).sum()).fold(xs[0].sum(), |a, b| a + b))
            .call_tree(&v)
            .unwrap();
    assert_eq!(g.len(), 3);
    // d/dx0 (sum x0 + sum x0^2 + ...) = 1 + 2 x0; d/dxi = 2 xi.
    assert!((g[0].to_f64_vec()[0] - (1.0 + 2.0 * v[0].to_f64_vec()[0])).abs() < 1e-6);
    assert!((g[2].to_f64_vec()[1] - 2.0 * v[2].to_f64_vec()[1]).abs() < 1e-6);

    let mut m = BTreeMap::new();
    m.insert("bias".to_string(), array(&[2], 0.4));
    m.insert("weight".to_string(), array(&[2, 2], 0.5));
    let f = |p: BTreeMap<String, Tensor>| p["weight"].dot(&p["bias"]).sum();
    let g: BTreeMap<String, Array> = remat::grad(f).call_tree(&m).unwrap();
    assert_eq!(g.keys().collect::<Vec<_>>(), ["bias", "weight"]);
    assert_eq!(g["weight"].shape(), [2, 2]);
    // d/dW sum(W b) = 1 b^T: every row is b.
    assert_eq!(g["weight"].to_f64_vec()[2..], m["bias"].to_f64_vec()[..]);

    // The callable vjp gives the same structure.
    let (_, f_vjp) = remat::vjp(f, &m).unwrap();
    let g2: BTreeMap<String, Array> = f_vjp.call(&Array::F32(ndarray::arr0(1.0f32).into_dyn())).unwrap();
    assert_eq!(g2, g);
}

#[test]
fn call_tree_with_argnums_is_an_error() {
    let f = |(a, b): (Tensor, Tensor)| (a * b).sum();
    let err = remat::grad(f).argnums(&[0]).call_tree(&(array(&[3], 0.1), array(&[3], 0.2))).unwrap_err();
    assert!(err.to_string().contains("with argnums use call"), "{err}");
}

#[test]
fn a_checkpoint_or_jit_is_passed_to_grad_jit_and_scan_itself() {
    let ck = checkpoint(loss).policy(Policy::DotsSaveable { only_if_no_batch_dims: true });
    let p = params();
    let direct = remat::grad(&ck).call_tree(&p).unwrap();
    let wrapped = remat::grad(|a| ck.call(a)).call_tree(&p).unwrap();
    assert_eq!(direct, wrapped);
    let by_value = remat::grad(checkpoint(loss)).call(&p).unwrap();
    assert_eq!(by_value, flatten(&wrapped));
    assert_eq!(remat::jit(&ck).call(&p).unwrap(), remat::jit(loss).call(&p).unwrap());
    let inner = remat::trace::jit(loss).name("loss");
    assert_eq!(remat::jit(inner).call(&p).unwrap(), remat::jit(loss).call(&p).unwrap());

    // scan(checkpoint(body), ...): one remat2 inside the scan body.
    let body = checkpoint(|(c, x): (Tensor, Tensor)| {
        let c = (&c * &x).sin();
        (c.clone(), c)
    });
    let f = |(c, xs): (Tensor, Tensor)| remat::scan(&body, c, xs).1.sum();
    let avals = (Aval::new(DType::F32, vec![3]), Aval::new(DType::F32, vec![4, 3]));
    let text = remat::make_jaxpr(f, &avals).unwrap().to_string();
    assert!(text.contains("scan[") && text.matches("remat2").count() == 1, "{text}");
    let g = remat::grad(f).call(&(array(&[3], 0.1), array(&[4, 3], 0.2))).unwrap();
    let plain = |(c, xs): (Tensor, Tensor)| {
        remat::scan(
            |c: Tensor, x: Tensor| {
                let c = (&c * &x).sin();
                (c.clone(), c)
            },
            c,
            xs,
        )
        .1
        .sum()
    };
    let want = remat::grad(plain).call(&(array(&[3], 0.1), array(&[4, 3], 0.2))).unwrap();
    for (a, b) in g.iter().zip(&want) {
        for (x, y) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
            assert!((x - y).abs() < 1e-6, "{x} vs {y}");
        }
    }
}
