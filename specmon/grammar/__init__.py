"""The text primitives every engine's lines are read with: cleaning, prefixes, field grammars.

Below :mod:`specmon.engines` (whose modules declare their line kinds with these) and
:mod:`specmon.parsing` (the dispatcher that asks the engines): pure, no I/O.
"""
