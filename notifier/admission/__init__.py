"""Admission: deciding each event against the limit hierarchy.

``limiter`` batches events into ``admit.lua`` calls and refuses, without a round
trip, the events of levels known to be full; ``fallback`` is the local limiter
of ``fail_open``; ``admit`` is the policy that ties them together (local ->
store -> fallback) and counts every decision; ``overrides`` keeps the policy
snapshot in step with the run-time overrides in the store.
"""
