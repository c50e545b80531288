"""The explorer's web app: FastAPI routes over :mod:`fedbound.explorer.api` and one static page.

Routes: ``GET /`` the page; ``GET /static/...`` its JS and CSS, and plotly.js from the ``plotly`` Python
package (served from memory: the page needs no network); ``GET /api/papers``; ``GET /api/form/{paper}``;
``POST /api/plan/{paper}``; ``POST /api/curve/{paper}?vs=T``; ``POST /api/vacuity/{paper}``;
``GET /api/claims/{paper}``.  The OpenAPI page
is ``/docs``.  Errors are ``{"detail": one line, "parameter": the key to blame or null}`` with status 422 (bad
input) or 404 (an unknown paper); nothing is ever written, and no route takes a path.

Handlers are plain ``def`` functions: FastAPI runs them in its thread pool, so a slow plan does not stall
the event loop.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Annotated, Any

from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from fedbound._version import __version__
from fedbound.explorer import api

__all__ = ["create_app"]

STATIC = {"explorer.js": "text/javascript", "explorer.css": "text/css"}

SettingBody = Annotated[Any, Body(description="the paper's config keys and values, as `--set KEY=VALUE` "
                                              "takes them, e.g. {\"eps\": 6, \"N\": 50}",
                                  examples=[{"eps": 6.0, "N": 50, "m": 100, "C": 20.0, "delta": 0.01}])]
Variant = Annotated[str, Query(description="paper (default) or a named reading of an erratum, '+'-joined")]


@cache
def _static(name: str) -> bytes:
    if name == "plotly.min.js":
        from plotly.offline import get_plotlyjs

        return get_plotlyjs().encode()
    return resources.files("fedbound.explorer").joinpath("static", name).read_bytes()


def _bad(exc: api.BadInput) -> JSONResponse:
    status = 404 if exc.parameter == "paper" else 422
    return JSONResponse({"detail": str(exc), "parameter": exc.parameter}, status_code=status)


BODY = "a JSON object of the paper's config keys, e.g. {\"eps\": 6, \"N\": 50}"
ROUTES = ("GET /api/papers, GET /api/form/{paper}, POST /api/plan/{paper}, POST /api/curve/{paper}?vs=T, "
          "POST /api/vacuity/{paper}, GET /api/claims/{paper}")


def _invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
    """The framework's own validation (a body that is not JSON, a bad query type) in the same one-line
    shape as every other error: a body that is not JSON says what the body must be (its error location is
    a character offset, not a parameter); a bad query value names the query parameter."""
    first = exc.errors()[0] if exc.errors() else {}
    loc = list(first.get("loc", ()))
    text = str(first.get("msg", "invalid request")).splitlines()[0]
    if first.get("type") == "json_invalid" or (loc and loc[0] == "body"):
        why = first.get("ctx", {}).get("error", text)
        at = f" at character {loc[1]}" if len(loc) > 1 and isinstance(loc[1], int) else ""
        return JSONResponse({"detail": f"the request body is not valid JSON ({why}{at}); it must be {BODY}",
                             "parameter": None}, status_code=422)
    where = [str(p) for p in loc if p not in ("body", "query", "path")]
    name = where[0] if where else None
    return JSONResponse({"detail": f"{name or 'request'}: {text}", "parameter": name}, status_code=422)


def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """An unknown route (404) or a known route with the wrong method (405), in one line that lists the
    routes."""
    route = f"{request.method} {request.url.path[:80]}"
    if exc.status_code == 404:
        detail = f"no route {route}; the API's routes are {ROUTES}"
    elif exc.status_code == 405:
        detail = f"{route}: method not allowed on this route; the API's routes are {ROUTES}"
    else:
        detail = f"{route}: {str(exc.detail).splitlines()[0] if exc.detail else exc.status_code}"
    return JSONResponse({"detail": detail, "parameter": None}, status_code=exc.status_code,
                        headers=getattr(exc, "headers", None))


def create_app() -> FastAPI:
    """The explorer app (no state beyond caches of static files and claim checks)."""
    app = FastAPI(title="fedbound design explorer", version=__version__,
                  description="The CLI's JSON over HTTP: papers, plans, curves and claims of every "
                              "registered paper. Bad input: 422 with the parameter named.")
    app.add_exception_handler(api.BadInput, lambda _, exc: _bad(exc))
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StarletteHTTPException, _http_error)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> Response:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8")

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name != "plotly.min.js" and name not in STATIC:
            return JSONResponse({"detail": f"no static file {name[:60]!r}", "parameter": None},
                                status_code=404)
        media = STATIC.get(name, "text/javascript")
        return Response(_static(name), media_type=f"{media}; charset=utf-8",
                        headers={"Cache-Control": "max-age=3600"})

    @app.get("/api/papers", summary="fedbound papers --json")
    def papers() -> dict[str, Any]:
        return api.papers_json()

    @app.get("/api/form/{paper}", summary="A paper's inputs: domains, defaults, plot variables, variants")
    def form(paper: str) -> dict[str, Any]:
        return api.form_json(paper)

    @app.post("/api/plan/{paper}", summary="fedbound plan PAPER --set KEY=VALUE ... --json")
    def plan(paper: str, body: SettingBody = None, variant: Variant = "paper") -> dict[str, Any]:
        return api.plan_json(paper, {} if body is None else body, variant)

    @app.post("/api/curve/{paper}",
              summary="The bound along one variable (fedbound plot PAPER --vs VS, as data)")
    def curve(paper: str, body: SettingBody = None,
              vs: Annotated[str, Query(description="the x-axis variable (the paper's choices)")] = "T",
              variant: Variant = "paper") -> dict[str, Any]:
        return api.curve_json(paper, {} if body is None else body, vs, variant)

    @app.post("/api/vacuity/{paper}",
              summary="Whether the recommendation is vacuous, and what to change (each change planned)")
    def vacuity(paper: str, body: SettingBody = None, variant: Variant = "paper") -> dict[str, Any]:
        return api.vacuity_json(paper, {} if body is None else body, variant)

    @app.get("/api/claims/{paper}", summary="fedbound claims PAPER --json, with explorer links")
    def claims(paper: str) -> dict[str, Any]:
        return api.claims_json(paper)

    return app
