"""specmon: a terminal dashboard for tuning speculative decoding on live LLM servers."""

__version__ = "0.1.0"
