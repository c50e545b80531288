"""The design explorer behind ``fedbound serve``: a local web page over the paper registry.

:mod:`fedbound.explorer.api` answers in plain Python what the CLI answers in JSON (papers, plans, curves,
claims), validated by the registry's config domains; :mod:`fedbound.explorer.app` serves it with FastAPI next
to one static page (``static/``) that draws with plotly's bundled plotly.js, so nothing leaves the machine.
"""
