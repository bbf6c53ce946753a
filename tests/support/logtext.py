"""Small builders of log lines in exact engine formats, for session and CLI tests."""

from __future__ import annotations

from datetime import datetime, timedelta

T0 = datetime(2026, 8, 23, 9, 0, 0)


def stamp(seconds: float, rank: str | None = "TP0") -> str:
    t = (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")
    return f"[{t} {rank}]" if rank else f"[{t}]"


def server_args(steps: int | None, at: float = 0.0, draft: int | None = None) -> str:
    if steps:
        spec = (f"speculative_algorithm='EAGLE3', speculative_draft_model_path='x/eagle3', "
                f"speculative_num_steps={steps}, speculative_eagle_topk=1, "
                f"speculative_num_draft_tokens={draft if draft is not None else steps + 1}")
    else:
        spec = ("speculative_algorithm=None, speculative_draft_model_path=None, speculative_num_steps=None, "
                "speculative_eagle_topk=None, speculative_num_draft_tokens=None")
    return f"{stamp(at, None)} server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', tp_size=8, {spec}, decode_log_interval=40)"


def ready(at: float) -> str:
    return f"{stamp(at, None)} The server is fired up and ready to roll!"


def decode(at: float, tput: float, acc_len: float | None = None, acc_rate: float | None = None,
           running: int = 1, rank: str | None = "TP0") -> str:
    spec = f"accept len: {acc_len:.2f}, accept rate: {acc_rate:.2f}, " if acc_len is not None else ""
    return (f"{stamp(at, rank)} Decode batch, #running-req: {running}, #token: 1234, token usage: 0.02, "
            f"{spec}cuda graph: True, gen throughput (token/s): {tput:.2f}, #queue-req: 0")


def campaign(steps: int | None, mean: float, n: int, *, start: float = 0.0, acc: float = 2.0,
             spread: float = 4.0, running: int = 1) -> list[str]:
    """A launch: server args, ready, then n decode lines one second apart around `mean`."""
    lines = [server_args(steps, start), ready(start + 5)]
    for i in range(n):
        wobble = spread * ((i * 7919) % 11 - 5) / 5  # deterministic, bounded noise
        lines.append(decode(start + 6 + i, mean + wobble, acc if steps else None,
                            acc / (steps + 1) if steps else None, running=running))
    return lines
