"""The figures: each function takes runs, the DataFrames of tables.py or a command's result and
returns a matplotlib figure (plotting.save writes it as PNG or SVG, plotting.png_bytes embeds it
in the report). Modules: time (where the time goes, ranks x iterations, the report's scaling),
scaling (the scaling command's four panels), timeline (per-rank Gantt chart), training
(strategies, pipelines, the sampler), predict (the prediction's figure)."""
