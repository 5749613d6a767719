"""tile.conformance: one suite, run against every installed backend.

The pytest plugin (``tile.conformance.plugin``, loaded through the ``pytest11`` entry
point) adds ``--tile-backend`` and ``--tile-device``; ``strategies`` and ``reference``
are reusable by vendors checking their own backends.
"""
