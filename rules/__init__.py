"""Built-in YAML rule pack, shipped as package data."""
