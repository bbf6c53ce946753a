"""Run a kit's ``load_gen.run`` with completion requests only: ``python kit_load.py LOAD_GEN.PY --port P ...``.

Both kits' generators send a chat request every few requests, and that choice is
only a parameter of ``run``, not of their command line. On a CI pass the vLLM
kit's chat request (120 s timeout) hung its worker 13 s into the load and the
server's stats stopped; the tests need steady load, not chat coverage, so this
calls ``run(chat_every=0)`` with the generator's own request loop and prints its
statistics as the kit's command line does.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import sys


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("load_gen")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--requests", type=int, default=1_000_000, help="at most this many requests")
    a = ap.parse_args(argv)
    spec = importlib.util.spec_from_file_location("kit_load_gen", a.load_gen)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    params = inspect.signature(module.run).parameters
    # The vLLM kit bounds requests with ``max_requests``, llama.cpp's with ``requests``.
    bound = "requests" if "requests" in params else "max_requests"
    stats = module.run(port=a.port, duration=a.duration, concurrency=a.concurrency, chat_every=0,
                       **{bound: a.requests})
    print(json.dumps(stats, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
