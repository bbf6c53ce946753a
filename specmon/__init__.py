"""specmon: a terminal dashboard for tuning speculative decoding on live LLM servers."""

import warnings

__version__ = "0.1.0"

# cryptography 47+ deprecates DSA, and asyncssh (2.24.1, the newest) still builds its DSA key
# classes when it is imported: every command that loads it printed ten lines of someone else's
# deprecation warning on stderr, before specmon's own one-line errors (seen on a fresh install,
# 2026-12-05). specmon never offers DSA; the warning is not the user's to act on. Only that
# warning, only from asyncssh's own modules.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")
