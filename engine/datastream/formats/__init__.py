"""File formats, as in ``pyflink.datastream.formats``: the FileSink's bulk writers for
Parquet (``weir.datastream.formats.parquet``) and CSV (``weir.datastream.formats.csv``)."""
