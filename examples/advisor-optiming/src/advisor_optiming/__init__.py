"""advisor plugin for op-timing CSV files (`*.optiming.csv`); the hooks are in `plugin`."""
