"""``redact_line`` is ``redact_text`` for one log line, only faster: its quick look never lets by a line
that ``redact_text`` would change (generated lines, and every line of the repository's logs)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.redact import MASK, redact_line, redact_text

ROOT = Path(__file__).resolve().parents[2]

PIECES = ["--api-key ", "--hf-token=", "HF_TOKEN=", "api_key='", "\"token\": \"", "Authorization: Bearer ",
          "password: ", "passphrase=", "--auth ", "cookie=", "private_key=", "secret ", "#token: ", "token usage: ",
          "(token/s): ", "max_tokens=", "tokenizer=", "num_tokens: ", "hf_abcdefghijklmnopqrstuvwx",
          "sk-abcdefghijklmnopqrstuvwxyz", "ghp_abcdefghijklmnopqrstuvwx", "AKIAABCDEFGHIJKLMNOP", "Basic ",
          "xoxb-1234567890ab", "KEY=", "TOKEN: ", "token: ", "s3cr3t-value", "1234", "0.02", " ", ", ", "'", "\""]
lines = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), min_size=1, max_size=10).map("".join)


@settings(max_examples=600)
@given(lines)
def test_the_quick_look_never_lets_a_secret_by(line: str) -> None:
    assert redact_line(line) == redact_text(line)


def test_every_line_of_the_repositorys_logs() -> None:
    logs = list((ROOT / "sample_logs").rglob("*.log")) + list((ROOT / "tests" / "data").rglob("*.log"))
    assert len(logs) > 50
    changed = 0
    for path in logs:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            assert redact_line(line) == redact_text(line), (path, line[:200])
            changed += redact_line(line) != line
    assert changed > 0  # some real lines do hold what looks secret (keys in server args)


def test_a_decode_line_is_let_by_unchanged_and_a_token_is_hidden() -> None:
    decode = ("[2026-08-23 09:00:06 TP0] Decode batch, #running-req: 1, #token: 1234, token usage: 0.02, "
              "accept len: 2.00, gen throughput (token/s): 90.00, #queue-req: 0")
    assert redact_line(decode) == decode
    args = "server_args=ServerArgs(model_path='m', api_key='s3cr3t-value', hf_token='hf_abcdefghijklmnopqrstuvwx')"
    hidden = redact_line(args)
    assert "s3cr3t-value" not in hidden and "hf_abc" not in hidden and hidden.count(MASK) == 2


def test_a_recording_keeps_no_secret_and_reports_the_same_numbers(tmp_path: Path) -> None:
    from specmon.model.session import Session
    from specmon.output.recording import RecordedIngest, Recorder
    from specmon.output.report import load_report
    from tests.support.logtext import campaign

    lines = campaign(2, 90.0, 60)
    lines[0] = lines[0].replace("tp_size=8,", "tp_size=8, api_key='s3cr3t-value', hf_token='hf_abcdefghijklmnopqrstuvwx',")
    path = tmp_path / "rec.jsonl"
    with Recorder(path, meta={"command": "watch"}) as rec:
        ingest = RecordedIngest(Session(), rec)
        ingest.begin_source("server.log")
        ingest.feed(lines[:30])
        rec.batch("server.log", 31, lines[30:])
        ingest.close()
    stored = path.read_text(encoding="utf-8")
    assert "s3cr3t-value" not in stored and "hf_abcdefghij" not in stored and MASK in stored
    assert "#token: 1234" in stored  # the numbers' lines as they were
    live = Session()
    from specmon.parsing import parse_lines

    for r in parse_lines(lines):
        live.ingest(r)
    data = load_report(path)
    assert [r.label for r in data.session.runs if r.used] == [r.label for r in live.runs if r.used]
