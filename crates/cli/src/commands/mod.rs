//! One module per subcommand.

pub mod bench;
pub mod eval;
pub mod explain;
pub mod fwd_bwd;
pub mod grad;
pub mod plan;
pub mod print;
pub mod report;
pub mod residuals;
