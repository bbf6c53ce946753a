"""The experiment: a sweep's home.

What a sweep is (the typed plan, :mod:`specmon.experiment.plan`), how it runs (one server:
:mod:`~specmon.experiment.sweep_run` with :mod:`~specmon.experiment.rounds` for launches; parallel
across replicas: :mod:`~specmon.experiment.fleet_sweep`), what it keeps (:mod:`~specmon.experiment.sweep_state`),
what it found (:mod:`~specmon.experiment.sweep_result`) and what is deployed and measured after it
(:mod:`~specmon.experiment.schedule_check`). The statistics only experiments use are in
:mod:`specmon.experiment.stats`. Restarts, the load driver and launch profiles are the control
layer's: an experiment uses them, they know nothing of experiments.
"""
