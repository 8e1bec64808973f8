"""Format knowledge shared by readers: what several profilers' files look like.

Readers (built-in and third-party plugins alike) import these modules; no reader imports
another, so blocking one plugin (`ADVISOR_BLOCK_PLUGINS`) keeps all of its code from running.

- `warn`: the warning callback every helper reports through (`Profile.warn` fits).
- `files`: whole files as bytes (gunzipped) or JSON, with msprof's writer artefacts repaired.
- `csv_text`: CSV cells exactly as written (duplicate headers kept apart).
- `numbers`: text cells and trace values as numbers, bad cells counted in one warning.
- `timebase`: one broken far-off timestamp must not become a profile's time origin.
- `decimal_clock`: epoch timestamps written as decimal text, kept to the digit.
- `stream`: a Chrome-trace event array decoded in batches, never all at once.
- `chrome_trace`: Chrome-trace events: one typed decoder, and process / thread names.
- `interning`: columns of repeated names and ids kept as codes into their distinct values.
- `cann_exports`: msprof export file names; the newest export of each series.
- `cann_tasks`: CANN task categories, collective names, op types, task wait time.
- `cann_comm`: communication ops of HCCL timelines.
- `cann_csv`: CANN summary CSVs opened with their required columns; tables built from them.
- `cann_summaries`: the op_summary, op_statistic and api_statistic layouts.
- `cann_db`: CANN's SQLite exports (msprof_*.db, the torch_npu / MindSpore profiler databases)
  opened read-only; their tasks, collectives and API calls.
- `minddata`: MindSpore's data-pipeline operators (`minddata_pipeline_raw_{rank}.csv`).
"""
