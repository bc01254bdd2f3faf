import os
import sys

# Shared test helpers (_gof) live beside the tests; importlib mode does not put this folder on
# sys.path by itself.
sys.path.insert(0, os.path.dirname(__file__))
