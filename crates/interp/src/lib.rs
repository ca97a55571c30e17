//! The reference interpreter: evaluates a jaxpr on `ndarray` arrays. It defines what a
//! program means; every later backend is tested against it.
