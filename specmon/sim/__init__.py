"""The simulated SGLang EAGLE-3 server used by ``specmon demo``, the tests and ``sample_logs``.

Modules (import what you need; nothing here imports Textual):

* ``model``     — the cost model fitted to a real Kimi-K2.5 EAGLE-3 campaign (pure, seeded).
* ``logwriter`` — SGLang's log line formats, start-up / crash / shutdown scripts.
* ``engine``    — a prefill/decode scheduler on a virtual clock that writes the log.
* ``sweep``     — ``python -m specmon.sim.sweep``: writes the bundled simulated campaign.
* ``server``    — ``python -m specmon.sim.server``: the demo server, a real process.
"""
