"""The one generation pipeline under every API surface: prompt checks and typed params
(``prompt``, ``params``), then submit, consume, abort and usage (``service``), and the
streamed reply that aborts what its client left (``streaming``)."""
