"""Record layouts and serializers: batches of records to and from bytes in network buffers."""
