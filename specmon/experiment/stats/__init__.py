"""The statistics only experiments use: the launch design and its look schedule (design), best-arm
identification (bai), replica rotation and its effects (rotation, replica_effects), and the guided
strategy's choice of what to measure (guided). Pure: no I/O. What every surface shares (stopping rule,
verdict, objective, cost model, schedule) stays in :mod:`specmon.model`."""
