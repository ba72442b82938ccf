"""The recall pipeline, one module per stage (see `pipeline.py`)."""
