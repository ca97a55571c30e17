"""pytest set-up of the remat Python tests: JAX on the CPU, and this directory importable
(the `models` package of programs and the `helpers` module)."""

import os
import sys

import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
jax.config.update("jax_platform_name", "cpu")
