"""One module per step of the pipeline, each with a `run(...)`."""
