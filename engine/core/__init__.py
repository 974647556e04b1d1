"""``weir.core``: what the API and the runtime share, at the bottom of the import order.

Function base classes, state descriptors, window assigners and triggers (as
descriptions), the built-in aggregators, the ``Source``/``Sink`` bases with the protocol
by which a connector names its runtime side, the state backend choices, and the executor
registry through which ``env.execute()`` reaches the runtime. It imports only
``weir.common`` (types, configuration, time) and ``weir.errors``; ``weir.datastream``
re-exports these names at PyFlink's module paths.
"""
