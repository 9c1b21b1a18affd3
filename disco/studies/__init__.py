"""Studies: lists of runs, their records, and the tables and plots of them.

What the scripts in `benchmarks/` share, for studies of your own:

* `records`: a run's record on disk (`<out>/runs/<name>.json`), checked
  against the settings asked for, and loaded back for a report;
* `pieces`: a trainer run done in pieces, resumed from its checkpoints;
* `runs`: a study as a list of runs, and the command around it;
* `comparison`: algorithms compared across environments, step sizes chosen
  on one of them first (`selection`);
* `finals`, `final_tables`: a trainer run summed up per seed (final
  returns, curves, its speed), and the tables of such runs;
* `report`: per-seed final returns, their IQM and bootstrap interval;
* `tables`: CSV files, markdown tables and the cells in them;
* `plots`: the figures of a report (matplotlib, imported on use);
* `ppo`, `ppo_segmented`, `ppo_runs`: rejax's PPO as a baseline (rejax,
  imported on use: ``pip install "disco-jax[ppo]"``);
* `timing`: timings in fresh processes, and the machine they ran on.

Import the modules, e.g. ``from disco.studies import pieces``.
"""
