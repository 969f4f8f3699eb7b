"""The HTTP face of the gateway: the aiohttp application, its handlers and their answers.

Nothing below this package imports it.
"""
