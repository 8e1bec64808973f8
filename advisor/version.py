"""advisor's version, in a module of its own so that reports can name it without importing the
package root (which exposes the API)."""

__version__ = "0.1.0"
