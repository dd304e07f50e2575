"""No runtime type checking inside FastMCP's session store, unless the operator asks for it;
imported first by the CLI, beside :mod:`_threads`.

FastMCP reads a session's state (its tool visibility rules) on every ``tools/list`` and
``tools/call``, through py-key-value, which installs beartype's import hook over its own
package so that each of its calls is type-checked and a violation only warns. The first
tool call of a server then imports and decorates that package, about 300 ms on a 2-core
host against under 200 ms with the checks off, all of it between ``initialize`` and the first
answer (docs/performance.md, "Start-up"). The checks guard py-key-value's own code, not
this server's inputs, so the commands switch them off with the package's own setting. It
is read when py-key-value is first imported, so this must run before any tool is called;
an operator's own ``PY_KEY_VALUE_DISABLE_BEARTYPE`` is kept. Importing the package as a
library (tests, an embedding application) changes nothing.
"""

from __future__ import annotations

import os

__all__: list[str] = []

os.environ.setdefault("PY_KEY_VALUE_DISABLE_BEARTYPE", "true")
