"""llama.cpp's draft depth × speculative type as sweep dimensions, on the real ``llama-server`` of the kit.

``{spec_type}`` is validated against the list the real binary prints in its
``--help`` (asserted here, so a new build with other types is noticed), and a
guided sweep over ``--grid steps=2,4 spec_type=draft-simple,ngram-mod`` runs
end to end: every restart runs its own type and depth (read back from the
server's own start-up lines), restarts are counted, and the sweep ends with a
verdict or an honest "not separated". Nothing asserts which setting is faster.
Ports 18300-18349; the server is stopped by its pidfile in a finally.
"""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

from specmon.control.dims import LLAMACPP_SPEC_TYPES
from tests.support.connecting import write_config
from tests.support.realkits import (
    llama_missing,
    llama_prefix,
    llama_profile,
    require,
    run_specmon,
    stop_server,
    sweep_json,
)

pytestmark = pytest.mark.realserver


def free_port() -> int:
    for port in range(18300, 18350):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in 18300-18349")


def test_the_spec_type_list_is_what_the_real_llama_server_accepts() -> None:
    require(llama_missing())
    out = subprocess.run([str(llama_prefix() / "bin" / "llama-server"), "--help"], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    m = re.search(r"^--spec-type (\S+)", out.stdout + out.stderr, re.MULTILINE)
    assert m is not None, (out.stdout + out.stderr)[-2000:]
    assert tuple(m.group(1).split(",")) == LLAMACPP_SPEC_TYPES


def test_guided_sweep_over_draft_depth_and_speculative_type(tmp_path: Path) -> None:
    require(llama_missing())
    folder = tmp_path / "llama"
    folder.mkdir()
    base = llama_profile(folder, free_port())
    assert base.argv is not None and base.nospec_argv is not None
    # Every type's depth flag gets {steps}; llama-server uses the one of its --spec-type.
    argv = [*base.nospec_argv, "-md", str(llama_prefix() / "models" / "tiny-draft-f16.gguf"),
            "--spec-type", "{spec_type}", "--spec-draft-n-max", "{steps}", "--spec-draft-n-min", "0",
            "-td", "1", "-tbd", "1", "--spec-ngram-mod-n-match", "3", "--spec-ngram-mod-n-min", "1",
            "--spec-ngram-mod-n-max", "{steps}"]
    launch = base.model_copy(update={"argv": argv, "log": str(folder / "llama_{steps}_{spec_type}.log"),
                                     "spec_type": "draft-simple", "steps_min": 1})
    config = write_config(tmp_path / "config.toml", "llama-dims", {"engine": "llamacpp"}, launch)
    ended = False
    try:
        result = run_specmon(["sweep", "llama-dims", "--config", str(config), "--grid", "steps=2,4",
                              "spec_type=draft-simple,ngram-mod", "--strategy", "guided", "--yes", "--no-record",
                              "--state", str(tmp_path / "sweep.json"), "--format", "json", "--finish", "none",
                              "--min-samples", "10", "--max-samples", "40", "--looks", "2", "--max-minutes", "1",
                              "--concurrency", "2", "--max-tokens", "48", "--request-timeout", "60"], 600)
        doc = sweep_json(result)
        ended = True
        print(f"\nreal llama.cpp guided sweep, draft depth x speculative type: {doc['restarts']} restarts "
              f"for {doc['settings']} settings")
        for run in doc["runs"]:
            print(f"  {run['setting']:<32} status={run['status']:<8} samples={run['samples']:>3} "
                  f"tok/s={(run['throughput'] or {}).get('mean')} stop={run['stop_reason']}")
        print(f"  verdict: {doc['verdict']['sentence']}")
        assert result.returncode in (0, 1, 3), result.stderr[-3000:]
        assert doc["dimensions"] == ["steps", "spec_type"]
        assert {(r["steps"], r["dims"]["spec_type"]) for r in doc["runs"]} == {
            (2, "draft-simple"), (4, "draft-simple"), (2, "ngram-mod"), (4, "ngram-mod")}
        measured = [r for r in doc["runs"] if r["status"] == "done"]
        assert doc["restarts"] == len([r for r in doc["runs"] if r["status"] != "skipped"]) >= 2, doc
        verdict = doc["verdict"]
        if verdict["separated"]:
            assert verdict["best_setting"] in {r["setting"] for r in measured}, verdict
        else:
            assert "not" in verdict["sentence"] or verdict["best"] is None, verdict
        # Each restart ran its own type and depth: the server says so at start-up.
        for r in doc["runs"]:
            if r["status"] == "skipped":
                continue
            log = (folder / f"llama_{r['steps']}_{r['dims']['spec_type']}.log").read_text(errors="replace")
            assert f"adding speculative implementation '{r['dims']['spec_type']}'" in log
            assert re.search(rf"- (n_match=3, )?n_max={r['steps']}\b", log), log[-1500:]
    finally:
        stop_server(launch.pidfile, late_s=2.0 if ended else 90.0)
