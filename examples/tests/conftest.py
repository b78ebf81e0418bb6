"""Lets the example tests import the example kernels (examples/kernels/python is not a package)
and, in a source checkout, the in-tree knit package. The knit pytest plugin is loaded by the
installed package's entry point, or with -p knit.pytest_plugin."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "kernels", "python"))
if os.environ.get("KNIT_USE_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(_HERE, "..", "..", "python"))
