"""The published Disco103 file: its address, digest and tensors, and its check.

Facts that identify `disco_103.npz` as the DiscoRL authors published it
(Google DeepMind, CC-BY 4.0), and `verify_disco103_bytes`, which holds any
bytes to them, wherever the bytes came from (a file or a download).
"""

from collections.abc import Mapping
import hashlib

import immutabledict

from disco import params_file

DISCO103_FILENAME = 'disco_103.npz'
DISCO103_URL = (
    'https://raw.githubusercontent.com/google-deepmind/disco_rl/main/'
    'disco_rl/update_rules/weights/disco_103.npz'
)
DISCO103_SHA256 = (
    'dac840a15b81e8805326363458c33979626172618f620d9e6e170315388530aa'
)
DISCO103_NUM_BYTES = 2_803_507
DISCO103_NUM_TENSORS = 42
DISCO103_NUM_FLOATS = 754_778
# Flat key -> shape of every tensor in `disco_103.npz` (all float32).
DISCO103_SHAPES: Mapping[str, tuple[int, ...]] = immutabledict.immutabledict({
    'lstm/linear/b': (256,),
    'lstm/linear/w': (128, 256),
    'lstm/linear_1/b': (1,),
    'lstm/linear_1/w': (256, 1),
    'lstm/linear_2/b': (600,),
    'lstm/linear_2/w': (256, 600),
    'lstm/linear_3/b': (600,),
    'lstm/linear_3/w': (256, 600),
    'lstm/linear_4/b': (1,),
    'lstm/linear_4/w': (16, 1),
    'lstm/lstm/linear/b': (1024,),
    'lstm/lstm/linear/w': (283, 1024),
    'lstm/mlp/~/linear_0/b': (16,),
    'lstm/mlp/~/linear_0/w': (600, 16),
    'lstm/mlp/~/linear_1/b': (1,),
    'lstm/mlp/~/linear_1/w': (16, 1),
    'lstm/mlp_1/~/linear_0/b': (16,),
    'lstm/mlp_1/~/linear_0/w': (600, 16),
    'lstm/mlp_1/~/linear_1/b': (1,),
    'lstm/mlp_1/~/linear_1/w': (16, 1),
    'lstm/sequential/conv1_d/b': (16,),
    'lstm/sequential/conv1_d/w': (1, 18, 16),
    'lstm/sequential/conv1_d_1/b': (2,),
    'lstm/sequential/conv1_d_1/w': (1, 32, 2),
    'lstm/sequential_1/conv1_d/b': (16,),
    'lstm/sequential_1/conv1_d/w': (1, 516, 16),
    'lstm/~/meta_lstm/~unroll/lstm/linear/b': (512,),
    'lstm/~/meta_lstm/~unroll/lstm/linear/w': (144, 512),
    'lstm/~/meta_lstm/~unroll/mlp/~/linear_0/b': (16,),
    'lstm/~/meta_lstm/~unroll/mlp/~/linear_0/w': (600, 16),
    'lstm/~/meta_lstm/~unroll/mlp/~/linear_1/b': (1,),
    'lstm/~/meta_lstm/~unroll/mlp/~/linear_1/w': (16, 1),
    'lstm/~/meta_lstm/~unroll/mlp_1/~/linear_0/b': (16,),
    'lstm/~/meta_lstm/~unroll/mlp_1/~/linear_0/w': (600, 16),
    'lstm/~/meta_lstm/~unroll/mlp_1/~/linear_1/b': (1,),
    'lstm/~/meta_lstm/~unroll/mlp_1/~/linear_1/w': (16, 1),
    'lstm/~/meta_lstm/~unroll/mlp_2/~/linear_0/b': (16,),
    'lstm/~/meta_lstm/~unroll/mlp_2/~/linear_0/w': (29, 16),
    'lstm/~/meta_lstm/~unroll/sequential/conv1_d/b': (16,),
    'lstm/~/meta_lstm/~unroll/sequential/conv1_d/w': (1, 18, 16),
    'lstm/~/meta_lstm/~unroll/sequential/conv1_d_1/b': (2,),
    'lstm/~/meta_lstm/~unroll/sequential/conv1_d_1/w': (1, 32, 2),
})


class ChecksumError(params_file.WeightsError):
  """The bytes of a weights file do not have the published SHA-256."""

  def __init__(self, message: str, *, expected: str, actual: str):
    super().__init__(message)
    self.expected = expected
    self.actual = actual


def verify_disco103_bytes(
    data: bytes, where: str, hint: str
) -> params_file.HostParams:
  """Checks bytes against the published digest and shapes, then decodes.

  Args:
    data: the bytes of a file said to be `disco_103.npz`.
    where: where they came from, for the messages.
    hint: what to do about a mismatch, appended to the message.

  Returns:
    The decoded parameters.

  Raises:
    ChecksumError: the SHA-256 is not `DISCO103_SHA256`.
    WeightsError: the bytes pass the checksum but are not an `.npz` with
      the tensors of `DISCO103_SHAPES`.
  """
  actual = hashlib.sha256(data).hexdigest()
  if actual != DISCO103_SHA256:
    raise ChecksumError(
        f'SHA-256 mismatch for the Disco103 weights in {where}: expected '
        f'{DISCO103_SHA256}, got {actual} ({len(data):,} bytes; the published '
        f'file has {DISCO103_NUM_BYTES:,}). The file is truncated, corrupt or '
        'not disco_103.npz (other update-rule parameters load with '
        f'load_update_rule_params). {hint}',
        expected=DISCO103_SHA256,
        actual=actual,
    )
  params = params_file.params_from_npz_bytes(data, where)
  params_file.validate_params(
      params,
      params_file.unflatten_params(DISCO103_SHAPES),
      what=f'The Disco103 weights in {where}',
  )
  return params
