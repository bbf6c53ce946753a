"""SGLang's own adaptive controller graded on the real SGLang kit (issue 32, item 2): a proof run.

``specmon sweep`` on the kit's EAGLE-3 server (``shared/real_server_sglang``, this machine, no SSH):
fixed settings 1 and 3 steps at concurrency 1, then ``--compare-adaptive``: the same server with
``--speculative-adaptive`` (SGLang's default tiers) in two launches, graded against the best fixed
setting. On a CPU, SGLang's adaptive mode builds a graph runner per tier and the CPU attention
backend has none (``NotImplementedError`` in ``init_cuda_graph_state``): the profile passes
``--disable-cuda-graph``, as a CPU deployment of the adaptive mode must.

    SPECMON_SHARED=/work/shared .venv/bin/python bench/proof_adaptive.py [FOLDER]

About 6 minutes on 2 idle cores. Prints the JSON's deployed checks; figures in bench/RESULTS.md.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.connecting import write_config  # noqa: E402
from tests.support.realkits import free_port, run_specmon, sglang_missing, sglang_profile, stop_server  # noqa: E402


def main() -> int:
    problem = sglang_missing()
    if problem:
        print(f"the SGLang kit is not here: {problem}")
        return 2
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="specmon-adaptive-"))
    folder.mkdir(parents=True, exist_ok=True)
    base = sglang_profile(folder, free_port())
    launch = base.model_copy(update={"argv": [*(base.argv or []), "--disable-cuda-graph"],
                                     "nospec_argv": [*(base.nospec_argv or []), "--disable-cuda-graph"]})
    config = write_config(folder / "config.toml", "sgl", {"log": str(folder / "sglang_1.log"), "engine": "sglang"},
                          launch)
    try:
        result = run_specmon(["sweep", "sgl", "--config", str(config), "--steps", "1,3", "--yes",
                              "--compare-adaptive", "--no-record", "--format", "json", "--state",
                              str(folder / "sweep.json"), "--min-samples", "8", "--max-samples", "30",
                              "--max-minutes", "10", "--max-tokens", "128", "--request-timeout", "120"], 3600)
    finally:
        stop_server(launch.pidfile)
    print(result.stderr[-4000:], file=sys.stderr)
    doc = json.loads(result.stdout)
    print(doc["verdict"]["sentence"])
    for check in doc.get("schedule_check") or []:
        print(check["sentence"])
    print(json.dumps(doc.get("server_left_on")))
    return 0 if doc.get("schedule_check") else 1


if __name__ == "__main__":
    raise SystemExit(main())
