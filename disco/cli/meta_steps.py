"""Commands of loops that learn an update rule: a row per meta-step."""

# pylint: disable=g-importing-member
from collections.abc import Callable
import pathlib
from typing import Any

from disco import progress
from disco import runtime
from disco import weights
from disco.cli.command import Command
from disco.cli.command import Run
from disco.cli.command import resumed_step
from disco.cli.command import steps_up_to
from disco.cli.errors import report


def run_meta_steps(
    run: Run,
    run_fn: Callable[..., Any],
    progress_bar: Callable[..., Any],
) -> Any:
  """Runs a meta-step loop (`run_meta_train`, `run_discovery`) with a bar.

  The bar starts at the step the run resumes from, the newest checkpoint in
  `runtime.checkpoint_root`, where both loops keep them.
  """
  with progress_bar(
      run.config.num_steps,
      initial=resumed_step(run, runtime.checkpoint_root),
      enabled=run.args.progress,
  ) as bar:
    return run_fn(
        run.config,
        progress_fn=progress.chain(run.log_step, bar),
        checkpoint_dir=run.run_dir.checkpoints,
        resume=run.args.resume,
        handle_interrupts=True,
        logger=run.logger,
    )


def meta_step_command(
    *,
    params_filename: str,
    summary: Callable[[Any], None] | None = None,
    **fields: Any,
) -> Command:
  """The `Command` of a loop that learns an update rule, a row a meta-step.

  `disco-meta-train` and `disco-discover` (their `run` calls
  `run_meta_steps`): a resumed run keeps the rows of `log.csv` up to its
  newest checkpoint in `runtime.checkpoint_root`; at the end the learned
  rule is saved as `params_filename` in the run directory, `summary` prints
  what the loop's result says, and the files written are listed.

  Args:
    params_filename: the learned rule's file, in the run directory.
    summary: prints a summary of the result (`MetaTrainResult`, ...).
    **fields: the other fields of the `Command`.

  Returns:
    The command.
  """
  prog = fields['prog']

  def _finish(run: Run, result: Any, plots: list[pathlib.Path]) -> None:
    params = weights.save_update_rule_params(
        result.update_rule_params, run.run_dir.path / params_filename
    )
    written = [params, run.run_dir.log, run.run_dir.config, *plots]
    if result.checkpoint_path is not None:
      written.append(result.checkpoint_path)
    if summary is not None:
      summary(result)
    report(prog, written)

  return Command(
      resumed_rows=steps_up_to(runtime.checkpoint_root),
      finish=_finish,
      **fields,
  )
