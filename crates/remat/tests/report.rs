//! The report in a real renderer: every figure rendered with resvg (pixels: not empty, the
//! residual colour at the peak, text inside the canvas), the HTML parsed by an HTML5 parser
//! (no errors, self-contained), the same bytes on every run, the SVG text snapshotted, and
//! a report for every benchmark, conformance and zoo program.

use remat::ledger::{explain_jaxpr, explain_program, Ledger};
use std::sync::Arc;

use remat::ir::ClosedJaxpr;
use remat::report::{
    compare_svg, frontier_svg, memory_svg, policy_points, split_svg, Choice, Figure, FrontierPoint, PointKind, Report,
    Side, MAX_ROWS,
};
use remat::{Array, Options, Tensor};
use resvg::tiny_skia::{Pixmap, Transform};

// The figures of README.md and docs/report.md, as `render_figures` writes them.
#[path = "../examples/render_figures/figures.rs"]
mod figures;
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

/// A report of one ledger as it is.
fn one_side(title: &str, ledger: Ledger) -> Report {
    let point = FrontierPoint::policy("as written", ledger.peak_bytes(), 0);
    Report {
        title: title.into(),
        sides: vec![Side { label: "as written".into(), ledger, point: 0 }],
        frontier: vec![point],
        notes: Vec::new(),
    }
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
fn the_largest_residuals_have_their_exact_extra_peak() {
    let l = mlp_ledger();
    let made: Vec<&remat::ledger::LedgerRow> = l.rows.iter().filter(|r| r.made_by.is_some()).collect();
    let with: Vec<&&remat::ledger::LedgerRow> = made.iter().filter(|r| r.extra_peak_bytes.is_some()).collect();
    assert_eq!(with.len(), made.len().min(remat::ledger::EXACT_ROWS));
    let smallest_with = with.iter().map(|r| r.residual.bytes).min().unwrap();
    assert!(made.iter().filter(|r| r.extra_peak_bytes.is_none()).all(|r| r.residual.bytes <= smallest_with));
    // Recomputing one of them moves its bytes into the backward half: some row changes the peak.
    assert!(with.iter().any(|r| r.extra_peak_bytes != Some(0)), "{}", l.text());
    assert!(l.text().contains(", peak +") || l.text().contains(", peak -"));
    assert!(split_svg(&l).contains(" bytes</title>") && split_svg(&l).contains(", peak "));
}

#[test]
fn the_split_and_frontier_figures_render() {
    let l = mlp_ledger();
    let split = split_svg(&l);
    assert!(split.matches("class=\"edge\"").count() >= 3, "{split}");
    check_figure("split", &split);
    let points = vec![
        FrontierPoint::policy("everything_saveable", 4096, 0),
        FrontierPoint::policy("nothing_saveable", 1024, 90_000),
        FrontierPoint::policy("dots_with_no_batch_dims_saveable", 123_456_789_012, 987_654_321_098_765),
    ];
    let pixmap = check_figure("frontier", &frontier_svg(&points, &[1]));
    assert!(pixmap.width() > 0);
}

#[test]
fn the_html_report_is_well_formed_self_contained_and_deterministic() {
    let html = one_side("mlp", mlp_ledger()).html();
    let doc = scraper::Html::parse_document(&html);
    assert!(doc.errors.is_empty(), "HTML5 parse errors: {:?}", doc.errors);
    let svgs = scraper::Selector::parse("svg").unwrap();
    assert_eq!(doc.select(&svgs).count(), 3);
    for sel in ["script[src]", "link", "img", "iframe"] {
        assert_eq!(doc.select(&scraper::Selector::parse(sel).unwrap()).count(), 0, "{sel}: the report loads nothing");
    }
    assert!(!html.replace("http://www.w3.org/2000/svg", "").contains("http"), "no network address");
    let again = one_side("mlp", mlp_ledger()).html();
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
    insta::assert_snapshot!("save_only_a_c_frontier", frontier_svg(&points, &[0]));
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
        let html = one_side(name, l.clone()).html();
        assert!(scraper::Html::parse_document(&html).errors.is_empty(), "{name}");
        let split = split_svg(l);
        let rows = split.matches("class=\"eqn\"").count();
        assert!(rows <= 2 * MAX_ROWS, "{name}: {rows} rows");
        render(&memory_svg(l));
        render(&split);
    }
}

/// The zoo's GPT block (a scalar loss with a named checkpoint), closed.
fn gpt_block() -> (ClosedJaxpr, Vec<String>) {
    let (_, case) = remat_testkit::zoo_cases().into_iter().find(|(n, _)| n.contains("gpt_block")).expect("gpt_block");
    (ClosedJaxpr::new(Arc::new(remat_testkit::case_jaxpr(&case))), remat_testkit::arg_names(&case))
}

/// The pixels of `svg` around (x, y) hold `colour`.
fn colour_near(p: &Pixmap, x: f32, y: f32, colour: (u8, u8, u8)) -> bool {
    let (x, y) = (x.round() as i64, y.round() as i64);
    (x - 3..=x + 3).flat_map(|x| (y - 3..=y + 3).map(move |y| (x, y))).any(|(x, y)| {
        x >= 0 && y >= 0 && (x as u32) < p.width() && (y as u32) < p.height() && rgb(p, x as u32, y as u32) == colour
    })
}

/// A budget between the smallest and the largest peak the planner reaches.
fn middle_budget(f: &ClosedJaxpr, names: &[String]) -> usize {
    let planner = remat::plan::Planner::new(f, names, &remat::plan::PlanOptions::default()).expect("plans");
    (planner.min_peak() + planner.no_remat_peak()) / 2
}

#[test]
fn a_budget_report_is_the_planners_plan_with_its_plans_on_the_frontier() {
    let (f, names) = gpt_block();
    let budget = middle_budget(&f, &names);
    let report = Report::new("gpt", &f, &names, &[Choice::Budget(budget)], &Options::default()).expect("reports");
    let plan = remat::plan::plan(&f, &names, remat::Budget::bytes(budget), &Default::default()).expect("a plan");
    let side = &report.sides[0];
    assert_eq!(side.label, format!("plan for {}", remat::plan::budget::human(budget)));
    // The ledger is the plan's: its peak is the planner's, and what it saves is the plan's.
    assert_eq!(side.ledger.peak_bytes(), plan.peak_bytes);
    assert!(plan.peak_bytes <= budget);
    let saved: Vec<String> = side.ledger.rows.iter().map(|r| r.residual.to_string()).collect();
    assert_eq!(saved, plan.saved.iter().map(|r| r.to_string()).collect::<Vec<_>>());
    let decided: Vec<&str> = side.ledger.rows.iter().map(|r| r.why.as_str()).collect();
    assert!(decided.iter().any(|w| w.starts_with("planner decision: the plan for a budget of")), "{decided:?}");
    assert!(decided.iter().all(|w| w.starts_with("planner decision") || w.starts_with("an argument")), "{decided:?}");
    assert!(side.ledger.text().contains("why saved: planner decision"));
    // The frontier: the built-in policies, the evaluated plans, the chosen one marked.
    let chosen = &report.frontier[side.point];
    assert_eq!(
        (chosen.kind, chosen.peak_bytes, chosen.recompute_flops),
        (PointKind::Plan, plan.peak_bytes, plan.recompute_flops)
    );
    let plans = report.frontier.iter().filter(|p| p.kind == PointKind::Plan).count();
    assert!(plans >= 3, "{plans} plans on the frontier");
    for name in ["everything_saveable", "nothing_saveable", "dots_saveable"] {
        assert!(report.frontier.iter().any(|p| p.kind == PointKind::Policy && p.name == name), "{name}");
    }
    let svg = report.figure_svg(Figure::Frontier).expect("a frontier");
    assert_eq!(svg.matches("class=\"plan\"").count(), plans);
    assert_eq!(svg.matches("fill=\"#d62728\"").count(), 1, "one marked point");
    let pixmap = check_figure("frontier with plans", &svg);
    // The marked diamond is red where it is drawn (its path starts at its top corner).
    let line = svg.lines().find(|l| l.contains("class=\"plan\"") && l.contains("fill=\"#d62728\"")).expect("marked");
    let d: Vec<f32> =
        line.split("d=\"M").nth(1).unwrap().split(' ').take(2).map(|v| v.parse().expect("a number")).collect();
    assert!(colour_near(&pixmap, d[0], d[1] + 3.0, (214, 39, 40)), "the chosen plan is red at {d:?}");
    let html = report.html();
    assert!(scraper::Html::parse_document(&html).errors.is_empty());
    assert!(html.contains("why saved: planner decision"));
}

#[test]
fn a_policy_report_is_the_policys_ledger_marked_on_the_frontier() {
    let (f, names) = gpt_block();
    let choice = Choice::parse_policy("dots").unwrap();
    let report = Report::new("gpt", &f, &names, &[choice], &Options::default()).expect("reports");
    let side = &report.sides[0];
    assert_eq!(side.label, "dots_saveable");
    let p = &report.frontier[side.point];
    assert_eq!((p.name.as_str(), p.peak_bytes), ("dots_saveable", side.ledger.peak_bytes()));
    assert_eq!(report.frontier.iter().filter(|q| q.name == "dots_saveable").count(), 1, "one point per policy");
    assert!(side.ledger.rows.iter().any(|r| r.why.starts_with("dots_saveable: dot_general is saveable")));
    assert!(report.figure_svg(Figure::Split).is_ok());
    // Without a budget too, the planner's plans are on the frontier, with the policy's
    // point on the same axes (the planner's own, for the policy on the whole function).
    let planner = remat::plan::Planner::new(&f, &names, &remat::plan::PlanOptions::default()).expect("plans");
    let plans: Vec<_> = report.frontier.iter().filter(|q| q.kind == PointKind::Plan).collect();
    assert_eq!(plans.len(), planner.points().len());
    let dots = planner.builtins().iter().find(|b| b.policy.ends_with(".dots_saveable")).unwrap();
    assert_eq!((p.peak_bytes, p.recompute_flops), (dots.peak_bytes, dots.recompute_flops));
    assert!(report.html().contains("planner"));
}

/// The frontier has one measure of recompute: the FLOPs a vjp runs beyond the same vjp
/// recomputing nothing, with one cost model. The report measures a side's own program
/// (`policy_points`), the planner its plans and the policies on the whole function; where
/// both build the same program they agree exactly.
#[test]
fn the_report_and_the_planner_measure_recompute_alike() {
    use remat::plan::{PlanOptions, Planner};
    let a = |shape: &[usize]| remat::Aval::new(remat::DType::F32, shape.to_vec());
    let traced = remat::make_jaxpr(mlp, &(a(&[512, 32]), a(&[32, 32]), a(&[32, 32]), a(&[32, 32]))).expect("traces");
    let (f, names) = (traced.jaxpr, traced.arg_names);
    let by_report = policy_points(&f.jaxpr, &Options::default()).expect("points");
    let planner = Planner::new(&f, &names, &PlanOptions::default()).expect("plans");
    let mut compared = 0;
    for b in planner.builtins() {
        let name = b.policy.trim_start_matches("jax.checkpoint_policies.");
        if let Some(r) = by_report.iter().find(|r| r.name == name) {
            assert_eq!((r.peak_bytes, r.recompute_flops), (b.peak_bytes, b.recompute_flops), "{name}");
            compared += 1;
        }
    }
    assert_eq!(compared, 4);
    let nothing = planner.builtins().iter().find(|b| b.policy.ends_with("nothing_saveable")).unwrap();
    // Recomputing everything repeats the three matmuls and tanhs, not the gradient's work.
    assert_eq!(nothing.recompute_flops, 3 * (2 * 512 * 32 * 32) + 3 * (512 * 32));
}

#[test]
fn a_comparison_draws_every_side_on_one_byte_scale() {
    let (f, names) = gpt_block();
    let budget = middle_budget(&f, &names);
    let choices = Choice::parse_list(&format!("nothing,dots,names:attn_out,budget:{budget}")).unwrap();
    let report = Report::new("gpt", &f, &names, &choices, &Options::default()).expect("reports");
    assert_eq!(report.sides.len(), 4);
    let marked = report.marked();
    assert_eq!(marked.len(), 4);
    assert!(marked.iter().all(|&k| k < report.frontier.len()));
    let sides: Vec<(&str, &Ledger)> = report.sides.iter().map(|s| (s.label.as_str(), &s.ledger)).collect();
    let svg = compare_svg(&sides);
    assert_eq!(svg, report.figure_svg(Figure::Memory).unwrap());
    assert_eq!(svg.matches("<svg x=\"").count(), 4, "one panel per side");
    // The same scale: every panel's top label is the largest peak.
    let top = report.sides.iter().map(|s| s.ledger.peak_bytes()).max().unwrap();
    let label = format!(">{}</text>", remat::ir::format_bytes(top as u128));
    assert_eq!(svg.matches(&label).count(), 4, "{label}");
    check_figure("comparison", &svg);
    // One red point per side on the frontier (a plan and a policy may coincide).
    let frontier = report.figure_svg(Figure::Frontier).unwrap();
    let distinct: std::collections::BTreeSet<usize> = marked.iter().copied().collect();
    assert_eq!(frontier.matches("fill=\"#d62728\"").count(), distinct.len());
    assert!(report.figure_svg(Figure::Split).unwrap_err().to_string().contains("draws one side"));
    let html = report.html();
    let doc = scraper::Html::parse_document(&html);
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    let ids: Vec<&str> =
        doc.select(&scraper::Selector::parse("svg[id]").unwrap()).filter_map(|e| e.value().attr("id")).collect();
    let unique: std::collections::BTreeSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "distinct ids: {ids:?}");
    assert_eq!(ids.iter().filter(|i| i.starts_with("split")).count(), 4);
    assert_eq!(html, Report::new("gpt", &f, &names, &choices, &Options::default()).unwrap().html(), "deterministic");
}

#[test]
fn several_programs_merge_into_one_report() {
    let (f, names) = gpt_block();
    let a = Report::new("a", &f, &names, &[Choice::AsWritten], &Options::default()).unwrap();
    let b = Report::new("b", &f, &names, &[Choice::parse_policy("nothing").unwrap()], &Options::default()).unwrap();
    let (na, nb) = (a.frontier.len(), b.frontier.len());
    let m = Report::merge("a, b", vec![a, b]);
    assert_eq!(m.frontier.len(), na + nb);
    assert_eq!(m.sides[0].label, "a: as written");
    assert_eq!(m.sides[1].label, "b: nothing_saveable");
    assert_eq!(m.frontier[m.sides[1].point].name, "b: nothing_saveable");
    assert!(scraper::Html::parse_document(&m.html()).errors.is_empty());
}

/// `layers` tanh layers sharing one weight, as a jaxpr text: `3 * layers + 2` equations.
fn deep_mlp(layers: usize, n: usize, d: usize) -> String {
    let dot = "dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32]";
    let mut t = format!("{{ lambda ; w:f32[{d},{d}] b:f32[{d}] x0:f32[{n},{d}]. let\n");
    t.push_str(&format!(
        "    bb:f32[1,{d}] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, {d}) sharding=None] b\n"
    ));
    for i in 0..layers {
        t.push_str(&format!("    h{i}:f32[{n},{d}] = {dot} x{i} w\n"));
        t.push_str(&format!("    a{i}:f32[{n},{d}] = add h{i} bb\n"));
        t.push_str(&format!("    x{}:f32[{n},{d}] = tanh a{i}\n", i + 1));
    }
    t.push_str(&format!("    s:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] x{layers}\n  in (s,) }}\n"));
    t
}

/// A 10,000-equation program stays readable: a bounded number of rows and labels in every
/// figure, and the split's groups expandable in the HTML, every equation in one of them.
#[test]
fn a_ten_thousand_equation_program_is_readable_at_a_glance() {
    let jaxpr = remat::ir::parse_jaxpr(&deep_mlp(3333, 2, 4), "deep").expect("parses");
    assert_eq!(jaxpr.eqns.len(), 10_001);
    let l = explain_jaxpr(&jaxpr, &[], &[], &Options::default()).expect("explains");
    let memory = memory_svg(&l);
    let split = split_svg(&l);
    assert!(memory.matches("class=\"group\"").count() <= 40, "memory labels");
    assert!(memory.matches("<text").count() <= 80, "memory: {} texts", memory.matches("<text").count());
    assert!(split.matches("<text").count() <= 2 * MAX_ROWS + 10, "split: {} texts", split.matches("<text").count());
    check_figure("memory (10k)", &memory);
    check_figure("split (10k)", &split);
    let html = one_side("deep", l.clone()).html();
    let doc = scraper::Html::parse_document(&html);
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    let halves = doc.select(&scraper::Selector::parse("details.groups").unwrap()).count();
    assert_eq!(halves, 2, "both halves are grouped");
    let groups = scraper::Selector::parse("details.groups > details").unwrap();
    let mut listed = 0;
    for g in doc.select(&groups) {
        let summary =
            g.select(&scraper::Selector::parse("summary").unwrap()).next().unwrap().text().collect::<String>();
        assert!(summary.contains("equations"), "{summary}");
        listed += g
            .select(&scraper::Selector::parse("pre").unwrap())
            .next()
            .unwrap()
            .text()
            .collect::<String>()
            .lines()
            .count();
    }
    assert_eq!(listed, l.program.eqns.len(), "every equation in one group");
    assert!(doc.select(&groups).count() <= 2 * MAX_ROWS);
}

/// A scan, a call or a checkpoint is one row of the split, and its body opens from the
/// HTML's groups: the LSTM's `scan` lists its body's equations, one line each.
#[test]
fn a_scans_body_is_expandable_in_the_html() {
    let (_, case) = remat_testkit::zoo_cases().into_iter().find(|(n, _)| n.contains("lstm")).expect("lstm");
    let jaxpr = remat_testkit::case_jaxpr(&case);
    let l = explain_jaxpr(&jaxpr, &[], &[], &Options::default()).expect("explains");
    let scans: Vec<&remat::ir::Eqn> = l.program.eqns.iter().filter(|e| e.primitive.name() == "scan").collect();
    assert!(!scans.is_empty(), "the LSTM's vjp has scans");
    let html = one_side("lstm", l.clone()).html();
    let doc = scraper::Html::parse_document(&html);
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    let bodies = scraper::Selector::parse("details.body").unwrap();
    let summary = scraper::Selector::parse("summary").unwrap();
    let pre = scraper::Selector::parse("pre").unwrap();
    let mut seen = Vec::new();
    for b in doc.select(&bodies) {
        let s = b.select(&summary).next().unwrap().text().collect::<String>();
        if let Some(n) = s.strip_prefix("scan body: ").and_then(|r| r.strip_suffix(" equations")) {
            let n: usize = n.parse().expect("a count");
            let lines = b.select(&pre).next().unwrap().text().collect::<String>().lines().count();
            assert_eq!(lines, n, "{s}: every body equation listed");
            seen.push(n);
        }
    }
    let mut want: Vec<usize> = scans.iter().map(|e| e.primitive.subjaxprs()[0].eqns.len()).collect();
    seen.sort_unstable();
    want.sort_unstable();
    assert_eq!(seen, want, "one expandable body per scan of the vjp");
}

/// A report without a budget shows the planner's plans where the planner can plan the
/// function, and says why not where it cannot (a function that is not a scalar loss).
#[test]
fn every_report_has_planner_plans_or_says_why_not() {
    let report_of = |name: &str| {
        let (_, case) = remat_testkit::zoo_cases().into_iter().find(|(n, _)| n.contains(name)).expect("a zoo case");
        let f = ClosedJaxpr::new(Arc::new(remat_testkit::case_jaxpr(&case)));
        Report::new(name, &f, &remat_testkit::arg_names(&case), &[Choice::AsWritten], &Options::default())
            .expect("reports")
    };
    let plans = |r: &Report| r.frontier.iter().filter(|p| p.kind == PointKind::Plan).count();
    let gpt = report_of("gpt_block");
    assert!(plans(&gpt) > 10, "{} plans", plans(&gpt));
    assert!(gpt.notes.is_empty(), "{:?}", gpt.notes);
    let adam = report_of("adam_step");
    assert_eq!(plans(&adam), 0);
    assert_eq!(adam.notes.len(), 1, "{:?}", adam.notes);
    assert!(adam.notes[0].starts_with("No planner plans: "), "{:?}", adam.notes);
    assert!(adam.html().contains("<p>No planner plans: "));
    // The policies are still on the frontier, measured by the report.
    assert!(adam.frontier.iter().any(|p| p.name == "nothing_saveable"));
}

#[test]
fn the_committed_figures_are_what_render_figures_writes() {
    // docs/images/make.sh's arguments, from the repository's root.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let program = figures::read(&root, "docs/images/tanh_mlp.jaxpr").expect("tanh_mlp.jaxpr");
    let compared = figures::read(&root, "tests/data/zoo/gpt_block.json").expect("gpt_block");
    let drawn = figures::figures(&program, &compared).expect("the figures");
    assert_eq!(drawn.len(), 4);
    for (name, svg) in drawn {
        check_figure(name, &svg);
        let path = root.join(format!("docs/images/{name}.svg"));
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(committed == svg, "{} is not what docs/images/make.sh writes now", path.display());
    }
    // The pages show these files.
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let report = std::fs::read_to_string(root.join("docs/report.md")).unwrap();
    for name in ["memory", "split"] {
        assert!(readme.contains(&format!("(docs/images/{name}.svg)")), "README.md shows {name}.svg");
    }
    for name in ["memory", "split", "compare", "frontier"] {
        assert!(report.contains(&format!("(images/{name}.svg)")), "docs/report.md shows {name}.svg");
    }
}
