"""Where messages go: one module per kind of destination, behind the ``Sink`` protocol of ``base``."""
