"""Checkpoint reading (``na_training.checkpoints``): a checkpoint of another model config is refused from its
saved shapes, naming the array, before Orbax is asked to restore it."""

from __future__ import annotations

import jax
import orbax.checkpoint as ocp
import pytest
from flax import nnx

from na_training.checkpoints import restore_checkpoint, shape_mismatch


def _params(n_in: int, n_out: int):
    return nnx.state(nnx.Linear(n_in, n_out, rngs=nnx.Rngs(0)), nnx.Param)


@pytest.fixture
def saved(tmp_path):
    with ocp.CheckpointManager(tmp_path / "checkpoints", options=ocp.CheckpointManagerOptions(create=True)) as manager:
        manager.save(3, args=ocp.args.StandardSave({"params": _params(2, 3)}), force=True)
        manager.wait_until_finished()
    return tmp_path / "checkpoints"


def _abstract(n_in: int, n_out: int):
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, {"params": _params(n_in, n_out)})


def test_the_same_shapes_pass_and_restore(saved) -> None:
    assert shape_mismatch(saved, 3, _abstract(2, 3)) is None
    with ocp.CheckpointManager(saved) as manager:
        tree = restore_checkpoint(manager, 3, _abstract(2, 3), "run")
    assert sorted(leaf.shape for leaf in jax.tree.leaves(tree["params"])) == [(2, 3), (3,)]


def test_another_shape_is_named_with_both_sizes(saved) -> None:
    said = shape_mismatch(saved, 3, _abstract(4, 3))
    assert said is not None and "kernel" in said and "(2, 3)" in said and "(4, 3)" in said
    with ocp.CheckpointManager(saved) as manager, pytest.raises(ValueError, match=r"checkpoint 3 .*kernel"):
        restore_checkpoint(manager, 3, _abstract(4, 3), "run")


def test_a_missing_array_is_named(saved) -> None:
    abstract = _abstract(2, 3)
    abstract["params"]["extra"] = jax.ShapeDtypeStruct((5,), "float32")
    said = shape_mismatch(saved, 3, abstract)
    assert said is not None and "extra" in said
