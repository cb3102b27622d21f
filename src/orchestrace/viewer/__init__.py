"""Views of traces: a local web viewer (``orchestrace view``) and a shareable HTML file.

The web viewer needs the ``[viewer]`` extra (``pip install 'orchestrace[viewer]'``: Starlette
and uvicorn); its front-end is built at development time and ships in ``viewer/static``, so
neither Node.js nor a network is needed to use it. Importing this package imports neither.
"""

#: The public names live in the submodules (server, html, data).
__all__: list[str] = []
