"""adaptivellm: a Python client for allm-engined over its shared-memory rings.

    import adaptivellm
    with adaptivellm.Client(name="default") as c:
        print(c.generate("Once upon a time", max_tokens=32, temperature=0).text)
        for tok in c.stream("Once upon a time", max_tokens=32):
            print(tok.text, end="", flush=True)

AsyncClient has the same methods for asyncio. The sampling parameters are the
request-parameter table's (PARAMETERS; describe_parameters() lists them).
"""
from . import _library  # loads libadaptivellm first: everything below needs it
from ._async import AsyncClient, AsyncStream
from ._core import Result, Token
from ._errors import AllmError, ConnectError, EngineGoneError, ParameterError, RequestError
from ._params import PARAMS as PARAMETERS
from ._params import describe as describe_parameters
from ._sync import Client, Stream

#: the path of the libadaptivellm this process loaded
LIBRARY: str = _library.PATH

#: the version of the headers it was built against (setup.py gives the package the same)
__version__: str = _library._native.HEADER_VERSION
__all__ = ["Client", "AsyncClient", "Stream", "AsyncStream", "Result", "Token", "AllmError", "ConnectError",
           "EngineGoneError", "RequestError", "ParameterError", "PARAMETERS", "describe_parameters", "LIBRARY"]
