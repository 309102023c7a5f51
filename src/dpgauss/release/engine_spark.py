"""Where the docs import the Spark engine from; it lives in :mod:`dpgauss.release.engines.spark`."""

from .engines.spark import SparkEngine

__all__ = ["SparkEngine"]
