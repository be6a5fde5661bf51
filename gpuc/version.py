"""The package version (gpuc.__version__): the compiler stamps it into bundles and cache keys, the
runtime's pipeline cache keys on it.  Its own module so those need not import the package's public
facade (gpuc/__init__.py), which itself imports the compiler and the runtime."""
__version__ = "0.1.0"
