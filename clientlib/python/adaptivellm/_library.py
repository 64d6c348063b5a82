"""Finds libadaptivellm and loads it into the binding (adaptivellm._native).

The extension is not linked against the library: it dlopen()s the one chosen here,
first found of
  1. $ALLM_LIBRARY: a path to the library file (a build, a sanitizer build, an
     installed copy);
  2. the build tree the package was installed from (recorded by setup.py in
     _build_info.LIBRARY), or ../../build/clientlib beside this source tree when the
     package runs from a clone;
  3. the soname (libadaptivellm.so.N) through the system loader: LD_LIBRARY_PATH,
     then ld.so.cache (what `meson install` and ldconfig set up).
"""
from __future__ import annotations

import os

from . import _native

try:  # written by setup.py at install time; absent in a bare source tree
    from . import _build_info
except ImportError:  # pragma: no cover - depends on how the package was installed
    _build_info = None

_HERE = os.path.dirname(os.path.abspath(__file__))
_TREE = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "build", "clientlib"))


def _tree_soname() -> str:
    """The soname the build beside this source makes: its libadaptivellm.so's target."""
    dev = os.path.join(_TREE, "libadaptivellm.so")
    return os.readlink(dev) if os.path.islink(dev) else "libadaptivellm.so"


# The soname of the library the package was built beside (clientlib/meson.build's
# soversion), as setup.py found it; from a bare source tree, the build beside it.
SONAME: str = getattr(_build_info, "SONAME", None) or _tree_soname()


def _candidates() -> list[tuple[str, str]]:
    """(where the path came from, path) in the order they are tried."""
    out = []
    env = os.environ.get("ALLM_LIBRARY")
    if env:
        out.append(("$ALLM_LIBRARY", env))
        return out  # an explicit choice: no silent fallback to another build
    built = getattr(_build_info, "LIBRARY", None)
    if built:
        out.append(("the build tree it was installed from", built))
    out.append(("the build tree beside this source", os.path.join(_TREE, SONAME)))
    out.append(("the system loader", SONAME))
    return out


def load() -> str:
    """Loads the library (once per process). Returns its path; raises ImportError
    naming every place tried."""
    tried = []
    for why, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{why}: {path} (missing)")
            continue
        try:
            _native.load(path)
            return path
        except ImportError as e:
            tried.append(f"{why}: {e}")
    raise ImportError(
        "adaptivellm: cannot load libadaptivellm (build the project with tools/build.sh, or set "
        "ALLM_LIBRARY to the library's path); tried: " + "; ".join(tried))


PATH: str = load()
