"""Reading TensorBoard event files back, as TensorBoard itself does."""

import pytest


def tensorboard_scalars(directory):
  """{tag: [(step, value)]} of the event files in `directory`, as TB reads."""
  accumulator = pytest.importorskip(
      'tensorboard.backend.event_processing.event_accumulator'
  )
  events = accumulator.EventAccumulator(str(directory))
  events.Reload()
  return {
      tag: [(e.step, e.value) for e in events.Scalars(tag)]
      for tag in events.Tags()['scalars']
  }
