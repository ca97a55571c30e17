//! The report in a real renderer: every figure rendered with resvg (pixels: not empty, the
//! residual colour at the peak, text inside the canvas), the HTML parsed by an HTML5 parser
//! (no errors, self-contained), the same bytes on every run, the SVG text snapshotted, and
//! a report for every benchmark, conformance and zoo program.

use remat::ledger::{explain_jaxpr, explain_program, Ledger};
use remat::report::{frontier_svg, memory_svg, policy_points, report_html, split_svg, FrontierPoint, MAX_ROWS};
use remat::{Array, Options, Tensor};
use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg;

fn options() -> usvg::Options<'static> {
    let mut o = usvg::Options::default();
    o.fontdb_mut().load_system_fonts();
    o
}

fn render(svg: &str) -> (usvg::Tree, Pixmap) {
    let tree = usvg::Tree::from_str(svg, &options()).expect("resvg parses the SVG");
    let size = tree.size().to_int_size();
    let mut pixmap = Pixmap::new(size.width(), size.height()).expect("a canvas");
    resvg::render(&tree, Transform::default(), &mut pixmap.as_mut());
    (tree, pixmap)
}

fn rgb(p: &Pixmap, x: u32, y: u32) -> (u8, u8, u8) {
    let c = p.pixel(x, y).expect("inside");
    (c.red(), c.green(), c.blue())
}

/// The bounding boxes of every text node (laid out with the machine's fonts).
fn text_boxes(g: &usvg::Group, out: &mut Vec<usvg::Rect>) {
    for node in g.children() {
        match node {
            usvg::Node::Group(g) => text_boxes(g, out),
            usvg::Node::Text(t) => out.push(t.abs_bounding_box()),
            usvg::Node::Path(_) | usvg::Node::Image(_) => {}
        }
    }
}

/// Rendered, the figure is not blank and every text lies inside the canvas.
fn check_figure(name: &str, svg: &str) -> Pixmap {
    let (tree, pixmap) = render(svg);
    let (w, h) = (pixmap.width(), pixmap.height());
    let inked = (0..h)
        .step_by(2)
        .flat_map(|y| (0..w).step_by(2).map(move |x| (x, y)))
        .filter(|&(x, y)| rgb(&pixmap, x, y) != (255, 255, 255))
        .count();
    assert!(inked > 100, "{name}: the figure is blank");
    let mut boxes = Vec::new();
    text_boxes(tree.root(), &mut boxes);
    assert!(!boxes.is_empty(), "{name}: no text rendered (fonts?)");
    for b in boxes {
        assert!(
            b.left() >= 0.0 && b.top() >= 0.0 && b.right() <= w as f32 + 0.5 && b.bottom() <= h as f32 + 0.5,
            "{name}: text at {b:?} leaves the {w}x{h} canvas"
        );
    }
    pixmap
}

/// Three tanh layers over a batch: the activations outgrow the weight gradients' memory,
/// so residuals hold arena bytes at the peak.
fn mlp((x, w1, w2, w3): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    x.dot(&w1).tanh().dot(&w2).tanh().dot(&w3).tanh().sum()
}

fn mlp_ledger() -> Ledger {
    let a = |shape: &[usize]| {
        let n: usize = shape.iter().product();
        Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), (0..n).map(|i| i as f32 * 0.01).collect()).unwrap())
    };
    remat::explain(mlp, &(a(&[512, 32]), a(&[32, 32]), a(&[32, 32]), a(&[32, 32]))).expect("explains")
}

/// The x of the peak marker in a memory figure.
fn peak_x(svg: &str) -> f32 {
    let at = svg.find("<line id=\"peak\" x1=\"").expect("a peak marker") + "<line id=\"peak\" x1=\"".len();
    svg[at..].split('"').next().unwrap().parse().expect("a number")
}

#[test]
fn the_memory_figure_shows_residuals_at_the_peak() {
    let l = mlp_ledger();
    assert!(l.residual_peak_bytes() > 0, "{}", l.text());
    let svg = memory_svg(&l);
    let pixmap = check_figure("memory", &svg);
    let x = peak_x(&svg).round() as i64;
    let red = (214, 39, 40);
    let found = (x - 3..=x + 3)
        .flat_map(|x| (34..284).map(move |y| (x as u32, y as u32)))
        .any(|(x, y)| rgb(&pixmap, x, y) == red);
    assert!(found, "no residual colour at the peak (x = {x})");
}

#[test]
fn the_split_and_frontier_figures_render() {
    let l = mlp_ledger();
    let split = split_svg(&l);
    assert!(split.matches("class=\"edge\"").count() >= 3, "{split}");
    check_figure("split", &split);
    let points = vec![
        FrontierPoint { name: "everything_saveable".into(), peak_bytes: 4096, recompute_flops: 0 },
        FrontierPoint { name: "nothing_saveable".into(), peak_bytes: 1024, recompute_flops: 90_000 },
        FrontierPoint {
            name: "dots_with_no_batch_dims_saveable".into(),
            peak_bytes: 123_456_789_012,
            recompute_flops: 987_654_321_098_765,
        },
    ];
    let pixmap = check_figure("frontier", &frontier_svg(&points, Some(1)));
    assert!(pixmap.width() > 0);
}

#[test]
fn the_html_report_is_well_formed_self_contained_and_deterministic() {
    let l = mlp_ledger();
    let points = vec![FrontierPoint { name: "as written".into(), peak_bytes: l.peak_bytes(), recompute_flops: 0 }];
    let html = report_html("mlp", &l, &points, Some(0));
    let doc = scraper::Html::parse_document(&html);
    assert!(doc.errors.is_empty(), "HTML5 parse errors: {:?}", doc.errors);
    let svgs = scraper::Selector::parse("svg").unwrap();
    assert_eq!(doc.select(&svgs).count(), 3);
    for sel in ["script[src]", "link", "img", "iframe"] {
        assert_eq!(doc.select(&scraper::Selector::parse(sel).unwrap()).count(), 0, "{sel}: the report loads nothing");
    }
    assert!(!html.replace("http://www.w3.org/2000/svg", "").contains("http"), "no network address");
    let again = report_html("mlp", &mlp_ledger(), &points, Some(0));
    assert_eq!(html, again, "the same program gives the same bytes");
}

#[test]
fn snapshots_of_a_small_programs_figures() {
    let case = remat_testkit::conformance_case("save_only_a_c");
    let jaxpr = remat_testkit::case_jaxpr(&case);
    let l = explain_jaxpr(&jaxpr, &[], &remat_testkit::arg_names(&case), &Options::default()).expect("explains");
    insta::assert_snapshot!("save_only_a_c_memory", memory_svg(&l));
    insta::assert_snapshot!("save_only_a_c_split", split_svg(&l));
    let points = policy_points(&jaxpr, &Options::default()).expect("points");
    insta::assert_snapshot!("save_only_a_c_frontier", frontier_svg(&points, Some(0)));
}

/// Every program gets a report whose figures render, and a large program stays
/// readable: at most `MAX_ROWS` rows a side in the split.
#[test]
fn every_benchmark_conformance_and_zoo_program_gets_a_report() {
    let mut ledgers: Vec<(String, Ledger)> = Vec::new();
    for path in remat_testkit::data_files("bench", "jaxpr") {
        let name = path.display().to_string();
        let jaxpr = remat::ir::parse_jaxpr(&std::fs::read_to_string(&path).expect("reads"), &name).expect("parses");
        ledgers.push((name, explain_program(&jaxpr, &[], &Options::default()).expect("explains")));
    }
    for (name, case) in remat_testkit::conformance_cases().into_iter().chain(remat_testkit::zoo_cases()) {
        let jaxpr = remat_testkit::case_jaxpr(&case);
        if remat_testkit::forward_only(&case) || remat::ad::vjp(&jaxpr, &[]).is_err() {
            continue;
        }
        ledgers.push((name, explain_jaxpr(&jaxpr, &[], &[], &Options::default()).expect("explains")));
    }
    for (name, l) in &ledgers {
        let html = report_html(name, l, &[], None);
        assert!(scraper::Html::parse_document(&html).errors.is_empty(), "{name}");
        let split = split_svg(l);
        let rows = split.matches("class=\"eqn\"").count();
        assert!(rows <= 2 * MAX_ROWS, "{name}: {rows} rows");
        render(&memory_svg(l));
        render(&split);
    }
}
