"""Builds adaptivellm._native (src/_native.c) against the public header and records
which libadaptivellm to load (see adaptivellm/_library.py for the order).

Where things are looked for, first found:
  header   $ALLM_INCLUDE_DIR, ../../include (this clone), `pkg-config --cflags adaptivellm`
  library  $ALLM_LIBRARY, $ALLM_BUILD_DIR/clientlib, ../../build/clientlib (this clone): the
           soname its libadaptivellm.so points to;
           none found: the system loader at run time (libadaptivellm.so.N)
"""
import os
import re
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CLONE = os.path.normpath(os.path.join(HERE, "..", ".."))


def include_dir():
    for d in (os.environ.get("ALLM_INCLUDE_DIR"), os.path.join(CLONE, "include")):
        if d and os.path.exists(os.path.join(d, "adaptivellm", "client.h")):
            return [d]
    try:
        flags = subprocess.run(["pkg-config", "--cflags-only-I", "adaptivellm"], check=True, capture_output=True,
                               text=True).stdout.split()
        return [f[2:] for f in flags]
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("adaptivellm: cannot find include/adaptivellm/client.h: build from a clone of "
                         "AdaptiveLLM-C, set ALLM_INCLUDE_DIR, or install the library (pkg-config adaptivellm)")


def version(inc):
    for d in inc:
        p = os.path.join(d, "adaptivellm", "version.h")
        if os.path.exists(p):
            m = re.search(r'ADAPTIVELLM_VERSION_STRING "([^"]+)"', open(p).read())
            if m:
                return m.group(1)
    return "0"


def built_library():
    """(absolute path of the built library, its soname) or (None, None)."""
    env = os.environ.get("ALLM_LIBRARY")
    if env:
        return os.path.abspath(env), os.path.basename(env)
    dirs = [os.path.join(os.environ["ALLM_BUILD_DIR"], "clientlib")] if os.environ.get("ALLM_BUILD_DIR") else []
    dirs.append(os.path.join(CLONE, "build", "clientlib"))
    for d in dirs:
        # the build's current soname: what its development link (libadaptivellm.so)
        # points to, as the linker would take it (older soname links may linger)
        dev = os.path.join(d, "libadaptivellm.so")
        if os.path.islink(dev):
            p = os.path.join(d, os.readlink(dev))
            if os.path.exists(p):
                return os.path.abspath(p), os.path.basename(p)
    return None, None


class BuildPy(build_py):
    """Writes adaptivellm/_build_info.py: where the library was at build time."""

    def run(self):
        super().run()
        lib, soname = built_library()
        out = os.path.join(self.build_lib, "adaptivellm", "_build_info.py")
        with open(out, "w") as f:
            f.write("# Written by setup.py when the package was built: the libadaptivellm it was built\n"
                    "# beside (None: none was found; the system loader is asked at run time).\n")
            f.write(f"LIBRARY = {lib!r}\nSONAME = {soname!r}\n")


INC = include_dir()
setup(
    version=version(INC),
    cmdclass={"build_py": BuildPy},
    ext_modules=[Extension("adaptivellm._native", ["src/_native.c", "src/params.c", "src/events.c", "src/handle.c"],
                           depends=["src/native.h"], include_dirs=INC, libraries=["dl"],
                           extra_compile_args=["-std=gnu11", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra",
                                               "-Wno-missing-field-initializers", "-Wno-unused-parameter"])],
)
