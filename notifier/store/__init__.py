"""The shared store: Redis (single node or Cluster) or the embedded stand-in.

``client`` connects and is the one place a Redis error becomes
:class:`~notifier.errors.StoreUnavailable`; ``keys`` names every key and stats
field; ``scripts`` loads the Lua scripts. Nothing here imports another layer.
"""
