"""How many learner updates per second per seed, by agent, precision, env?

For each environment, agent (`disco.train.AGENTS`), compute dtype and
rule, trains one run of a trainer preset (`--presets`; default `paper`:
batches of 96 trajectories of 29 steps, one learner update and one rollout
of 10 environments x 29 steps per iteration; `crafter` and `atari`: the
paper's evaluation protocols, several updates per rollout) for a few chunks
and times the steady state: every chunk after the first learning one, which
compiles. Each setting runs in a fresh process, so none inherits another's
caches. The axes (`AXES`, `--help`) change one thing of the preset's
run: frames stacked, environments per rollout, `craftax_frames`' frame
embedding (each distinct frame once, or every stack's), the inner scans
(rolled or unrolled), the online network once or twice per update, the
action model's gates from the root state once per state or once per
action (`TrainConfig.share_state_gates`), the action model's width; a
pair of choices times both ways for a `vs_*` ratio. `--before REV` also
times every setting with the library of git revision REV (a worktree of
it), in the same invocation.

  updates_per_s   learner updates per second of the run (all its seeds)
  per_seed        updates per second per seed (the run's rate x seeds)
  ms_per_update   milliseconds per update and seed
  vs_f32          this dtype's rate over float32's (same env, agent, rule)
  vs_ac           Disco103's rate over actor-critic's (same env, agent, dtype)
  vs_every        this rate over embedding every frame's (same setting)
  vs_rolled       this rate over the inner scans rolled (same setting)
  vs_twice        this rate over the network run twice (same setting)
  vs_each         this rate over the gates once per action (same setting)
  vs_before       this rate over the library at `--before` (same setting)

  python benchmarks/learner_cost.py --out benchmarks/results/learner_cost.csv
  python benchmarks/learner_cost.py --envs catch --agents colab --rules disco
  python benchmarks/learner_cost.py --presets crafter \
      --envs craftax:Craftax-Classic-Symbolic-v1 --agents craftax_frames \
      --dtypes float32 --rules disco --widths 0 256 --state-gates shared each

Needs gymnax (MinAtar) and craftax (Craftax-Classic) for those rows.
"""

import argparse
import json
import pathlib
import sys
import time

# `disco.studies` is imported where used, never by the child: a child may
# run the library of an older revision (`--before`), which lacks it.
_CHILD = '--child'
_REPO = pathlib.Path(__file__).resolve().parents[1]
ENVS = (
    'catch',
    'gymnax:Breakout-MinAtar',
    'craftax:Craftax-Classic-Symbolic-v1',
)
# Per environment, the colab's agent and the family's own.
ENV_AGENTS = {
    'catch': ('colab', 'minatar'),
    'gymnax:Breakout-MinAtar': ('colab', 'minatar'),
    'craftax:Craftax-Classic-Symbolic-v1': ('colab', 'craftax'),
}
DTYPES = ('float32', 'bfloat16')
RULES = ('disco', 'actor_critic')
COLUMNS = tuple("""
    preset frame_stack frame_embedding inner_scans forward state_gates width
    code num_envs env agent compute_dtype rule num_seeds updates_per_s
    per_seed ms_per_update vs_f32 vs_ac vs_every vs_rolled vs_twice vs_each
    vs_before timed_updates compile_s
    """.split())
# The settings' axes besides environments, agents, rules, dtypes and seeds:
# flag -> (type, choices, default, help).
# fmt: off
AXES = {
    '--presets': (str, None, ('paper',), 'trainer presets'),
    '--frame-stacks': (int, None, (0,), "frames stacked (0: the preset's)"),
    '--frame-embeddings': (str, ('once', 'every'), ('once',),
                           "craftax_frames: each frame embedded once, or every"
                           " stack's"),
    '--inner-scans': (str, ('rolled', 'unrolled'), ('rolled',),
                      'the scans inside a step left as loops, or unrolled'),
    '--forward': (str, ('once', 'twice'), ('once',), 'the online network run'
                  " once per update, or twice (the reference's)"),
    '--state-gates': (str, ('shared', 'each'), ('shared',),
                      "the action model's gates from the root state once per"
                      " state, or once per action (the reference's)"),
    '--widths': (int, None, (0,), "action model's width (0: the agent's)"),
    '--num-envs': (int, None, (0,), "environments (0: the preset's)"),
}
# fmt: on
# What two rows share to be compared, and what a missing field reads as
# (rows of older files: the `paper` preset, no revision named).
SETTING = tuple("""
    preset frame_stack num_envs frame_embedding inner_scans forward
    state_gates width env agent num_seeds code rule compute_dtype
    """.split())
SETTING_DEFAULTS = dict(
    preset='paper', frame_embedding='once', inner_scans='rolled',
    forward='once', state_gates='shared', width=0, code='this',
)  # fmt: skip


def child(spec: dict) -> dict:
  """Times one setting in this process; returns its row."""
  from disco import frame_nets  # pylint: disable=g-import-not-at-top
  from disco import train  # pylint: disable=g-import-not-at-top

  if spec.get('frame_embedding') == 'every':
    use = frame_nets.use_frame_network

    def use_every(settings, frame_embedding):
      settings = use(settings, frame_embedding)
      settings.net_settings.net_args['embed_each_frame_once'] = False
      return settings

    frame_nets.use_frame_network = use_every
  changes = {}
  if spec.get('num_envs'):
    changes['num_envs'] = spec['num_envs']
  if spec.get('inner_scans') == 'unrolled':
    changes['unroll_inner_scans'] = True
  elif getattr(train.TrainConfig(), 'unroll_inner_scans', False) is None:
    changes['unroll_inner_scans'] = False  # Rolled, also on a GPU.
  if spec.get('forward') == 'twice':
    changes['forward_once'] = False
  if spec.get('state_gates') == 'each':
    changes['share_state_gates'] = False
  if spec.get('width'):
    changes['agent_lstm_size'] = spec['width']
    changes['agent_head_mlp_hiddens'] = (spec['width'],)
  if spec.get('frame_stack'):
    changes['frame_stack'] = spec['frame_stack']
    if spec['frame_stack'] == 1:
      changes['agent_frame_embedding'] = 0
  config = train.preset(
      spec.get('preset', 'paper'),
      agent=spec['agent'],
      env=spec['env'],
      rule=spec['rule'],
      compute_dtype=spec['compute_dtype'],
      eval_every=0,
      steps_per_chunk=spec['chunk'],
      **changes,
  )
  # The library at `--before` may predate `TrainConfig.warmup_steps`.
  warmup = getattr(config, 'warmup_steps', None)
  if warmup is None:
    warmup = -(-config.learning_starts // config.num_envs) - 1
  config = config.replace(
      num_steps=warmup + spec['chunks'] * spec['chunk'],
      # The buffer never fills while timed: hold only what the run makes.
      buffer_capacity=min(
          config.buffer_capacity,
          (warmup + spec['chunks'] * spec['chunk'] + 1) * config.num_envs,
      ),
  )
  updates = config.learner_steps_per_step
  points = []
  start = time.perf_counter()
  train.run_train(
      config,
      num_seeds=spec['num_seeds'],
      progress_fn=lambda step, row: points.append((step, time.perf_counter())),
  )
  learned = [(s, t) for s, t in points if s > warmup]
  (s0, t0), (s1, t1) = learned[0], learned[-1]
  rate = (s1 - s0) / (t1 - t0)  # Iterations per second.
  return dict(
      frame_stack=config.frame_stack,
      num_envs=config.num_envs,
      updates_per_s=rate * updates,
      per_seed=rate * updates * spec['num_seeds'],
      ms_per_update=1000.0 / (rate * updates * spec['num_seeds']),
      timed_updates=(s1 - s0) * updates,
      compile_s=round(t0 - start - (s0 - warmup) / rate, 1),
  )


def main(argv=None) -> int:
  from disco.studies import timing  # pylint: disable=g-import-not-at-top

  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  for flag, (kind, choices, default, text) in AXES.items():
    parser.add_argument(
        flag, nargs='+', type=kind, choices=choices, default=default, help=text
    )
  parser.add_argument('--envs', nargs='+', default=ENVS)
  parser.add_argument(
      '--agents', nargs='+', default=None, help='default: ENV_AGENTS'
  )
  parser.add_argument('--dtypes', nargs='+', default=DTYPES)
  parser.add_argument('--rules', nargs='+', default=RULES)
  parser.add_argument(
      '--baseline-dtypes',
      action='store_true',
      help='time actor-critic in every dtype too (default: float32 only)',
  )
  parser.add_argument('--num-seeds', nargs='+', type=int, default=(1,))
  parser.add_argument(
      '--before',
      default=None,
      metavar='REV',
      help='also time each setting with the library at this git revision',
  )
  parser.add_argument('--chunk', type=int, default=10)
  parser.add_argument('--chunks', type=int, default=4)
  parser.add_argument('--out', default=None, help='CSV file to write')
  parser.add_argument(_CHILD, default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    print(json.dumps(child(json.loads(args.child))))
    return 0
  print(f'machine: {timing.machine()}', flush=True)
  codes = {'this': None}
  if args.before:
    codes[args.before] = timing.worktree(_REPO, args.before)
  rows = []
  specs = [
      dict(
          preset=preset, frame_stack=frame_stack, num_envs=num_envs,
          frame_embedding=embedding, inner_scans=inner_scans, forward=forward,
          state_gates=state_gates, width=width, env=env, agent=agent,
          rule=rule, compute_dtype=dtype, num_seeds=num_seeds,
          chunk=args.chunk, chunks=args.chunks,
      )  # fmt: skip
      for preset in args.presets
      for frame_stack in args.frame_stacks
      for num_envs in args.num_envs
      for env in args.envs
      for agent in args.agents or ENV_AGENTS.get(env, ('colab',))
      for rule in args.rules
      for dtype in args.dtypes
      if rule == 'disco' or args.baseline_dtypes or dtype == 'float32'
      for num_seeds in args.num_seeds
      for embedding in args.frame_embeddings
      if embedding == 'once' or agent == 'craftax_frames'
      for inner_scans in args.inner_scans
      for forward in args.forward
      for state_gates in args.state_gates
      for width in args.widths
  ]
  for spec in specs:
    for code, library in codes.items():
      result = timing.child_result(__file__, _CHILD, spec, library=library)
      if result is None:
        continue
      row = {k: v for k, v in spec.items() if k in COLUMNS} | result
      row['code'] = code
      rows.append(row)
      if args.out:  # Row by row: a stopped command keeps its rows.
        write_csv(args.out, rows)
      setting = ' '.join(str(row[k])[:38] for k in SETTING if k in row)
      print(
          f'{setting}: {row["per_seed"]:6.2f} updates/s per seed'
          f' ({row["ms_per_update"]:5.0f} ms), compile {row["compile_s"]} s',
          flush=True,
      )
  if args.out:
    write_csv(args.out, rows)
  return 0


def write_csv(path: str, rows: list[dict]) -> None:
  """The rows, with their ratios, under a line naming the machine."""
  from disco.studies import tables  # pylint: disable=g-import-not-at-top
  from disco.studies import timing  # pylint: disable=g-import-not-at-top

  _ratios(rows)
  comment = f'{timing.machine()}; {time.strftime("%Y-%m-%d")}'
  tables.write_csv(pathlib.Path(path), rows, COLUMNS, digits=3, comment=comment)


def _ratios(rows: list[dict]) -> None:
  """The vs_* columns: each row's rate over a like row's (see above)."""
  from disco.studies import tables  # pylint: disable=g-import-not-at-top

  def before(row: dict):  # The other revision's code, for this one's rows.
    codes = [r['code'] for r in rows if r.get('code', 'this') != 'this']
    return codes[0] if codes and row.get('code', 'this') == 'this' else None

  for column, field, other in (
      ('vs_every', 'frame_embedding', lambda row: 'every'),
      ('vs_rolled', 'inner_scans', lambda row: 'rolled'),
      ('vs_twice', 'forward', lambda row: 'twice'),
      ('vs_each', 'state_gates', lambda row: 'each'),
      ('vs_before', 'code', before),
      ('vs_f32', 'compute_dtype', lambda row: 'float32'),
      ('vs_ac', 'rule', lambda row: 'actor_critic'),
  ):
    tables.ratios(
        rows,
        column,
        value='per_seed',
        fields=SETTING,
        field=field,
        other=other,
        defaults=SETTING_DEFAULTS,
    )


if __name__ == '__main__':
  sys.exit(main())
