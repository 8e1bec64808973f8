"""Built-in advisor plugins (readers, metric providers), registered through entry points."""
