"""dpcore: differential privacy with exact, floating-point-safe samplers in Cython kernels."""
from dpcore._version import __version__

__all__ = ["__version__"]
