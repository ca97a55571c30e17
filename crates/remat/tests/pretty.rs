//! The facade's terminal layout of a vjp's two programs (`side_by_side`), on the seed
//! program `seed_checkpoint_each_layer`: plain, and wrapped to a 100-column terminal.
//! Regenerate with `INSTA_UPDATE=always cargo test -p remat --test pretty`.

use remat::side_by_side;
use remat_ad::fwd_bwd_strings;
use remat_testkit::{case_jaxpr, conformance_case};

fn seed_fwd_bwd() -> (String, String) {
    fwd_bwd_strings(&case_jaxpr(&conformance_case("seed_checkpoint_each_layer"))).unwrap()
}

#[test]
fn fwd_bwd_side_by_side() {
    let (fwd, bwd) = seed_fwd_bwd();
    insta::assert_snapshot!("seed_checkpoint_each_layer__columns", side_by_side(&fwd, &bwd, None));
    // Fitted to a narrow terminal, each column wraps at half the width.
    let narrow = side_by_side(&fwd, &bwd, Some(100));
    assert!(narrow.lines().all(|l| l.chars().count() <= 100), "{narrow}");
    insta::assert_snapshot!("seed_checkpoint_each_layer__columns_100", narrow);
}
